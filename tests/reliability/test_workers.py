"""`toolrelay serve --workers 2` for real: two processes, each its own listener on one port.

The in-process two-worker test (tests/server/test_backends.py) picks which
worker gets each request; here the parent spawns the workers and the kernel
spreads fresh connections over their SO_REUSEPORT listeners. The chat API's
guarantees must hold across them on both deployments: SQLite with the bus the
parent hosts (`ipc://`, the default) and PostgreSQL with Redis. Which worker
served a request is read from the log (`worker=<pid>` on its access line).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from pathlib import Path

import httpx2
import orjson
import pytest
from benchmarks.harness import ADMIN_KEY

from tests.patience import HANG
from tests.reliability.conftest import REDIS_URL
from tests.reliability.test_crash import last_assistant, wait_for
from tests.reliability.two_workers import Workers, two_workers
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

CHAT = "/v1/chat/completions"
PARTIAL = ["partial ", "words ", "end"]
WORDS = ["Hello ", "there, ", "all ", "in ", "one ", "piece."]
BACKENDS = [
    pytest.param(("sqlite", None), id="sqlite-ipc"),
    pytest.param(
        ("postgres", REDIS_URL),
        id="postgres-redis",
        marks=[pytest.mark.postgres, pytest.mark.redis],
    ),
]


def stalled() -> SSEReply:
    """Part of an answer, then silence until the turn is cancelled or its worker dies."""
    return SSEReply(chat_chunks(text=PARTIAL), stall_after=len(PARTIAL) + 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_turn_resume_and_cancel_hold_across_two_workers(
    backend: tuple[str, str | None], tmp_path: Path, upstream: FakeModelServer
) -> None:
    upstream.route(CHAT, stalled())
    with two_workers(tmp_path, upstream, *backend) as workers:
        both = workers.ready()
        with workers.server.client() as client:
            chat_id = new_chat(client, model="fake")
        # one turn per chat: posts at once on fresh connections, until both workers answered
        posts: list[tuple[int, int]] = []
        for _ in range(10):
            posts += workers.concurrent_posts(chat_id, 6)
            if {pid for _, pid in posts} == both:
                break
        assert {pid for _, pid in posts} == both, posts
        statuses = sorted(status for status, _ in posts)
        assert statuses == [202] + [409] * (len(posts) - 1), posts
        runner = next(pid for status, pid in posts if status == 202)
        # resume on the other worker: exactly the events after Last-Event-ID
        with workers.server.client() as client:
            seen = read_events(client, chat_id, last=0, limit=3)
        pid, resumed = workers.stream_events(chat_id, last=seen[0][0], limit=2, avoid=runner)
        assert pid != runner
        assert resumed == seen[1:3]
        # cancel from the other worker: it reaches the turn, which ends cancelled
        with workers.client_on(lambda p: p != runner) as (client, pid):
            cancelled = client.post(f"/api/chats/{chat_id}/cancel")
            assert workers.worker_of(cancelled) == pid != runner
            assert cancelled.json() == {"cancelled": True}
            rest = read_events(client, chat_id, last=seen[-1][0])
            assert rest[-1][1]["type"] == "chat:completion"
            assert "chat:tasks:cancel" in [e["type"] for _, e in rest]
            assert wait_saved(client, chat_id, "cancelled")["content"] == "".join(PARTIAL)


def _answer(body: bytes) -> str:
    text = ""
    for line in body.split(b"\n"):
        if line.startswith(b"data: {"):
            for choice in orjson.loads(line[6:]).get("choices", []):
                text += (choice.get("delta") or {}).get("content") or ""
    return text


async def _streamed_chats(base_url: str, count: int) -> list[httpx2.Response]:
    """`count` streamed /v1 chats at once, each on its own new connection."""
    body = {"model": "fake", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}

    async def one() -> httpx2.Response:
        async with httpx2.AsyncClient(base_url=base_url, headers=headers, timeout=HANG) as c:
            response = await c.post(CHAT, json=body)
            await response.aread()
            return response

    return list(await asyncio.gather(*(one() for _ in range(count))))


@pytest.mark.parametrize("backend", BACKENDS)
def test_fifty_streamed_chats_over_two_workers_lose_nothing(
    backend: tuple[str, str | None], tmp_path: Path, upstream: FakeModelServer
) -> None:
    upstream.set_default(SSEReply(chat_chunks(text=WORDS)))
    with two_workers(tmp_path, upstream, *backend) as workers:
        both = workers.ready()
        responses = asyncio.run(_streamed_chats(workers.server.base_url, 50))
        assert [r.status_code for r in responses] == [200] * 50
        assert [_answer(r.content) for r in responses] == ["".join(WORDS)] * 50
        assert all(r.content.rstrip().endswith(b"data: [DONE]") for r in responses)
        served = [workers.worker_of(r) for r in responses]
        assert set(served) == both, served  # the kernel spread them over both listeners
        with workers.server.client() as client:  # the request log saved every one
            wait_for(
                lambda: client.get("/api/chats?source=api&limit=1").json()["total"] == 50,
                "50 request-log rows",
            )
        # /metrics on the main port, from either worker, is the sum over both
        for _ in range(4):
            assert workers.metric("toolrelay_turns_total", route="fake", status="completed") == 50


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_killed_worker_is_replaced_and_its_turn_resumed(
    backend: tuple[str, str | None], tmp_path: Path, upstream: FakeModelServer
) -> None:
    """The replacement has the dead worker's slot: it takes the turn back at start (the
    lease, 600 s here, is not waited out) and the answer completes."""
    upstream.route(CHAT, stalled(), SSEReply(chat_chunks(text=WORDS)))
    with two_workers(tmp_path, upstream, *backend, checkpoint_s=0.05, turn_lease_s=600) as workers:
        first = workers.ready()
        with workers.server.client() as client:
            chat_id = new_chat(client, model="fake")
            posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "q"})
            assert posted.status_code == 202
            runner = workers.worker_of(posted)
            wait_for(
                lambda: last_assistant(client, chat_id).get("content") == "".join(PARTIAL),
                "the partial answer checkpointed",
            )
        os.kill(runner, signal.SIGKILL)
        (replacement,) = workers.wait_ready(1, besides=first)
        assert workers.ready() == first - {runner} | {replacement}
        with workers.server.client() as client:
            saved = wait_saved(client, chat_id)
            assert saved["content"] == "".join(WORDS)
            messages = client.get(f"/api/chats/{chat_id}").json()["messages"]
            assert [m["status"] for m in messages] == [None, "completed"]
        # the dead worker's running turn no longer counts as active
        wait_for(lambda: workers.metric("toolrelay_active_turns") == 0, "no active turn")


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _bus_dir(workers: Workers) -> Path:
    log = workers.server.log.read_text()
    url = log.split("event bus: ipc://", 1)[1].split()[0]
    return Path(url).parent


def test_sigterm_stops_the_workers_gracefully_and_cleans_up(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    with two_workers(tmp_path, upstream, "sqlite", None) as workers:
        pids = workers.ready()
        bus_dir = _bus_dir(workers)
        assert bus_dir.is_dir()
        process = workers.server.process
        assert process is not None
        process.send_signal(signal.SIGTERM)
        assert process.wait(HANG) == 0
        assert all(_gone(pid) for pid in pids)
        log = workers.server.log.read_text()
        assert log.count("Application shutdown complete.") == 2  # each ran its shutdown
        assert not bus_dir.exists()


def test_workers_stop_when_their_parent_is_killed(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    with two_workers(tmp_path, upstream, "sqlite", None) as workers:
        pids = workers.ready()
        bus_dir = _bus_dir(workers)
        workers.server.kill()
        wait_for(lambda: all(_gone(pid) for pid in pids), "the orphaned workers stopped")
        log = workers.server.log.read_text()
        assert log.count("Application shutdown complete.") == 2  # gracefully
        shutil.rmtree(bus_dir)  # the killed parent could not remove its run directory


def test_a_killed_parents_workers_leave_their_turns_to_the_next_server(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    """The bus died with the parent: the worker running a turn can neither stream it nor
    record it failed. It leaves it `in_progress` with its run and checkpoint (no "could
    not record the failure" per turn), and a server started on the same database ends it."""
    upstream.route(CHAT, stalled(), SSEReply(chat_chunks(text=WORDS)))
    with two_workers(tmp_path, upstream, "sqlite", None, checkpoint_s=0.05) as workers:
        pids = workers.ready()
        bus_dir = _bus_dir(workers)
        with workers.server.client() as client:
            chat_id = new_chat(client, model="fake")
            posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "q"})
            assert posted.status_code == 202
            wait_for(
                lambda: last_assistant(client, chat_id).get("content") == "".join(PARTIAL),
                "the partial answer checkpointed",
            )
        workers.server.kill()
        wait_for(lambda: all(_gone(pid) for pid in pids), "the orphaned workers stopped")
        log = workers.server.log.read_text()
        assert log.count("Application shutdown complete.") == 2  # gracefully
        assert "could not record" not in log, log[-3000:]
        shutil.rmtree(bus_dir)
    shutil.rmtree(tmp_path / "metrics")
    with two_workers(tmp_path, upstream, "sqlite", None) as workers, workers.server.client() as c:
        assert wait_saved(c, chat_id)["content"] == "".join(WORDS)
