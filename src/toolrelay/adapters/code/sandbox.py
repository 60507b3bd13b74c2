"""How a code process is isolated: its command line, environment, user and files.

Two levels (docs/code-interpreter.md says what each keeps out, and why):

`full` (the default; needs root, bubblewrap and util-linux's prlimit and
setpriv) runs each kernel as

    bwrap [namespaces, mounts] -- prlimit [limits] -- setpriv [user] -- python …

- bubblewrap gives it its own PID, IPC, UTS and cgroup namespaces (and a
  network namespace with only a loopback when `network=False`, which also
  keeps the host's abstract Unix sockets out); its own `/proc`; a root made
  of read-only `/usr` and `/etc` (and the Python it runs), an empty `/run`,
  a minimal `/dev`, small private tmpfs on `/tmp`, `/var/tmp` and
  `/dev/shm`, its chat's directory at `/tmp/work` and its socket directory;
  nothing else of the host (no /home, /root, /srv, /var, other chats, the
  data directory, host sockets). `--die-with-parent`: the whole sandbox dies
  with the server, and bubblewrap's init kills every process of the
  namespace (`setsid`, double forks) when the kernel ends;
- prlimit sets the resource limits (address space, CPU seconds, open
  files, processes, file size, no core files);
- setpriv becomes the kernel's own user (`users.Leases`: one per kernel,
  never shared while anything runs under it, so the process limit is per
  kernel), with no groups, no capabilities and `no_new_privs`.

`basic` (for a single trusted user on a host without root): the limits,
the environment, a working directory, and where allowed a network
namespace (`unshare -rn`); the code runs as the server's user and sees what
it sees. Chosen only explicitly (`code_interpreter.sandbox = "basic"`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from toolrelay.adapters.code import files
from toolrelay.adapters.code.users import Leases
from toolrelay.errors import ToolError

__all__ = ["INSIDE", "Isolation", "Level", "Sandbox", "SandboxLimits", "SandboxUnavailable"]

Level = Literal["full", "basic"]
INSIDE = "/tmp/work"
"""Where the chat's directory is seen from inside the sandbox."""
BASE_UID = 200_000
"""Sandbox users are ids from here on, which no account uses. Each sandbox (one per code
directory) gets its own block of `UID_BLOCK` ids, from a hash of its directory, so two
servers never share a user."""
UID_BLOCK = 2000
_UID_BLOCKS = 1_000_000
_KEEP_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")
_SYSTEM = ("/usr", "/etc")
"""Read-only host trees every sandbox sees."""
_ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_TMPFS = ("/tmp", "/var/tmp", "/dev/shm")
_TMPFS_BYTES = 64 * 1024**2
_PROBE_UID = 65534


class SandboxUnavailable(ToolError):
    """The host lacks what the `full` sandbox needs; the message says what."""


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Per-process limits of one kernel (or one subprocess run)."""

    cpu_seconds: int = 600
    """CPU time over the kernel's whole life; past it the kernel is killed (and restarts)."""
    memory_bytes: int = 2 * 1024**3
    """Address space; an allocation past it raises MemoryError in the cell."""
    open_files: int = 256
    processes: int = 64
    """Processes and threads of the kernel (its own user's count)."""
    file_bytes: int = 256 * 1024**2
    """Largest file a cell may write."""
    network: bool = False
    """False: no network at all (a namespace with only a loopback)."""


@dataclass(frozen=True, slots=True)
class Isolation:
    """What this host lets the sandbox do."""

    full: bool
    """The `full` level works here (module doc)."""
    missing: str
    """Why it does not ('' when it does)."""
    no_network: bool
    """The `basic` level can make a network namespace (`unshare`)."""


def _runs(cmd: list[str]) -> str | None:
    """None when `cmd` exits 0, else the last line it wrote (or why it could not run)."""
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    said = done.stderr.decode(errors="replace").strip().splitlines()
    return said[-1] if said else f"exit status {done.returncode}"


