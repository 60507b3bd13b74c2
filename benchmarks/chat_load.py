"""Many concurrent chat-API turns: nothing lost, nothing stuck, no 5xx, resources come back.

`run_load` drives N chats × R rounds against a `toolrelay serve` child
(`harness.ServerProcess`): each round posts a message, follows the chat's
event stream to its end and moves on; at the end every chat must hold R
completed answers with the whole text. The server's open fds and RSS are
read after a warm-up wave (the baseline: pools, caches and imports are warm)
and again after the load has settled, so a leak shows as growth.

`python -m benchmarks chat_load` runs 200 chats × 3 rounds of 400-token
answers on SQLite (in-process events) and on PostgreSQL + Redis, and prints
the time per round against streaming the same answers straight from the
upstream (the baseline measured in the same run). The reliability suite runs
the same code at a small size.
"""

from __future__ import annotations

import asyncio
import collections
import secrets
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import orjson

from benchmarks.harness import ADMIN_KEY, ServerProcess, write_config
from toolrelay.core.stream.framing import SSEDecoder
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379/0"


def answer_words(tokens: int) -> list[str]:
    return [f"tok{i} " for i in range(tokens)]


@dataclass
class Report:
    chats: int
    rounds: int
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    dropped: int = 0
    """Requests whose connection failed with no HTTP answer (counted, not retried)."""
    drops: collections.Counter[str] = field(default_factory=collections.Counter)
    lost: int = 0
    """Answers not saved whole and `completed`."""
    stuck: int = 0
    """Assistant rows still `in_progress` after the load."""
    seconds: float = 0.0
    fds: tuple[int, int] = (0, 0)
    """Open fds of the server: baseline, after."""
    rss_kib: tuple[int, int] = (0, 0)

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)


async def _until_end(client: httpx2.AsyncClient, chat_id: str) -> None:
    """Follow the chat's events until the stream ends (the turn ended and was delivered)."""
    decoder = SSEDecoder()
    async with client.stream("GET", f"/api/chats/{chat_id}/events") as response:
        response.raise_for_status()
        async for chunk in response.aiter_bytes():
            for frame in decoder.feed(chunk):
                event = orjson.loads(frame.data)
                if event.get("type") == "chat:snapshot" and not event["data"]["running"]:
                    return  # already over when we arrived


async def _chat(client: httpx2.AsyncClient, rounds: int, report: Report) -> str:
    created = await client.post("/api/chats", json={"model": "fake"})
    report.statuses[created.status_code] += 1
    chat_id = str(created.json()["id"])
    for round_ in range(rounds):
        try:
            posted = await client.post(
                f"/api/chats/{chat_id}/messages", json={"content": f"question {round_}"}
            )
            report.statuses[posted.status_code] += 1
            if posted.status_code == 202:
                await _until_end(client, chat_id)
        except httpx2.TransportError as exc:
            report.dropped += 1
            report.drops[f"{type(exc).__name__} on {exc.request.method}"] += 1
    return chat_id


async def _check(client: httpx2.AsyncClient, chat_id: str, rounds: int, expected: str) -> int:
    """How many of the chat's answers are missing, cut or not completed."""
    messages = (await client.get(f"/api/chats/{chat_id}")).json()["messages"]
    answers = [m for m in messages if m["role"] == "assistant"]
    whole = [m for m in answers if m["status"] == "completed" and m["content"] == expected]
    return rounds - len(whole)


async def _stuck(client: httpx2.AsyncClient, chat_ids: list[str]) -> int:
    count = 0
    for chat_id in chat_ids:
        messages = (await client.get(f"/api/chats/{chat_id}")).json()["messages"]
        count += sum(1 for m in messages if m["status"] == "in_progress")
    return count


def _client(base_url: str, n: int) -> httpx2.AsyncClient:
    """Idle connections expire before uvicorn's 5 s keep-alive, so none is reused as it closes."""
    limits = httpx2.Limits(
        max_connections=2 * n + 10, max_keepalive_connections=2 * n + 10, keepalive_expiry=2
    )
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    return httpx2.AsyncClient(base_url=base_url, headers=headers, timeout=300, limits=limits)


async def _wave(base_url: str, chats: int, rounds: int, report: Report) -> list[str]:
    async with _client(base_url, chats) as client:
        return list(await asyncio.gather(*(_chat(client, rounds, report) for _ in range(chats))))


def _settle(server: ServerProcess, baseline: int, limit: float = 30) -> int:
    """Open fds once the server has closed what it will close (it does so on its own time)."""
    deadline = time.monotonic() + limit
    fds = server.open_fds()
    while fds > baseline and time.monotonic() < deadline:
        time.sleep(0.2)
        fds = server.open_fds()
    return fds


