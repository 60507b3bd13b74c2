"""The same server code on PostgreSQL + Redis (the many-workers setup), and two workers sharing them."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

from tests.adapters.stores.conftest import _pg_execute
from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import (
    LOCATION_TOOL,
    events_answering_tools,
    new_chat,
    read_events,
    wait_saved,
)
from toolrelay.core.events import DELTA_EVENTS
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

CHAT = "/v1/chat/completions"


def test_postgres_and_redis_with_two_workers(tmp_path: Path, upstream: FakeModelServer) -> None:
    name = f"toolrelay_server_{secrets.token_hex(4)}"
    asyncio.run(_pg_execute(f'CREATE DATABASE "{name}"'))
    try:
        settings = make_settings(
            tmp_path,
            upstream,
            database_url=f"postgresql://postgres@127.0.0.1:5432/{name}",
            events_url="redis://127.0.0.1:6379/0",
        )
        upstream.route(
            CHAT,
            SSEReply(chat_chunks(tool_calls=[ToolCallSpec("get_location", {}, id="call_w")])),
            SSEReply(chat_chunks(text="Berlin.")),
        )
        with ServerThread(settings) as first, ServerThread(settings) as second:
            a, b = Running(first, upstream, settings), Running(second, upstream, settings)
            with a.client() as worker_a, b.client() as worker_b:
                chat_id = new_chat(worker_a, model="fake")
                content = {"content": "where?", "tools": LOCATION_TOOL}
                worker_a.post(f"/api/chats/{chat_id}/messages", json=content)
                # the turn runs on worker A; the client talks to worker B only, from the
                # turn's start; the answer waits for the pause and B takes the turn on
                events = events_answering_tools(
                    worker_b, chat_id, "Berlin", last=0, paused_first=True
                )
                # the answer's final event, then the title (the first message: no task model)
                assert [e["type"] for _, e in events[-2:]] == ["chat:completion", "chat:title"]
                saved = wait_saved(worker_b, chat_id)
                assert saved["content"] == "Berlin."
                replay = read_events(worker_b, chat_id, last=events[0][0])
                # a finished turn's deltas are not kept; the part before the pause is
                kept = [s for s, e in events[1:] if e["type"] not in DELTA_EVENTS]
                assert [s for s, _ in replay] == kept
    finally:
        asyncio.run(_pg_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def test_two_workers_keep_one_turn_per_chat_resume_and_cancel_across_them(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    """The turn runs on worker A; worker B refuses a second turn, resumes, cancels it."""
    name = f"toolrelay_server_{secrets.token_hex(4)}"
    asyncio.run(_pg_execute(f'CREATE DATABASE "{name}"'))
    try:
        settings = make_settings(
            tmp_path,
            upstream,
            database_url=f"postgresql://postgres@127.0.0.1:5432/{name}",
            events_url="redis://127.0.0.1:6379/0",
        )
        words = ["partial ", "words ", "never ", "end"]
        upstream.route(CHAT, SSEReply(chat_chunks(text=words), stall_after=3, stall_for=3600))
        with ServerThread(settings) as first, ServerThread(settings) as second:
            a, b = Running(first, upstream, settings), Running(second, upstream, settings)
            with a.client() as worker_a, b.client() as worker_b:
                chat_id = new_chat(worker_a, model="fake")
                posted = worker_a.post(f"/api/chats/{chat_id}/messages", json={"content": "go"})
                assert posted.status_code == 202
                seen = read_events(worker_b, chat_id, last=0, limit=3)  # B follows A's turn
                assert any(e["type"] == "response.output_text.delta" for _, e in seen)
                for worker in (worker_b, worker_a):  # one turn per chat, whoever is asked
                    busy = worker.post(f"/api/chats/{chat_id}/messages", json={"content": "again"})
                    assert busy.status_code == 409, busy.text
                    assert busy.json()["error"]["code"] == "turn_running"
                cancelled = worker_b.post(f"/api/chats/{chat_id}/cancel")
                assert cancelled.json() == {"cancelled": True}  # reached A over the bus
                saved = wait_saved(worker_b, chat_id, status="cancelled")
                assert saved["content"].startswith("partial")
                rest = read_events(worker_b, chat_id, last=seen[-1][0])  # resume on B
                seqs = [s for s, _ in seen + rest]
                assert seqs == sorted(set(seqs))  # no repeat (the finished turn's deltas went)
                assert seqs[1:3] == [seqs[0] + 1, seqs[0] + 2]  # the turn from its start
                assert rest[-1][1]["type"] == "chat:completion"
                # the chat is free again for either worker
                upstream.route(CHAT, SSEReply(chat_chunks(text="Done.")))
                again = worker_b.post(f"/api/chats/{chat_id}/messages", json={"content": "once"})
                assert again.status_code == 202, again.text
                assert wait_saved(worker_a, chat_id)["content"] == "Done."
    finally:
        asyncio.run(_pg_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