@functools.cache
def isolation() -> Isolation:
    """Probe the host once: the real `full` command line, run on `true`."""
    tools = {name: shutil.which(name) for name in ("bwrap", "prlimit", "setpriv", "unshare")}
    probe = ["unshare", "--net", "true"] if os.geteuid() == 0 else ["unshare", "-rn", "true"]
    no_network = tools["unshare"] is not None and _runs(probe) is None
    if os.geteuid() != 0:
        return Isolation(False, "root (the server runs as a normal user)", no_network)
    absent = [name for name in ("bwrap", "prlimit", "setpriv") if tools[name] is None]
    if absent:
        hint = " (apt-get install bubblewrap)" if "bwrap" in absent else ""
        return Isolation(False, f"{', '.join(absent)} on PATH{hint}", no_network)
    cmd = [*_bwrap(SandboxLimits(), (), "/", ()), *_limits(SandboxLimits(processes=8))]
    said = _runs([*cmd, *_drop(_PROBE_UID), "true"])
    if said is not None:
        return Isolation(False, f"bubblewrap's namespaces ({said})", no_network)
    return Isolation(True, "", no_network)


class Sandbox:
    """Builds the command, environment and users of isolated processes (module doc)."""

    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),
        *,
        root: Path,
        hide: Sequence[str | Path] = (),
        python: str = sys.executable,
        level: Level = "full",
    ) -> None:
        """`root` (the code directory) picks the block of user ids and keeps their locks;
        `hide` are paths (the data directory, the config file) the code must not see.
        `SandboxUnavailable` when the level cannot be had here."""
        self.limits = limits
        self.level = level
        self.python = python
        self.host = isolation()
        self.hide = [Path(p).resolve() for p in hide]
        key = str(root.resolve())
        block = int(hashlib.sha256(key.encode()).hexdigest(), 16) % _UID_BLOCKS
        self.base_uid = BASE_UID + block * UID_BLOCK
        self.users: Leases | None = None
        if level == "full":
            if not self.host.full:
                raise SandboxUnavailable(
                    f"the code sandbox needs {self.host.missing}; on a host for one trusted "
                    "user set code_interpreter.sandbox = 'basic' (docs/code-interpreter.md)"
                )
            self.users = Leases(self.base_uid, UID_BLOCK, root / ".users")
            self.users.sweep()

    def take_user(self) -> int | None:
        """A user id of its own for one process tree (None at the `basic` level)."""
        return self.users.take() if self.users is not None else None

    async def give_back(self, uid: int | None) -> None:
        """`uid` is free again once nothing runs under it (`Leases.give_back`)."""
        if self.users is not None and uid is not None:
            await self.users.give_back(uid)

    def close(self) -> None:
        if self.users is not None:
            self.users.close()

    def command(
        self, cmd: Sequence[str], workdir: Path, uid: int | None, *, expose: Sequence[Path] = ()
    ) -> list[str]:
        """`cmd` wrapped in the sandbox; `expose` are host directories the process needs
        at their own path (the kernel's connection file and sockets)."""
        if uid is None:
            return [*self._basic(), *_limits(self.limits), *cmd]
        shown = [*_python_dirs(self.python), *(str(p) for p in expose)]
        wrap = _bwrap(self.limits, self.hide, str(workdir), shown, expose=len(expose))
        return [*wrap, *_limits(self.limits), *_drop(uid), *cmd]

    def _basic(self) -> list[str]:
        if self.limits.network or not self.host.no_network:
            return []
        return ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "-rn"]

    def workdir_inside(self, workdir: Path) -> str:
        """The working directory as the code sees it."""
        return INSIDE if self.level == "full" else str(workdir)

    def env(self, workdir: Path) -> dict[str, str]:
        """An environment from nothing: no variable of the server passes but the locale."""
        env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
        home = self.workdir_inside(workdir)
        env.update(
            PATH=f"{Path(self.python).parent}:/usr/local/bin:/usr/bin:/bin",
            HOME=home,
            PWD=home,
            MPLBACKEND="module://matplotlib_inline.backend_inline",
            OPENBLAS_NUM_THREADS="1",
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
            PYTHONUNBUFFERED="1",
            PYDEVD_DISABLE_FILE_VALIDATION="1",
        )
        return env

    def own(self, path: Path, uid: int | None) -> None:
        """Give `path` (recursively, no symlink followed) to `uid`, or back to the server
        when `uid` is None. Nothing to do at the `basic` level."""
        if self.users is None:
            return
        if uid is None:
            files.own(path, os.geteuid(), os.getegid())
        else:
            files.own(path, uid, uid)


