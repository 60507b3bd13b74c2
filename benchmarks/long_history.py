"""A turn's cost against the length of its chat (issue 31, item 1).

One `toolrelay serve --workers 1` child (SQLite) and an instant fake model. Chats of
10, 200 and 2,000 messages are written straight into its database (user questions and
assistant turns with their output items, as the server saves them). For each size:

- **turn**: the server's CPU per chat turn (`/proc`, utime + stime, over several turns):
  POST the message, follow the chat's events to the turn's end;
- **202**: the client's wait for the POST's answer (best of the turns);
- **serialise**: what encoding the model request's messages costs at that length,
  measured apart, in this process (`orjson`, best of several): the part of a turn
  that must grow with the chat, excepted from the target;
- **open**: `GET /api/chats/{id}` (the first page of 100 messages, and the whole chat),
  client wall time, best of several.

Printed with each size's ratio to the smallest. Targets: a turn's CPU at 2,000
messages ≤ 1.5× that at 10, beyond serialising; the 202 does not grow; opening a
2,000-message chat ≤ 50 ms.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import orjson
from sqlalchemy import insert

from benchmarks.harness import ADMIN_KEY, ServerProcess, write_config
from toolrelay.adapters.stores.models import MessageRow
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.core.stream.framing import SSEDecoder
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

SIZES = (10, 200, 2000)
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "and",
    "runs",
    "far",
    "away",
    "again",
]


def _text(i: int, words: int) -> str:
    return " ".join(WORDS[(i + k) % len(WORDS)] for k in range(words))


def _rows(chat_id: str, count: int) -> list[dict[str, Any]]:
    """`count` messages: questions, and answers saved as the server saves a turn."""
    now = datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    for i in range(count):
        row: dict[str, Any] = {
            "id": f"msg_{chat_id}_{i:05d}",
            "chat_id": chat_id,
            "created_at": now,
            "updated_at": now,
            "usage": None,
            "error": None,
            "timings": None,
            "model": None,
            "follow_ups": [],
        }
        if i % 2 == 0:
            row.update(role="user", content=_text(i, 25), output=[], status=None)
        else:
            text = _text(i, 60)
            item = {
                "type": "message",
                "id": f"item_{chat_id}_{i}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
            row.update(role="assistant", content=text, output=[item], status="completed")
        rows.append(row)
    return rows


async def _fill(url: str, chats: dict[int, str]) -> None:
    store = await SQLStore.open(url)
    try:
        for size, chat_id in chats.items():
            async with store.engine.begin() as connection:
                await connection.execute(insert(MessageRow), _rows(chat_id, size))
    finally:
        await store.close()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _until_end(client: httpx2.AsyncClient, chat_id: str) -> None:
    decoder = SSEDecoder()
    async with client.stream("GET", f"/api/chats/{chat_id}/events") as response:
        async for chunk in response.aiter_bytes():
            for frame in decoder.feed(chunk):
                event = orjson.loads(frame.data)
                if event.get("type") == "chat:snapshot" and not event["data"]["running"]:
                    return


async def _turns(server: ServerProcess, chat_id: str, turns: int) -> tuple[float, float]:
    """CPU seconds per turn (server) and the best wait for the 202."""
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with httpx2.AsyncClient(base_url=server.base_url, headers=headers, timeout=120) as c:
        for _ in range(2):  # warm: imports, caches, the connection pool
            await c.post(f"/api/chats/{chat_id}/messages", json={"content": "warm up"})
            await _until_end(c, chat_id)
        best_202 = float("inf")
        cpu = _cpu_seconds(server.pid)
        for i in range(turns):
            start = time.perf_counter()
            posted = await c.post(f"/api/chats/{chat_id}/messages", json={"content": f"q {i}"})
            best_202 = min(best_202, time.perf_counter() - start)
            assert posted.status_code == 202, posted.text
            await _until_end(c, chat_id)
        return (_cpu_seconds(server.pid) - cpu) / turns, best_202


async def _open_ms(server: ServerProcess, chat_id: str, query: str, repeat: int) -> float:
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with httpx2.AsyncClient(base_url=server.base_url, headers=headers, timeout=120) as c:
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            response = await c.get(f"/api/chats/{chat_id}{query}")
            response.raise_for_status()
            best = min(best, time.perf_counter() - start)
        return best * 1000


async def _serialise_ms(url: str, chat_id: str, repeat: int) -> float:
    """Encoding the model request's messages (the history) with orjson."""
    store = await SQLStore.open(url)
    try:
        history = await store.load_messages(chat_id)
    finally:
        await store.close()
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        orjson.dumps({"model": "m", "messages": history, "stream": True})
        best = min(best, time.process_time() - start)
    return best * 1000


def run(quick: bool = False) -> None:
    turns, repeat = (10, 5) if quick else (30, 20)
    print(f"\nlong histories: a turn's cost by chat length ({turns} turns each; SQLite)")
    with tempfile.TemporaryDirectory() as tmp, FakeModelServer() as upstream:
        folder = Path(tmp)
        upstream.set_default(SSEReply(chat_chunks(text=["It ", "is ", "so."])))
        url = f"sqlite+aiosqlite:///{folder / 'data' / 'toolrelay.db'}"
        config = write_config(
            folder / "toolrelay.toml",
            upstream.base_url,
            admin_key=ADMIN_KEY,
            data_dir=str(folder / "data"),
            database_url=url,
        )
        with ServerProcess(config, folder / "server.log") as server, server.client() as client:
            chats = {
                n: client.post("/api/chats", json={"model": "fake"}).json()["id"] for n in SIZES
            }
            asyncio.run(_fill(url, chats))
            figures = {}
            for size, chat_id in chats.items():
                cpu, wait = asyncio.run(_turns(server, chat_id, turns))
                serialise = asyncio.run(_serialise_ms(url, chat_id, repeat))
                page = asyncio.run(_open_ms(server, chat_id, "?limit=100", repeat))
                whole = asyncio.run(_open_ms(server, chat_id, "", repeat))
                figures[size] = (cpu * 1000, wait * 1000, serialise, page, whole)
    base = figures[SIZES[0]]
    print(
        f"{'messages':>9}{'turn CPU ms':>13}{'x':>6}{'202 ms':>9}{'x':>6}"
        f"{'serialise ms':>14}{'open 100 ms':>13}{'open all ms':>13}"
    )
    for size, (cpu, wait, serialise, page, whole) in figures.items():
        print(
            f"{size:>9}{cpu:>13.2f}{cpu / base[0]:>6.2f}{wait:>9.2f}{wait / base[1]:>6.2f}"
            f"{serialise:>14.3f}{page:>13.2f}{whole:>13.2f}"
        )
    cpu_top, serialise_top = figures[SIZES[-1]][0], figures[SIZES[-1]][2]
    print(
        f"turn CPU at {SIZES[-1]} beyond serialising: "
        f"{(cpu_top - serialise_top) / (base[0] - base[2]):.2f}x that at {SIZES[0]} (target ≤ 1.5)"
    )


if __name__ == "__main__":
    run(quick=True)
