"""Database upkeep: SQLite gives deleted chats' space back; `vacuum` converts older files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from toolrelay.adapters.stores import NewChat
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.adapters.stores.sql_upkeep import vacuum

pytestmark = pytest.mark.anyio

PAGE = "lorem ipsum dolor sit amet " * 400  # 10.8 KB a message


def _size(path: Path) -> int:
    with sqlite3.connect(path) as connection:  # fold the write-ahead log into the file
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _auto_vacuum(path: Path) -> int:
    with sqlite3.connect(path) as connection:
        return int(connection.execute("PRAGMA auto_vacuum").fetchone()[0])


async def _fill(store: SQLStore, count: int, prefix: str = "chat_") -> str:
    user = (await store.create_user("u")).id
    chats = [
        NewChat(
            id=f"{prefix}{i:05d}",
            user_id=user,
            title=f"chat {i}",
            model=None,
            tags=[],
            messages=[{"role": "user", "content": PAGE}],
            turn_id=f"msg_{i:05d}",
            turn={"output": [], "content": PAGE},
        )
        for i in range(count)
    ]
    await store.add_chats(chats)
    return user


async def test_deleting_chats_gives_their_space_back_on_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = await SQLStore.open(f"sqlite+aiosqlite:///{path}")
    try:
        assert _auto_vacuum(path) == 2  # incremental, from the first table on
        user = await _fill(store, 200, prefix="api_")
        full = _size(path)
        assert await store.prune_chats(id_prefix="api_", keep=0) == 200
        assert await store.list_chats(user) == ([], 0)
        pruned = _size(path)
        other = await _fill(store, 20)
        for i in range(20):
            assert await store.delete_chat(f"chat_{i:05d}", user_id=other)
        deleted = _size(path)
    finally:
        await store.close()
    assert full > 4_000_000
    assert pruned < full // 4 and deleted < full // 4  # the pages went back to the disk


async def test_vacuum_turns_an_older_file_incremental(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    url = f"sqlite+aiosqlite:///{path}"
    store = await SQLStore.open(url)
    try:
        user = await _fill(store, 100)
    finally:
        await store.close()
    with sqlite3.connect(path, isolation_level=None) as connection:  # as before auto-vacuum
        connection.execute("PRAGMA auto_vacuum=NONE")
        connection.execute("VACUUM")
    assert _auto_vacuum(path) == 0
    store = await SQLStore.open(url)
    try:
        for i in range(100):
            await store.delete_chat(f"chat_{i:05d}", user_id=user)
    finally:
        await store.close()
    kept = _size(path)  # without auto-vacuum the file keeps its size
    sizes = await anyio.to_thread.run_sync(vacuum, url)
    assert sizes is not None and sizes[1] < kept // 4
    assert _auto_vacuum(path) == 2 and _size(path) == sizes[1]


async def test_vacuum_leaves_postgresql_to_autovacuum(sql_url: str) -> None:
    if sql_url.startswith("sqlite"):
        with pytest.raises(FileNotFoundError):
            vacuum(sql_url)  # no file yet: nothing made up
        return
    assert vacuum(sql_url) is None