def _limits(lim: SandboxLimits) -> list[str]:
    return [
        "prlimit",
        f"--as={lim.memory_bytes}",
        f"--cpu={lim.cpu_seconds}",
        f"--nofile={lim.open_files}",
        f"--nproc={lim.processes}",
        f"--fsize={lim.file_bytes}",
        "--core=0",
        "--",
    ]


def _drop(uid: int) -> list[str]:
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]


def _under(path: str, tops: Sequence[str]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)


class _Root:
    """bubblewrap's arguments for the sandbox's file system, in mount order."""

    def __init__(self) -> None:
        self.args: list[str] = []
        self.binds: list[str] = []
        """Host trees bound in: what is under them exists inside as on the host."""
        self.made: set[str] = set()
        """Mount points, directories and symlinks made inside."""

    def exists(self, path: str) -> bool:
        return path == "/" or path in self.made or _under(path, self.binds)

    def parents(self, path: str) -> None:
        """Make `path`'s missing parents (mode 0755: bubblewrap would copy a closed one's)."""
        for parent in reversed([str(p) for p in Path(path).parents]):
            if not self.exists(parent):
                self.args += ["--perms", "0755", "--dir", parent]
                self.made.add(parent)

    def mount(self, *args: str, bind: bool = False) -> None:
        """One mount (or symlink) on `args[-1]`, its parents made first; `bind`: a host
        tree seen as it is."""
        self.parents(args[-1])
        self.args += args
        if bind:
            self.binds.append(args[-1])
        else:
            self.made.add(args[-1])


def _bwrap(
    lim: SandboxLimits,
    hide: Sequence[Path],
    workdir: str,
    shown: Sequence[str],
    expose: int = 0,
) -> list[str]:
    """The bubblewrap command for the module doc's file system; the last `expose` of
    `shown` are bound read-write, the others read-only."""
    ns = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not lim.network:
        ns.append("--unshare-net")
    root = _system()
    readonly, writable = shown[: len(shown) - expose], shown[len(shown) - expose :]
    for path in readonly:
        if not _under(path, root.binds):
            root.mount("--ro-bind", path, path, bind=True)
    for hidden in hide:  # what is not bound is not there; these are under what is
        if hidden.exists() and _under(str(hidden), root.binds):
            cover = (
                ("--perms", "0755", "--tmpfs") if hidden.is_dir() else ("--ro-bind", "/dev/null")
            )
            root.mount(*cover, str(hidden))
    if lim.network:
        _resolver(root)
    if workdir != "/":
        root.mount("--bind", workdir, INSIDE)
    for path in writable:
        root.mount("--bind", path, path, bind=True)
    return [
        "bwrap",
        *ns,
        "--die-with-parent",
        "--new-session",
        *root.args,
        "--chdir",
        INSIDE if workdir != "/" else "/",
        "--",
    ]


def _system() -> _Root:
    """The read-only system trees, /proc, /dev, the private tmpfs and an empty /run."""
    root = _Root()
    for top in _SYSTEM:
        root.mount("--ro-bind", top, top, bind=True)
    for top in _ROOT_LINKS:
        if os.path.islink(top):
            root.mount("--symlink", os.readlink(top), top)
        elif os.path.isdir(top):
            root.mount("--ro-bind", top, top, bind=True)
    root.mount("--proc", "/proc")
    root.mount("--dev", "/dev")
    for top in _TMPFS:
        root.mount("--size", str(_TMPFS_BYTES), "--perms", "1777", "--tmpfs", top)
    root.mount("--perms", "0755", "--tmpfs", "/run")
    return root


def _resolver(root: _Root) -> None:
    """With the network on, /etc/resolv.conf's target where it points outside /etc
    (systemd-resolved keeps it under /run)."""
    real = os.path.realpath("/etc/resolv.conf")
    if os.path.isfile(real) and not _under(real, [*_SYSTEM]):
        root.mount("--ro-bind", real, real, bind=True)


def _python_dirs(python: str) -> list[str]:
    """Where the interpreter and its packages live (never the host's root itself)."""
    found = {sys.base_prefix, sys.prefix, str(Path(python).resolve().parent.parent)}
    return sorted(p for p in found if p != "/" and os.path.isdir(p))
