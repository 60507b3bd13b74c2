"""A server SIGKILLed mid-turn, restarted on the same database: the turn is repaired.

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
from tests.reliability.test_resume import answer_seen, follow
from tests.server.test_chats_api import new_chat, read_events
from toolrelay.server.durability import SERVER_STOPPED
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

CHAT = "/v1/chat/completions"
LEASE_S = {"memory": 3, "redis": 20}
"""On Redis the lease outlives the restart, so the follower, not the start-up, repairs it."""
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
def test_a_killed_turn_is_failed_with_its_checkpoint_and_the_chat_goes_on(
    backend: tuple[str, str], tmp_path: Path, upstream: FakeModelServer
) -> None:
    store_kind, bus_kind = backend
    # the first turn streams part of an answer and then hangs until the server dies
    upstream.route(
        CHAT,
        SSEReply(chat_chunks(text=PARTIAL), stall_after=len(PARTIAL) + 1),
        SSEReply(chat_chunks(text=AFTER)),
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
                if bus_kind == "memory":  # the restart repaired it at once
                    repaired = last_assistant(client, chat_id)
                    ended = follow(client, chat_id, last_id)
                    assert [e["type"] for _, e in ended][-2:] == [
                        "chat:message:error",
                        "chat:completion",
                    ], (last_id, ended)  # seqs too: the restart must number above last_id
                    assert all(seq > last_id for seq, _ in ended)
                    last_id = ended[-1][0]
                    accepted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "2"})
                else:  # the dead worker's lease must expire first; a follower then sees it
                    wait_for(
                        lambda: (
                            read_events(client, chat_id, limit=1)[0][1]["data"]["messages"][-1][
                                "status"
                            ]
                            == "failed"
                        ),
                        "the turn repaired once its lease expired",
                    )
                    accepted = post_until_accepted(client, chat_id)
                    repaired = client.get(f"/api/chats/{chat_id}").json()["messages"][1]
                assert accepted.status_code == 202
                assert repaired["status"] == "failed"
                assert repaired["content"] == "".join(PARTIAL)
                assert repaired["error"] == SERVER_STOPPED
                if bus_kind == "memory":  # an id from before the restart gets the whole next turn
                    assert answer_seen(follow(client, chat_id, last_id)) == "".join(AFTER)
                wait_for(
                    lambda: last_assistant(client, chat_id).get("status") == "completed",
                    "the next turn saved",
                )
                assert last_assistant(client, chat_id)["content"] == "".join(AFTER)
                statuses = [
                    m["status"] for m in client.get(f"/api/chats/{chat_id}").json()["messages"]
                ]
                assert statuses == [None, "failed", None, "completed"]
        finally:
            server.stop()
