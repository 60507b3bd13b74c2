"""What the host sees of sandboxed code: its processes by user id, and waits on them.

The sandbox tests ask the cell for its user id (`os.getuid()` inside), then
look from the host at every process of that user, whatever its session,
parent or PID namespace; a leftover found here is a leftover the next chat
would meet.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterable

from tests.patience import HANG


def uid_of(pid: int) -> int | None:
    """The real user id of `pid` (from /proc, so a process that made itself
    non-dumpable is still seen); None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/status") as status:
            lines = status.read().splitlines()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    if fields.get("State", "").strip().startswith("Z"):
        return None
    return int(fields["Uid"].split()[0])


def processes_of(uids: Iterable[int]) -> list[int]:
    """Live processes (not zombies) whose real user id is one of `uids`."""
    wanted = set(uids)
    return [
        int(entry.name)
        for entry in os.scandir("/proc")
        if entry.name.isdigit() and uid_of(int(entry.name)) in wanted
    ]


def kill_all(uids: Iterable[int]) -> None:
    """SIGKILL every process of `uids` (clean-up after a test that found leftovers)."""
    for pid in processes_of(uids):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


async def until(check: Callable[[], bool], what: str, patience: float = HANG) -> None:
    """Wait until `check()` holds; fail naming `what` if it does not within `patience`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"still not true after {patience:g} s: {what}")
        await asyncio.sleep(0.05)
