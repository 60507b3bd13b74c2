"""The same server code on PostgreSQL + Redis (the many-workers setup), and two workers sharing them."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import orjson

from tests.adapters.stores.conftest import _pg_execute
from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.core.framing import SSEDecoder
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
        tools = [
            {
                "type": "function",
                "function": {
                    "name": "get_location",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        ]
        with ServerThread(settings) as first, ServerThread(settings) as second:
            a, b = Running(first, upstream, settings), Running(second, upstream, settings)
            with a.client() as worker_a, b.client() as worker_b:
                chat_id = new_chat(worker_a, model="fake")
                worker_a.post(
                    f"/api/chats/{chat_id}/messages", json={"content": "where?", "tools": tools}
                )
                # the turn runs on worker A; the client talks to worker B only
                events: list[tuple[int, dict[str, object]]] = []
                decoder = SSEDecoder()
                with worker_b.stream("GET", f"/api/chats/{chat_id}/events") as response:
                    for chunk in response.iter_bytes():
                        for frame in decoder.feed(chunk):
                            event = orjson.loads(frame.data)
                            events.append((int(frame.id or 0), event))
                            if event["type"] == "execute:tool":
                                answer = {"id": event["data"]["id"], "result": "Berlin"}
                                assert (
                                    worker_b.post(
                                        f"/api/chats/{chat_id}/tool-results", json=answer
                                    ).status_code
                                    == 202
                                )
                assert events[-1][1]["type"] == "chat:completion"
                saved = wait_saved(worker_b, chat_id)
                assert saved["content"] == "Berlin."
                replay = read_events(worker_b, chat_id, last=events[0][0])
                assert [s for s, _ in replay] == [s for s, _ in events[1:]]
    finally:
        asyncio.run(_pg_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
