"""`users.Leases`: a user id per kernel, never handed out while anything runs under it.

Real processes under real user ids (`setpriv`, as root); "another server" is
a second open file description holding the id's `flock`, as another process's
would.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.code.hostview import kill_all, until
from toolrelay.adapters.code.users import Leases, processes_of
from toolrelay.errors import ToolError

pytestmark = pytest.mark.anyio

FIRST = 3_000_000_000 + (os.getpid() % 1000) * 10
"""Ids no account uses, above every sandbox block, apart for each test worker."""


@pytest.fixture
def leases(tmp_path: Path) -> Iterator[Leases]:
    made = Leases(FIRST, 4, tmp_path / "users")
    yield made
    made.close()
    kill_all(range(FIRST, FIRST + 4))


def plant(uid: int) -> subprocess.Popen[bytes]:
    """A process of `uid` in its own session, as a killed server's kernel leaves."""
    return subprocess.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "3600"],
        start_new_session=True,
    )


def hold(leases: Leases, uid: int) -> int:
    """Lock `uid` as another live server would."""
    fd = os.open(leases.state / str(uid), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


async def test_ids_are_leased_once_and_skipped_when_another_server_holds_them(
    leases: Leases,
) -> None:
    other = hold(leases, FIRST + 1)
    try:
        taken = [leases.take(), leases.take(), leases.take()]
        assert taken == [FIRST, FIRST + 2, FIRST + 3]
        with pytest.raises(ToolError, match="all 4 sandbox user ids are in use"):
            leases.take()
        await leases.give_back(FIRST + 2)
        assert leases.take() == FIRST + 2
    finally:
        os.close(other)


async def test_an_id_with_a_leftover_is_cleared_and_skipped(leases: Leases) -> None:
    leftover = plant(FIRST)
    try:
        await until(lambda: bool(processes_of([FIRST])), "the leftover runs")
        assert leases.take() == FIRST + 1
        await until(lambda: leftover.poll() is not None, "the leftover is killed")
        assert leftover.returncode == -signal.SIGKILL
    finally:
        leftover.kill()
        leftover.wait()


async def test_give_back_ends_what_still_runs_before_the_id_is_free(leases: Leases) -> None:
    uid = leases.take()
    straggler = plant(uid)
    try:
        await until(lambda: bool(processes_of([uid])), "the straggler runs")
        # its parent (this process) reaps it meanwhile: a zombie still counts as running
        _, status = await asyncio.gather(leases.give_back(uid), asyncio.to_thread(straggler.wait))
        assert status == -signal.SIGKILL
        fd = hold(leases, uid)  # the lock is free again
        os.close(fd)
    finally:
        straggler.kill()
        straggler.wait()


async def test_sweep_kills_only_what_no_live_server_holds(leases: Leases) -> None:
    orphan, owned = plant(FIRST), plant(FIRST + 1)
    other = hold(leases, FIRST + 1)
    try:
        await until(lambda: len(processes_of([FIRST, FIRST + 1])) == 2, "both run")
        assert leases.sweep() == [FIRST]
        await until(lambda: orphan.poll() is not None, "the orphan is killed")
        assert owned.poll() is None
    finally:
        os.close(other)
        for proc in (orphan, owned):
            proc.kill()
            proc.wait()
