"""Does deleting chats give the disk space back? (issue 31, item 7)

A SQLite database of 12,000 chats (`many_chats`' chats: a title, four messages),
10,000 of them deleted at once as the request log's retention does
(`prune_chats`). The file's size (write-ahead log folded in) before and after,
for a database this version creates (incremental auto-vacuum) and for one made
before it (auto-vacuum off; what `toolrelay db vacuum` then gives back).
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import sys
import tempfile
from pathlib import Path

from benchmarks.many_chats import BATCH, _chat
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.adapters.stores.sql_upkeep import vacuum

CHATS = 12_000
DELETED = 10_000


def size(path: Path) -> int:
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


async def fill(url: str, count: int) -> None:
    store = await SQLStore.open(url)
    try:
        user = await store.create_user("u")
        rng = random.Random(7)
        for start in range(0, count, BATCH):
            chats = [_chat(user.id, i, rng) for i in range(start, min(count, start + BATCH))]
            await store.add_chats(chats)
    finally:
        await store.close()


async def prune(url: str, keep: int) -> int:
    store = await SQLStore.open(url)
    try:
        return await store.prune_chats(id_prefix="chat_", keep=keep)
    finally:
        await store.close()


def run(quick: bool = False) -> None:
    count, deleted = (1_200, 1_000) if quick else (CHATS, DELETED)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for old in (False, True):
            path = Path(tmp) / f"upkeep_{old}.db"
            url = f"sqlite+aiosqlite:///{path}"
            asyncio.run(fill(url, count))
            if old:  # as a file made before auto-vacuum was on
                with sqlite3.connect(path, isolation_level=None) as connection:
                    connection.execute("PRAGMA auto_vacuum=NONE")
                    connection.execute("VACUUM")
            full = size(path)
            assert asyncio.run(prune(url, count - deleted)) == deleted
            after = size(path)
            vacuumed = vacuum(url)[1] if old else after  # type: ignore[index]
            rows.append(
                ("older file (auto-vacuum off)" if old else "new file", full, after, vacuumed)
            )
    print(f"\ndatabase upkeep: SQLite file size, {count:,} chats, {deleted:,} deleted")
    print(f"{'database':<30} {'full MB':>8} {'deleted MB':>11} {'db vacuum MB':>13}")
    for name, full, after, vacuumed in rows:
        print(f"{name:<30} {full / 1e6:>8.1f} {after / 1e6:>11.1f} {vacuumed / 1e6:>13.1f}")


if __name__ == "__main__":
    run(quick="--quick" in sys.argv)
