"""The turn lock over real sockets: one turn per chat, never locked for good, honest cancel."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import httpx2
import pytest
import redis

from tests.patience import HANG
from tests.reliability.conftest import BACKENDS, REDIS_URL, database, events_url
from tests.server.conftest import ADMIN_KEY, Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.server.services import Services
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

CHAT = "/v1/chat/completions"


def services(thread: ServerThread) -> Services:
    app: Any = thread.server.config.app  # the FastAPI app the thread serves
    svc: Services = app.state.services
    return svc


def post_all_at_once(base_url: str, chat_id: str, count: int) -> list[int]:
    """`count` posts released together from their own threads and connections."""
    barrier = threading.Barrier(count)
    codes: list[int] = []

    def post(i: int) -> None:
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        with httpx2.Client(base_url=base_url, headers=headers, timeout=30) as client:
            barrier.wait()
            response = client.post(f"/api/chats/{chat_id}/messages", json={"content": f"q{i}"})
            codes.append(response.status_code)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(codes)


@pytest.mark.parametrize("backend", BACKENDS)
def test_eight_concurrent_posts_start_exactly_one_turn(
    backend: tuple[str, str], tmp_path: Path, upstream: FakeModelServer
) -> None:
    store_kind, bus_kind = backend
    # the turn stalls mid-answer, so it is certainly still running when the last post lands
    upstream.route(CHAT, SSEReply(chat_chunks(text=["a", "b"]), stall_after=2))
    with database(store_kind, tmp_path) as url:
        settings = make_settings(
            tmp_path, upstream, database_url=url, events_url=events_url(bus_kind)
        )
        thread = ServerThread(settings)
        with thread as base_url, Running(base_url, upstream, settings).client() as client:
            chat_id = new_chat(client, model="fake")
            assert post_all_at_once(base_url, chat_id, 8) == [202] + [409] * 7
            messages = client.get(f"/api/chats/{chat_id}").json()["messages"]
            assert [m["role"] for m in messages] == ["user", "assistant"]  # one user message
            assert client.post(f"/api/chats/{chat_id}/cancel").json() == {"cancelled": True}
            wait_saved(client, chat_id, "cancelled")


def test_a_failed_first_save_does_not_lock_the_chat(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    upstream.route(CHAT, SSEReply(chat_chunks(text="fine now")))
    settings = make_settings(tmp_path, upstream)
    thread = ServerThread(settings)
    with thread as base_url, Running(base_url, upstream, settings).client() as client:
        store = services(thread).store
        real_save = store.save_turn
        failures = [RuntimeError("disk full")]

        async def failing_once(*args: Any, **kwargs: Any) -> None:
            if failures:
                raise failures.pop()
            await real_save(*args, **kwargs)

        store.save_turn = failing_once  # type: ignore[method-assign]
        chat_id = new_chat(client, model="fake")
        first = client.post(f"/api/chats/{chat_id}/messages", json={"content": "hi"})
        assert first.status_code == 503
        second = client.post(f"/api/chats/{chat_id}/messages", json={"content": "hi again"})
        assert second.status_code == 202, second.text
        assert wait_saved(client, chat_id)["content"] == "fine now"


@pytest.mark.redis
def test_cancel_says_false_when_no_worker_runs_the_locked_turn(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    """A lock left by a dead worker: nobody gets the cancel, so it must not claim success."""
    settings = make_settings(tmp_path, upstream, events_url=REDIS_URL)
    with ServerThread(settings) as base_url, Running(base_url, upstream, settings).client() as c:
        chat_id = new_chat(c, model="fake")
        with redis.Redis.from_url(REDIS_URL) as r:
            r.set(f"toolrelay:turn:chat:{chat_id}", "running", px=60_000)  # a crashed worker's
            try:
                assert c.post(f"/api/chats/{chat_id}/cancel").json() == {"cancelled": False}
            finally:
                r.delete(f"toolrelay:turn:chat:{chat_id}")


def test_cancel_with_no_turn_changes_nothing_and_says_so(running: Running) -> None:
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        assert client.post(f"/api/chats/{chat_id}/cancel").json() == {"cancelled": False}
        assert read_events(client, chat_id, limit=1)[0][1]["type"] == "chat:snapshot"


def test_a_turn_that_crashes_ends_with_an_error_event_and_a_saved_row(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    """The final save keeps failing: retried, then reported, never silently dropped."""
    upstream.route(CHAT, SSEReply(chat_chunks(text=["partial ", "answer"])))
    settings = make_settings(tmp_path, upstream)
    thread = ServerThread(settings)
    with thread as base_url, Running(base_url, upstream, settings).client() as client:
        svc = services(thread)
        real_save = svc.store.save_turn
        attempts: list[str] = []

        async def final_save_fails(chat_id: str, message_id: str, turn: Any) -> None:
            if turn.get("status") != "in_progress":
                attempts.append(turn["status"])
                raise OSError("database is locked")
            await real_save(chat_id, message_id, turn)

        svc.store.save_turn = final_save_fails  # type: ignore[method-assign]
        chat_id = new_chat(client, model="fake")
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "hi"})
        events = read_events(client, chat_id)
        kinds = [e["type"] for _, e in events]
        assert "chat:message:error" in kinds
        final = events[-1][1]
        assert final["type"] == "chat:completion" and final["data"]["done"] is True
        assert final["data"]["status"] == "failed"
        assert final["data"]["content"] == "partial answer"
        assert len(attempts) == svc.turns.durability.save_attempts
        saved = wait_saved(client, chat_id, "failed")
        assert saved["content"] == "partial answer"
        assert "database is locked" in str(saved["error"])


def test_a_post_right_after_the_turn_is_saved_is_accepted(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    """The turn is saved and `done` sent a moment before its lease is given back: a client
    posting in that moment (as one that reacts to `done` does) gets a 202, not a 409."""
    upstream.route(CHAT, SSEReply(chat_chunks(text="first")), SSEReply(chat_chunks(text="second")))
    settings = make_settings(tmp_path, upstream)
    thread = ServerThread(settings)
    with thread as base_url, Running(base_url, upstream, settings).client() as client:
        bus = services(thread).bus
        real_end, real_acquire = bus.end, bus.acquire
        let_go, refused, ending = threading.Event(), threading.Event(), threading.Event()

        async def slow_end(name: str) -> None:  # the lease is held until the test says so
            ending.set()
            await asyncio.to_thread(let_go.wait, HANG)
            await real_end(name)

        async def watched_acquire(name: str, **kwargs: Any) -> Any:
            token = await real_acquire(name, **kwargs)
            if token is None:
                refused.set()
            return token

        bus.end = slow_end  # type: ignore[method-assign,assignment]
        bus.acquire = watched_acquire  # type: ignore[method-assign,assignment]
        chat_id = new_chat(client, model="fake")
        assert (
            client.post(f"/api/chats/{chat_id}/messages", json={"content": "1"}).status_code == 202
        )
        assert wait_saved(client, chat_id)["content"] == "first"  # saved; the lease still held
        # only the lease is left: the turn's task is done with everything but giving it back
        # (posting earlier, the post would wait on the task, which waits on this test)
        assert ending.wait(HANG)
        codes: list[int] = []
        poster = threading.Thread(
            target=lambda: codes.append(
                client.post(f"/api/chats/{chat_id}/messages", json={"content": "2"}).status_code
            )
        )
        poster.start()
        assert refused.wait(HANG)  # the second post met the held lease ...
        let_go.set()  # ... and the finishing turn lets go
        poster.join(HANG)
        assert codes == [202]
        assert wait_saved(client, chat_id)["content"] == "second"
