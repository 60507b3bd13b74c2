"""Several processes writing one SQLite file at once (`serve --workers N` on the default
store): no write fails with "database is locked" and none is lost.

Inside one process the store serialises its writes (one asyncio lock); between
processes SQLite's own lock does, with the busy timeout as the wait. Each
write transaction takes the lock first (`BEGIN IMMEDIATE`), so none holds a
read snapshot while it waits for the lock, the case SQLite answers at once
with "database is locked" instead of waiting (seen here: a write transaction
made to read first failed 120 of 120 chats; a busy timeout of 0, 27).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from tests.patience import HANG
from toolrelay.adapters.stores.sql import SQLStore

PROCESSES = 3
CHATS = 120
"""Chats per process, all written at once: each is seven write transactions."""

WRITER = """
import asyncio, os, sys
from toolrelay.adapters.stores import NewChat
from toolrelay.adapters.stores.sql import SQLStore

async def main(url, user_id, count):
    store = await SQLStore.open(url, migrate=False)
    async def one(i):
        chat = await store.create_chat(user_id, title=f"t{i}")
        await store.add_message(chat.id, {"role": "user", "content": "hi"})
        turn = f"msg_{os.getpid()}_{i}"
        await store.save_turn(chat.id, turn, {"content": "a", "status": "in_progress"})
        await store.checkpoint_turn(chat.id, turn, {"content": "ab", "status": "in_progress"})
        await store.save_turn(chat.id, turn, {"content": "abc", "status": "completed"})
        await store.update_chat(chat.id, title="done")
        logged = NewChat(f"api_{os.getpid()}_{i}", user_id, "log", None, [], [], f"{turn}_log",
                         {"content": "x", "status": "completed"})
        await store.add_chats([logged])
    results = await asyncio.gather(*(one(i) for i in range(count)), return_exceptions=True)
    await store.close()
    errors = [repr(r) for r in results if isinstance(r, BaseException)]
    print(len(errors), errors[:3])
    sys.exit(1 if errors else 0)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def _user(url: str) -> str:
    store = await SQLStore.open(url)
    try:
        return (await store.create_user("writer")).id
    finally:
        await store.close()


async def _saved(url: str, user_id: str) -> tuple[int, list[str]]:
    store = await SQLStore.open(url, migrate=False)
    try:
        chats, total = await store.list_chats(user_id, limit=10_000)
        contents = []
        for chat in chats:
            contents += [str(m.content) for m in await store.get_messages(chat.id)]
        return total, contents
    finally:
        await store.close()


def test_processes_writing_one_sqlite_file_at_once_lose_nothing(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
    user_id = asyncio.run(_user(url))
    command = [sys.executable, "-c", WRITER, url, user_id, str(CHATS)]
    writers = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for _ in range(PROCESSES)
    ]
    outputs = [w.communicate(timeout=10 * HANG)[0].decode() for w in writers]
    assert [w.returncode for w in writers] == [0] * PROCESSES, outputs
    total, contents = asyncio.run(_saved(url, user_id))
    assert total == 2 * CHATS * PROCESSES  # each chat and its request-log chat
    assert contents.count("abc") == CHATS * PROCESSES  # every final save won
    assert contents.count("hi") == CHATS * PROCESSES
