"""Listing and searching one user's chats at 500 and 50,000 chats (issue 31, item 2).

Each chat has a title and three messages (a question, an answer, a follow-up) of
words drawn from a 5,000-word vocabulary, so a database of 50,000 chats holds about
200,000 messages. The same operations run on SQLite and on PostgreSQL, through
`SQLStore.list_chats` (what `GET /api/chats` calls):

- first page: the newest 50 and the total;
- deep page: 50 chats near the end of the list, reached with the cursor of the page
  before (and, for comparison, with `offset`, which the list still takes);
- search: a word found in about 0.1 % of the chats (rare), one in about 5 %
  (`w0001x`, middling), and one in every chat (common): the page and its total (a
  search matching too many to count says so instead, `stores.sql_search`).

Each figure is the best of several runs (wall time; the calls are database-bound).
The ratio is 50,000 against 500: flat is 1. Target: ≤ 20 ms at 50,000 on both.
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from toolrelay.adapters.stores import NewChat
from toolrelay.adapters.stores.listing import ChatCursor
from toolrelay.adapters.stores.sql import SQLStore

SIZES = (500, 50_000)
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
BATCH = 1000
VOCABULARY = [f"w{i:04d}x" for i in range(5000)]
RARE_EVERY = 1000


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(words)).capitalize() + "."


def _chat(user_id: str, index: int, rng: random.Random) -> NewChat:
    question = _sentence(rng, 20) + " everyone asks."
    if index % RARE_EVERY == 0:
        question += " Zanzibar?"
    messages = [
        {"role": "user", "content": question},
        {"role": "assistant", "content": _sentence(rng, 80)},
        {"role": "user", "content": _sentence(rng, 15)},
    ]
    turn = {"output": [], "content": _sentence(rng, 120), "status": "completed"}
    return NewChat(
        id=f"chat_{index:08d}",
        user_id=user_id,
        title=_sentence(rng, 5),
        model="m",
        tags=[],
        messages=messages,
        turn_id=f"msg_{index:08d}",
        turn=turn,
    )


async def fill(store: SQLStore, count: int) -> str:
    """`count` chats of one user, written in batches as the request log writes them."""
    user = await store.create_user("reader")
    rng = random.Random(count)
    for start in range(0, count, BATCH):
        await store.add_chats(
            [_chat(user.id, i, rng) for i in range(start, min(count, start + BATCH))]
        )
    return user.id


async def best_ms(call: Callable[[], Awaitable[Any]], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        await call()
        best = min(best, time.perf_counter() - start)
    return best * 1000


async def measure(store: SQLStore, user: str, count: int, repeat: int) -> dict[str, float]:
    deep_at = max(0, count - 100)
    before, _ = await store.list_chats(user, limit=1, offset=deep_at - 1, count=False)
    cursor = ChatCursor.after(before[0])

    async def deep_cursor() -> None:
        page, _ = await store.list_chats(user, limit=50, after=cursor)
        assert len(page) == 50

    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "first page": lambda: store.list_chats(user, limit=50),
        "deep page (cursor)": deep_cursor,
        "deep page (offset)": lambda: store.list_chats(user, limit=50, offset=deep_at),
        "search rare word": lambda: store.list_chats(user, limit=50, query="zanzibar"),
        "search middling word": lambda: store.list_chats(user, limit=50, query="w0001x"),
        "search common word": lambda: store.list_chats(user, limit=50, query="everyone"),
    }
    found, total = await store.list_chats(user, limit=50, query="zanzibar")
    assert total == len(range(0, count, RARE_EVERY)), total
    return {name: await best_ms(call, repeat) for name, call in calls.items()}


@asynccontextmanager
async def _postgres(name: str) -> Any:
    admin = await asyncpg.connect(PG_ADMIN)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def on_backend(backend: str, count: int, repeat: int, folder: Path) -> dict[str, float]:
    if backend == "sqlite":
        store = await SQLStore.open(f"sqlite+aiosqlite:///{folder / f'chats_{count}.db'}")
        try:
            return await measure(store, await fill(store, count), count, repeat)
        finally:
            await store.close()
    async with _postgres(f"toolrelay_bench_chats_{count}") as url:
        store = await SQLStore.open(url)
        try:
            user = await fill(store, count)
            async with store.engine.begin() as connection:  # fresh statistics, as
                await connection.exec_driver_sql("ANALYZE")  # autovacuum would (committed)
            return await measure(store, user, count, repeat)
        finally:
            await store.close()


def run(quick: bool = False) -> None:
    repeat = 5 if quick else 20
    sizes = (500, 5000) if quick else SIZES
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("sqlite", "postgres"):
            results = {n: asyncio.run(on_backend(backend, n, repeat, Path(tmp))) for n in sizes}
            small, large = results[sizes[0]], results[sizes[-1]]
            print(f"\nmany chats on {backend}: ms per call (best of {repeat})")
            print(f"{'operation':<22} {sizes[0]:>8,} {sizes[-1]:>8,} {'ratio':>7}")
            for name in small:
                ratio = large[name] / small[name]
                print(f"{name:<22} {small[name]:>8.2f} {large[name]:>8.2f} {ratio:>7.2f}")
    print("target: first page, deep page (cursor) and search ≤ 20 ms at 50,000 chats")


if __name__ == "__main__":
    run(quick="--quick" in sys.argv)
