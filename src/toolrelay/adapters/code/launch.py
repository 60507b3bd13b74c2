"""The first program of a sandboxed code process: limits, mounts, user, then `exec`.

Run as `python -I launch.py [options] -- CMD ...` (by path, so no package is
imported): standard library only. It runs inside the namespaces `unshare`
made (`sandbox.py` builds the command line), while still privileged:

1. with `--private-tmp` (a fresh mount namespace): an empty tmpfs on /tmp,
   /var/tmp and /dev/shm, so nothing written there reaches the host, and the
   working directory bound at `/tmp/work` (reachable whatever its parents'
   permissions are);
2. `setrlimit`: address space, CPU seconds, open files, processes, file size,
   no core files;
3. with `--uid`: drop every group and become that user (root keeps no power
   over the host's files, and the process limit counts per user);
4. `chdir` to the working directory and `exec` the command.

Any failure stops here with exit status 111 and one line on stderr: a kernel
that runs without the isolation it was asked for must not start.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import resource
import sys
from collections.abc import Sequence

_TMPFS_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
_LIMITS = {
    "mem": resource.RLIMIT_AS,
    "cpu": resource.RLIMIT_CPU,
    "nofile": resource.RLIMIT_NOFILE,
    "nproc": resource.RLIMIT_NPROC,
    "fsize": resource.RLIMIT_FSIZE,
}


INSIDE = "/tmp/work"
"""Where the working directory is seen from inside a private mount namespace."""
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    encoded = [None if v is None else v.encode() for v in (source, target, kind, data)]
    if libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {kind or source} on {target}: {os.strerror(err)}")


def _closed_ancestor(path: str) -> str | None:
    """The highest directory on the way to `path` that others may not pass through."""
    parts = os.path.abspath(path).split("/")[1:]
    for i in range(1, len(parts) + 1):
        here = "/" + "/".join(parts[:i])
        if os.path.isdir(here) and not os.stat(here).st_mode & 0o001:
            return here
    return None


def _under(path: str, tops: Sequence[str]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)


def _private_mounts(workdir: str, hide: list[str], expose: list[str]) -> str:
    """Private /tmp, /var/tmp, /dev/shm; `hide` covered by empty directories; `expose`
    (the Python the command needs, the kernel's sockets) bound back at their own paths,
    with closed parents covered so they can be reached; the working directory at
    INSIDE. Returns INSIDE."""
    handles = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in {workdir, *expose}}
    covered = [*_TMPFS_DIRS, *hide]
    closed = {a for a in map(_closed_ancestor, expose) if a is not None}
    covers = sorted(a for a in closed if not _under(a, covered))
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE, None)  # nothing propagates to the host
    for path in _TMPFS_DIRS:
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=64m,mode=1777")
    for path in sorted({*hide, *covers}):
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=755")
    for path in expose:
        if _under(path, [*covered, *covers]):
            os.makedirs(path, mode=0o755, exist_ok=True)
            _mount(f"/proc/self/fd/{handles[path]}", path, None, _MS_BIND | _MS_REC, None)
    os.mkdir(INSIDE)
    _mount(f"/proc/self/fd/{handles[workdir]}", INSIDE, None, _MS_BIND, None)
    for handle in handles.values():
        os.close(handle)
    return INSIDE


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        raise SystemExit("launch: usage: launch.py [options] -- CMD ...")
    cut = argv.index("--")
    parser = argparse.ArgumentParser(prog="launch")
    for name in _LIMITS:
        parser.add_argument(f"--{name}", type=int)
    parser.add_argument("--uid", type=int)
    parser.add_argument("--gid", type=int)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--private-tmp", action="store_true")
    parser.add_argument("--hide", action="append", default=[])
    parser.add_argument("--expose", action="append", default=[])
    return parser.parse_args(argv[:cut]), argv[cut + 1 :]


def main(argv: list[str]) -> None:
    args, cmd = _parse(argv)
    if not cmd:
        raise SystemExit("launch: no command")
    try:
        workdir = (
            _private_mounts(args.workdir, args.hide, args.expose)
            if args.private_tmp
            else args.workdir
        )
        for name, which in _LIMITS.items():
            value = getattr(args, name)
            if value is not None:
                resource.setrlimit(which, (value, value))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if args.uid is not None:
            gid = args.gid if args.gid is not None else args.uid
            os.setgroups([])
            os.setgid(gid)
            os.setuid(args.uid)
        os.chdir(workdir)
        os.environ["HOME"] = os.environ["PWD"] = workdir
    except OSError as exc:
        sys.stderr.write(f"launch: cannot isolate the process: {exc}\n")
        sys.exit(111)
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
