"""How a code process is isolated: its command line, environment, user and directory.

What this gives, on Linux (`launch.py` applies it inside the new process):

- resource limits (`setrlimit`): address space, CPU seconds, open files,
  processes, file size; no core files;
- an environment built from nothing (PATH, LANG, thread counts): none of the
  server's variables (API keys, DATABASE_URL …) reach the code;
- a working directory per chat; as root also: its own user id per kernel
  slot (so other chats' files, the server's files and /proc/<pid>/environ of
  the server are out of reach, and the process limit counts), a private
  /tmp, /var/tmp and /dev/shm, and `hide` (the data directory) covered;
- with `network=False`, a network namespace with no interface (`unshare
  --net`; without root, `unshare -rn` where user namespaces are allowed).

What it does not give: a seccomp filter, a separate kernel (a container or
VM), limits on disk space in the working directory, or hiding of files that
are world-readable on the host. `isolation()` reports what this host allows.
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

__all__ = ["Isolation", "Sandbox", "SandboxLimits", "isolation"]

LAUNCH = str(Path(__file__).with_name("launch.py"))
_KEEP_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")
BASE_UID = 200_000
"""As root, slot n of a sandbox runs as uid/gid `base_uid + n`: ids no account uses.
Each sandbox (one per code directory) gets its own block of `UID_BLOCK` ids, from a
hash of its directory, so two servers (or test workers) never share a user, and so
neither their files nor their process counts."""
UID_BLOCK = 2000
_UID_BLOCKS = 1_000_000


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Per-process limits of one kernel (or one subprocess run)."""

    cpu_seconds: int = 600
    """CPU time over the kernel's whole life; past it the kernel is killed (and restarts)."""
    memory_bytes: int = 2 * 1024**3
    """Address space; an allocation past it raises MemoryError in the cell."""
    open_files: int = 256
    processes: int = 64
    """Processes and threads of the kernel's user (per kernel when running as root)."""
    file_bytes: int = 256 * 1024**2
    """Largest file a cell may write."""
    network: bool = False
    """False: no network at all (a namespace with no interface), where the host allows it."""


@dataclass(frozen=True, slots=True)
class Isolation:
    """What this host lets the sandbox do."""

    root: bool
    """Own user per kernel, private /tmp, hidden directories."""
    no_network: bool
    """A network namespace can be made (`unshare`)."""


@functools.cache
def isolation() -> Isolation:
    root = os.geteuid() == 0
    unshare = shutil.which("unshare")
    probe = [unshare, "--net", "--mount", "true"] if root else [unshare, "-rn", "true"]
    ok = False
    if unshare is not None:
        try:
            ok = subprocess.run(probe, capture_output=True, timeout=10).returncode == 0  # type: ignore[arg-type]
        except (OSError, subprocess.SubprocessError):
            ok = False
    return Isolation(root=root and ok, no_network=ok)


class Sandbox:
    """Builds the command and environment of an isolated process (module doc)."""

    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),
        *,
        hide: Sequence[str | Path] = (),
        python: str = sys.executable,
        key: str = "",
    ) -> None:
        """`key` (the code directory) picks the sandbox's block of user ids."""
        self.limits = limits
        block = int(hashlib.sha256(key.encode()).hexdigest(), 16) % _UID_BLOCKS
        self.base_uid = BASE_UID + block * UID_BLOCK
        self.hide = [str(Path(p).resolve()) for p in hide]
        self.python = python
        self.host = isolation()

    def uid(self, slot: int) -> int | None:
        return self.base_uid + slot if self.host.root else None

    def command(
        self, cmd: Sequence[str], workdir: Path, slot: int, *, expose: Sequence[Path] = ()
    ) -> list[str]:
        """`cmd` wrapped: `unshare` (network, mounts), then `launch.py` (limits, user).

        `expose` are host directories the process must reach at their own path
        (the kernel's connection file and sockets)."""
        lim = self.limits
        prefix: list[str] = []
        if self.host.root:
            prefix = ["unshare", "--mount", "--propagation", "private"]
            if not lim.network:
                prefix.insert(1, "--net")
        elif not lim.network and self.host.no_network:
            prefix = ["unshare", "-rn"]
        args = [
            self.python,
            "-I",
            LAUNCH,
            f"--mem={lim.memory_bytes}",
            f"--cpu={lim.cpu_seconds}",
            f"--nofile={lim.open_files}",
            f"--nproc={lim.processes}",
            f"--fsize={lim.file_bytes}",
            f"--workdir={workdir}",
        ]
        uid = self.uid(slot)
        if uid is not None:
            args += [f"--uid={uid}", "--private-tmp"]
            args += [f"--hide={p}" for p in self.hide]
            shown = [*_python_dirs(self.python), *(str(p) for p in expose)]
            args += [f"--expose={p}" for p in shown]
        return [*prefix, *args, "--", *cmd]

    def env(self) -> dict[str, str]:
        """An environment from nothing: no variable of the server passes but the locale."""
        env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
        env.update(
            PATH=f"{Path(self.python).parent}:/usr/local/bin:/usr/bin:/bin",
            MPLBACKEND="module://matplotlib_inline.backend_inline",
            OPENBLAS_NUM_THREADS="1",
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
            PYTHONUNBUFFERED="1",
            PYDEVD_DISABLE_FILE_VALIDATION="1",
        )
        return env

    def own(self, path: Path, slot: int | None) -> None:
        """Give `path` (recursively) to slot's user, or back to us when `slot` is None."""
        if not self.host.root:
            return
        uid = os.geteuid() if slot is None else self.base_uid + slot
        gid = os.getegid() if slot is None else self.base_uid + slot
        for base, dirs, files in os.walk(path):
            for name in [*dirs, *files]:
                os.lchown(os.path.join(base, name), uid, gid)
        os.chown(path, uid, gid)


def _python_dirs(python: str) -> list[str]:
    """Where the interpreter and its packages live (bound back if a closed parent hides them)."""
    found = {sys.base_prefix, sys.prefix, str(Path(python).resolve().parent.parent)}
    return sorted(p for p in found if os.path.isdir(p))