def run_load(server: ServerProcess, chats: int, rounds: int, tokens: int) -> Report:
    """The load against a started server whose upstream answers `answer_words(tokens)`."""
    expected = "".join(answer_words(tokens))
    asyncio.run(_wave(server.base_url, chats, 1, Report(chats, 1)))  # warm-up: the baseline
    time.sleep(1)
    fds0, rss0 = server.open_fds(), server.rss_kib()
    report = Report(chats, rounds)
    start = time.perf_counter()
    chat_ids = asyncio.run(_wave(server.base_url, chats, rounds, report))
    report.seconds = time.perf_counter() - start

    async def verify() -> None:
        async with _client(server.base_url, 10) as client:
            for chat_id in chat_ids:
                report.lost += await _check(client, chat_id, rounds, expected)
            report.stuck = await _stuck(client, chat_ids)

    asyncio.run(verify())
    report.fds = (fds0, _settle(server, fds0))
    report.rss_kib = (rss0, server.rss_kib())
    return report


@contextmanager
def upstream_answering(tokens: int) -> Iterator[FakeModelServer]:
    with FakeModelServer() as upstream:
        upstream.set_default(SSEReply(chat_chunks(text=answer_words(tokens))))
        yield upstream


@contextmanager
def serving(
    workdir: Path,
    upstream: FakeModelServer,
    database_url: str,
    events_url: str | None,
    **settings: Any,
) -> Iterator[ServerProcess]:
    config = write_config(
        workdir / "toolrelay.toml",
        upstream.base_url,
        admin_key=ADMIN_KEY,
        data_dir=str(workdir / "data"),
        database_url=database_url,
        events_url=events_url,
        **settings,
    )
    with ServerProcess(config, workdir / "server.log") as server:
        yield server


async def _pg(sql: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    admin = await asyncpg.connect(PG_ADMIN)
    try:
        await admin.execute(sql)
    finally:
        await admin.close()


@contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database at 127.0.0.1:5432, dropped afterwards."""
    name = f"toolrelay_load_{secrets.token_hex(5)}"
    asyncio.run(_pg(f'CREATE DATABASE "{name}"'))
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        asyncio.run(_pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _straight(base_url: str, n: int) -> float:
    """The baseline: the same answers streamed straight from the upstream, N at once."""
    body: dict[str, Any] = {"model": "fake-model", "messages": [], "stream": True}

    async def one(client: httpx2.AsyncClient) -> None:
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            async for _ in response.aiter_bytes():
                pass

    async with httpx2.AsyncClient(base_url=base_url, timeout=300) as client:
        start = time.perf_counter()
        await asyncio.gather(*(one(client) for _ in range(n)))
        return time.perf_counter() - start


def _line(name: str, report: Report, straight: float) -> str:
    per_round = report.seconds / report.rounds
    grew = (report.rss_kib[1] - report.rss_kib[0]) / 1024
    return (
        f"{name:<18}{report.chats:>6}{report.rounds:>4}{per_round:>10.2f}s"
        f"{per_round / straight:>8.1f}x{report.lost:>6}{report.stuck:>7}"
        f"{report.server_errors:>6}{report.dropped:>6}"
        f"{report.fds[0]:>7}->{report.fds[1]:<5}{grew:>+8.1f} MiB"
    )


def run(*, quick: bool = False) -> None:
    chats, rounds, tokens = (50, 2, 100) if quick else (200, 3, 400)
    print(f"\nchat API load: {chats} chats x {rounds} rounds, {tokens}-token answers")
    print(
        f"{'setup':<18}{'chats':>6}{'R':>4}{'per round':>11}{'vs up':>9}{'lost':>6}"
        f"{'stuck':>7}{'5xx':>6}{'drop':>6}{'fds base->after':>16}{'RSS':>13}"
    )
    with upstream_answering(tokens) as upstream, tempfile.TemporaryDirectory() as tmp:
        straight = asyncio.run(_straight(upstream.base_url, chats))
        upstream.requests.clear()
        sqlite = f"sqlite+aiosqlite:///{tmp}/load.db"
        with serving(Path(tmp), upstream, sqlite, None) as server:
            print(_line("SQLite+memory", run_load(server, chats, rounds, tokens), straight))
        upstream.requests.clear()
        with postgres_database() as url, serving(Path(tmp), upstream, url, REDIS_URL) as server:
            print(_line("PostgreSQL+Redis", run_load(server, chats, rounds, tokens), straight))
