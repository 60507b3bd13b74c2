"""User ids for sandboxed code: one per kernel (or subprocess run), never shared while in use.

A kernel's user id is its identity on the host: its files, its process
count (`RLIMIT_NPROC` counts per user), whom it may signal or trace. The
rules, each kept here:

1. Every sandbox (one per code directory) draws from its own block of ids
   that no account uses (`Block`), so two servers never share a user.
2. An id is *leased*: an exclusive `flock` on `<state>/<uid>` held by the
   process that runs the kernel. The kernel holds it from before it starts
   until nothing runs under the id any more; a server that dies drops its
   locks with it (the kernel dies too: bubblewrap's `--die-with-parent`).
3. Taking a lease re-checks /proc: an id under which anything still runs
   (a process left by a dead server whose lock is gone) is cleared first
   (SIGKILL), and that id is skipped this time.
4. `sweep()` (at start-up) does the same for every id of the block with a
   process and no lock, so leftovers of a killed server die at the restart.

Signals go through a pidfd taken before the process's user is re-read, so a
recycled pid is never signalled by mistake.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
from collections.abc import Iterable
from pathlib import Path

from toolrelay.errors import ToolError

__all__ = ["Leases", "processes_of"]

log = logging.getLogger(__name__)

_GONE_WAIT = 30.0
"""Seconds a retired id may take to have nothing running under it before it is given up."""


def _uid_of(pid: str) -> int | None:
    """The real user id of process `pid` (zombies included: they still count for
    RLIMIT_NPROC); None when it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def processes_of(uids: Iterable[int]) -> dict[int, list[int]]:
    """Pids of the processes whose real user id is in `uids`, by user id (one /proc scan)."""
    wanted = frozenset(uids)
    found: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            uid = _uid_of(entry.name)
            if uid in wanted:
                found.setdefault(uid, []).append(int(entry.name))
    return found


def _kill(pids: Iterable[int], uid: int) -> None:
    """SIGKILL each pid that still is a process of `uid`."""
    for pid in pids:
        try:
            handle = os.pidfd_open(pid)
        except OSError:
            continue  # gone already
        try:
            if _uid_of(str(pid)) == uid:
                signal.pidfd_send_signal(handle, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(handle)


class Leases:
    """The block `[first, first + count)` of user ids, leased one at a time (module doc)."""

    def __init__(self, first: int, count: int, state: Path) -> None:
        self.first = first
        self.count = count
        self.state = state
        state.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._held: dict[int, int] = {}
        self._next = 0

    def _lock(self, uid: int) -> int | None:
        """Our lock fd on `uid`, or None when another process holds it."""
        fd = os.open(
            self.state / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    def sweep(self) -> list[int]:
        """Kill what runs under an id of the block that no live server holds; those ids."""
        block = range(self.first, self.first + self.count)
        cleared = []
        for uid, pids in processes_of(block).items():
            if uid in self._held:
                continue
            fd = self._lock(uid)
            if fd is None:
                continue  # a live server's kernel
            try:
                _kill(pids, uid)
                cleared.append(uid)
            finally:
                os.close(fd)
        if cleared:
            log.warning("killed processes left under sandbox users %s", cleared)
        return cleared

    def take(self) -> int:
        """A user id nothing runs under, leased to the caller until `give_back`."""
        for step in range(self.count):
            uid = self.first + (self._next + step) % self.count
            if uid in self._held:
                continue
            fd = self._lock(uid)
            if fd is None:
                continue
            left = processes_of([uid]).get(uid)
            if left:  # a dead server's leftovers: clear them, use another id now
                _kill(left, uid)
                os.close(fd)
                continue
            self._held[uid] = fd
            self._next = (uid - self.first + 1) % self.count
            return uid
        raise ToolError(f"all {self.count} sandbox user ids are in use")

    async def give_back(self, uid: int) -> None:
        """End the lease once nothing runs under `uid` (what still does is killed). An id
        that will not clear stays leased: it is never handed out with something in it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _GONE_WAIT
        while left := processes_of([uid]).get(uid):
            if loop.time() > deadline:
                log.error(
                    "processes of sandbox user %d do not die: %s; its id is retired", uid, left
                )
                return
            _kill(left, uid)
            await asyncio.sleep(0.01)
        fd = self._held.pop(uid, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        """Drop every lease (the process is ending; its kernels are stopped)."""
        for fd in self._held.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._held.clear()
