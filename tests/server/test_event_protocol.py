"""Real chat streams keep to the event protocol's JSON Schema (`docs/events.schema.json`).

A turn runs over the server's SSE stream against a real-socket fake model server:
reasoning, text, a client tool asked and answered, usage, the final event and the
title task after it; and a cancelled turn. Every frame, the opening snapshot
included, is validated against `toolrelay.events.schema()`.
"""

from __future__ import annotations

from typing import Any

import jsonschema

from tests.server.conftest import Running
from tests.server.test_chats_api import (
    CHAT,
    LOCATION_TOOL,
    events_answering_tools,
    new_chat,
    read_events,
    start_stalling_turn,
    wait_saved,
)
from toolrelay.events import schema
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks


def check(frames: list[tuple[int, dict[str, Any]]]) -> set[str]:
    """Validate each frame's `data:` line as sent (`read_events(raw=True)`); the types
    seen, from the frames' `event:` lines (a delta's data names none)."""
    validator = jsonschema.Draft202012Validator(schema())
    for _, frame in frames:
        sent = {k: v for k, v in frame.items() if k != "event"}
        validator.validate(sent)
        assert sent.get("type", frame["event"]) == frame["event"], frame
    return {frame["event"] for _, frame in frames}


def test_a_turn_with_a_client_tool_keeps_to_the_schema(running: Running) -> None:
    running.upstream.route(
        CHAT,
        SSEReply(
            chat_chunks(
                reasoning=["Where ", "is it?"],
                tool_calls=[ToolCallSpec("get_location", {"precise": True}, id="call_g")],
                args_pieces=3,
                usage={"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
            )
        ),
        SSEReply(chat_chunks(text=["Paris ", "it is."])),
    )
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        client.post(
            f"/api/chats/{chat_id}/messages", json={"content": "where?", "tools": LOCATION_TOOL}
        )
        seen = events_answering_tools(client, chat_id, "Paris", raw=True)
        wait_saved(client, chat_id)
        types = check(seen) | check(read_events(client, chat_id, last=0, raw=True))
    assert {
        "chat:snapshot",
        "response.output_item.added",
        "response.output_item.done",
        "response.reasoning_text.delta",
        "response.function_call_arguments.delta",
        "execute:tool",
        "response.output_text.delta",
        "chat:completion",
    } <= types


def test_a_cancelled_turn_keeps_to_the_schema(running: Running) -> None:
    with running.client() as client:
        chat_id, first = start_stalling_turn(running, client)
        assert client.post(f"/api/chats/{chat_id}/cancel").json() == {"cancelled": True}
        wait_saved(client, chat_id, status="cancelled")
        types = check(read_events(client, chat_id, last=first[0][0], raw=True))
    for _, event in first:  # the snapshot and the turn's start, read whole
        jsonschema.Draft202012Validator(schema()).validate(event)
    assert {"chat:tasks:cancel", "chat:completion"} <= types
