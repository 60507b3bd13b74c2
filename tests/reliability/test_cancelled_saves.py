"""A store call cancelled part-way (a turn cancelled while it is being saved, a client
that leaves) never leaves the database locked.

Issue 24 item 1: on SQLite, a cancel that landed inside a write transaction
(`save_turn` as a turn finished) left the connection's write lock held for
good: every later write waited the busy timeout and failed with "database is
locked". Here every write is cancelled after each possible number of event-loop
steps, and a plain write must still answer after each one. On PostgreSQL the
same races must leave nothing half-written either.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.stores.conftest import postgres_database
from tests.patience import HANG
from toolrelay.adapters.stores.sql import SQLStore

pytestmark = pytest.mark.anyio

STEPS = 60
"""Cancel points tried per write: 0..STEPS event-loop steps after it starts (a write is
fewer steps than this on both backends, so every await inside it is hit)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _cancel_after(steps: int, work: Awaitable[Any]) -> None:
    task = asyncio.ensure_future(work)
    for _ in range(steps):
        await asyncio.sleep(0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _races(store: SQLStore) -> None:
    user = await store.create_user("racer")
    chat = await store.create_chat(user.id)
    writes: list[Callable[[int], Awaitable[Any]]] = [
        lambda i: store.save_turn(
            chat.id, f"msg_{i}", {"content": f"answer {i}", "status": "completed"}
        ),
        lambda i: store.add_message(chat.id, {"role": "user", "content": f"q{i}"}),
        lambda i: store.create_chat(user.id, title=f"chat {i}"),
        lambda i: store.checkpoint_turn(chat.id, f"msg_{i}", {"content": "x"}),
    ]
    for steps in range(STEPS):
        for n, write in enumerate(writes):
            await _cancel_after(steps, write(steps * 10 + n))
            # a plain write answers at once, nothing holds the write lock
            async with asyncio.timeout(HANG):
                await store.update_chat(chat.id, title=f"after {steps}.{n}")
    assert (await store.get_chat(chat.id, user_id=user.id)) is not None


async def test_writes_cancelled_at_every_step_never_lock_sqlite(tmp_path: Path) -> None:
    store = await SQLStore.open(f"sqlite+aiosqlite:///{tmp_path / 'races.db'}")
    try:
        await _races(store)
    finally:
        await store.close()


@pytest.mark.postgres
async def test_writes_cancelled_at_every_step_leave_postgres_usable() -> None:
    async with postgres_database() as url:
        store = await SQLStore.open(url)
        try:
            await _races(store)
        finally:
            await store.close()
