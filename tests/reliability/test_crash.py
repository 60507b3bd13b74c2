"""A server SIGKILLed mid-turn, restarted on the same database: the turn is resumed.

The server runs as a child process (`toolrelay serve`); the kill gives it no
chance to save anything, so what survives is what was checkpointed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
import redis
from benchmarks.harness import ADMIN_KEY, ServerProcess, write_config

from tests.reliability.conftest import REDIS_URL, database, events_url
from tests.reliability.test_resume import follow
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

CHAT = "/v1/chat/completions"
LEASE_S = {"memory": 3, "redis": 600}
"""On Redis the lease outlives the restart: the restarted server must not wait it out."""
PARTIAL = ["Half ", "an ", "answer"]
AFTER = ["A ", "whole ", "new ", "answer ", "with ", "many ", "words ", "in ", "it."]


def last_assistant(client: httpx2.Client, chat_id: str) -> dict[str, Any]:
    messages = client.get(f"/api/chats/{chat_id}").json()["messages"]
    return dict(messages[-1]) if messages and messages[-1]["role"] == "assistant" else {}


def wait_for(predicate: Any, what: str, limit: float = 60) -> Any:
    """Poll a condition the server reaches on its own time (a checkpoint, a lease expiry)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def post_until_accepted(client: httpx2.Client, chat_id: str) -> httpx2.Response:
    """After a crash on Redis the old lease lives until its ttl: 409 until then, never forever."""

    def post() -> httpx2.Response | None:
        response = client.post(f"/api/chats/{chat_id}/messages", json={"content": "again"})
        assert response.status_code in (202, 409), response.text
        return response if response.status_code == 202 else None

    return wait_for(post, "a post accepted after the crash")  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param(("sqlite", "memory"), id="sqlite-memory"),
        pytest.param(
            ("postgres", "redis"),
            id="postgres-redis",
            marks=[pytest.mark.postgres, pytest.mark.redis],
        ),
    ],
)
def test_a_killed_turn_is_resumed_at_restart_and_its_followers_see_the_rest(
    backend: tuple[str, str], tmp_path: Path, upstream: FakeModelServer
) -> None:
    """kill -9 mid-stream, restart: the restarted server takes its own dead turn back at
    once (on Redis too, whose lease is still live: no 409 for `turn_lease_s`, issue 24
    item 10), asks the model again from the checkpoint before the cut response, and a
    client resuming with its Last-Event-ID gets the continuation numbered after it."""
    store_kind, bus_kind = backend
    # the first response streams part of an answer and then hangs until the server dies
    upstream.route(
        CHAT,
        SSEReply(chat_chunks(text=PARTIAL), stall_after=len(PARTIAL) + 1),
        SSEReply(chat_chunks(text=AFTER)),
        SSEReply(chat_chunks(text=["Next."])),
    )
    with database(store_kind, tmp_path) as url:
        config = write_config(
            tmp_path / "toolrelay.toml",
            upstream.base_url,
            admin_key=ADMIN_KEY,
            data_dir=str(tmp_path / "data"),
            database_url=url,
            events_url=events_url(bus_kind),
            checkpoint_s=0.05,
            turn_lease_s=LEASE_S[bus_kind],
        )
        server = ServerProcess(config, tmp_path / "server.log")
        server.start()
        try:
            with server.client() as client:
                chat_id = new_chat(client, model="fake")
                assert (
                    client.post(f"/api/chats/{chat_id}/messages", json={"content": "q"}).status_code
                    == 202
                )
                seen = read_events(client, chat_id, limit=2)  # snapshot + the turn's first event
                last_id = seen[-1][0]
                wait_for(
                    lambda: last_assistant(client, chat_id).get("content") == "".join(PARTIAL),
                    "the partial answer checkpointed",
                )
                if bus_kind == "redis":
                    with redis.Redis.from_url(REDIS_URL) as r:
                        pttl = r.pttl(f"toolrelay:turn:chat:{chat_id}")
                        assert 0 < pttl <= LEASE_S["redis"] * 1000  # a lease, renewed
            server.kill()
            server.start()
            with server.client() as client:
                ended = follow(client, chat_id, last_id)
                types = [e["type"] for _, e in ended]
                assert "chat:turn:resumed" in types, ended
                done = [
                    e for _, e in ended if e["type"] == "chat:completion" and e["data"].get("done")
                ]
                assert done and done[-1]["data"]["status"] == "completed"
                assert "chat:message:error" not in types
                seqs = [seq for seq, _ in ended]
                assert seqs[0] > last_id and seqs == sorted(set(seqs))  # numbered after, no dup
                resumed = types.index("chat:turn:resumed")
                assert _done_text(ended[resumed:]) == "".join(AFTER)  # not the partial again
                saved = wait_saved(client, chat_id)
                assert saved["content"] == "".join(AFTER)
                # the chat goes on at once (the restart holds no stale lease)
                accepted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "2"})
                assert accepted.status_code == 202
                wait_for(  # its partial output is checkpointed in_progress first
                    lambda: (
                        last_assistant(client, chat_id).get("status") == "completed"
                        and last_assistant(client, chat_id).get("content") == "Next."
                    ),
                    "the next turn saved",
                )
                statuses = [
                    m["status"] for m in client.get(f"/api/chats/{chat_id}").json()["messages"]
                ]
                assert statuses == [None, "completed", None, "completed"]
        finally:
            server.stop()


def _done_text(events: list[tuple[int, dict[str, Any]]]) -> str:
    """The answer as `response.output_item.done` events carry it (deltas of a finished turn
    are dropped by the bus after its save: docs/events.md)."""
    texts = []
    for _, event in events:
        item = event["data"].get("item") or {}
        if event["type"] == "response.output_item.done" and item.get("type") == "message":
            texts += [p.get("text", "") for p in item.get("content") or []]
    return "".join(texts)
