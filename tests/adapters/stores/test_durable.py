"""What the turn lifecycle needs from a store: checkpoints, orphan lists, writes under load."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from toolrelay.adapters.stores import Store
from toolrelay.adapters.stores.sql import SQLStore

from .conftest import postgres_database
from .test_store import completed_turn

pytestmark = pytest.mark.anyio


def partial(text_so_far: str) -> dict[str, Any]:
    return completed_turn(text_so_far, status="in_progress", usage=None, follow_ups=[])


async def test_checkpoint_overwrites_only_a_turn_still_in_progress(store: Store) -> None:
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    await store.save_turn(chat.id, "msg_a", partial(""))
    assert await store.checkpoint_turn(chat.id, "msg_a", partial("Hello")) is True
    [row] = await store.get_messages(chat.id)
    assert (row.status, row.content) == ("in_progress", "Hello")

    await store.save_turn(chat.id, "msg_a", completed_turn("Hello world"))
    assert await store.checkpoint_turn(chat.id, "msg_a", partial("Hel")) is False  # too late
    [row] = await store.get_messages(chat.id)
    assert (row.status, row.content) == ("completed", "Hello world")
    assert await store.checkpoint_turn(chat.id, "msg_missing", partial("x")) is False


async def test_in_progress_turns_lists_every_unfinished_assistant_turn(store: Store) -> None:
    alice = await store.create_user("alice")
    first = await store.create_chat(alice.id)
    second = await store.create_chat(alice.id)
    await store.add_message(first.id, {"role": "user", "content": "hi"})
    await store.save_turn(first.id, "msg_1", partial("par"))
    await store.save_turn(first.id, "msg_2", completed_turn())
    await store.save_turn(second.id, "msg_3", partial(""))
    found = await store.in_progress_turns()
    assert sorted((m.chat_id, m.id) for m in found) == sorted(
        [(first.id, "msg_1"), (second.id, "msg_3")]
    )
    assert [m.id for m in await store.in_progress_turns(chat_id=first.id)] == ["msg_1"]
    assert next(m for m in found if m.id == "msg_1").content == "par"


async def _hammer(store: SQLStore, chats: int) -> None:
    """Many turns writing at once, each reading before writing inside its transaction."""
    alice = await store.create_user("alice")
    ids = [(await store.create_chat(alice.id)).id for _ in range(chats)]

    async def one(chat_id: str) -> None:
        await store.add_message(chat_id, {"role": "user", "content": "q"})
        await store.save_turn(chat_id, f"m_{chat_id}", partial(""))
        await store.checkpoint_turn(chat_id, f"m_{chat_id}", partial("half"))
        await store.save_turn(chat_id, f"m_{chat_id}", completed_turn("x" * 2000))

    await asyncio.gather(*(one(chat_id) for chat_id in ids))
    for chat_id in ids:
        messages = await store.get_messages(chat_id)
        assert [m.status for m in messages] == [None, "completed"]


async def test_sqlite_takes_many_concurrent_writers_without_locking_errors(
    tmp_path: Path,
) -> None:
    store = await SQLStore.open(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    try:
        await _hammer(store, 200)
        async with store.engine.connect() as connection:
            timeout = (await connection.execute(text("PRAGMA busy_timeout"))).scalar()
        assert timeout is not None and timeout >= 10_000
    finally:
        await store.close()


@pytest.mark.postgres
async def test_postgres_pool_is_sized_by_the_caller() -> None:
    async with postgres_database() as url:
        store = await SQLStore.open(url, pool_size=3, max_overflow=2, pool_timeout=60)
        try:
            pool: Any = store.engine.pool
            assert (pool.size(), pool._max_overflow, pool._timeout) == (3, 2, 60)
            await _hammer(store, 50)
        finally:
            await store.close()
