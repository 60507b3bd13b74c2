"""Issue 29 item 2 through a running server: what an Open WebUI tool emits while it runs
(`message`, `replace`, `files`, `status`, `citation`) is part of the turn: applied to its
items, in the stream in order, saved, shown again after a reload, and its citations
re-injected for the model (R11)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.testing.fake_server import FakeModelServer, RecordedRequest, Reply, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

EMIT_TOOLS = Path(__file__).parent / "owui_emit_tools.py"


@pytest.fixture
def emitting(tmp_path: Path, upstream: FakeModelServer) -> Iterator[Running]:
    settings = make_settings(tmp_path, upstream, tools=[str(EMIT_TOOLS)])
    with ServerThread(settings) as base_url:
        yield Running(base_url, upstream, settings)


def _calls(*calls: ToolCallSpec) -> Any:
    def reply(request: RecordedRequest) -> Reply:
        if any(m["role"] == "tool" for m in request.json["messages"]):
            return SSEReply(chat_chunks(text="Answered."))
        return SSEReply(chat_chunks(tool_calls=list(calls)))

    return reply


def _turn(running: Running) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "argon?"})
        assert posted.status_code == 202, posted.text
        events = [e for _, e in read_events(client, chat_id, last=0)]
        saved = wait_saved(client, chat_id)
    return chat_id, events, saved


def test_what_a_tool_emits_is_part_of_the_turn(emitting: Running) -> None:
    emitting.upstream.set_default(_calls(ToolCallSpec("lookup", {"topic": "argon"}, id="c1")))
    chat_id, events, saved = _turn(emitting)

    # saved: the tool's text is a message item right after the call's output
    types = [i["type"] for i in saved["output"]]
    assert types == ["function_call", "function_call_output", "message", "message"]
    written, answer = saved["output"][2], saved["output"][3]
    assert written["content"][0]["text"] == "Found argon." and written["status"] == "completed"
    assert answer["content"][0]["text"] == "Answered."
    output = saved["output"][1]
    assert [s["description"] for s in output["statuses"]] == ["Searching argon", "Done"]
    assert output["files"] == [{"type": "file", "name": "notes.txt", "url": "/x/notes.txt"}]
    assert output["sources"][0]["source"]["name"] == "argon handbook"
    assert saved["content"] == "Found argon.\n\nAnswered."

    # live, in the order the tool emitted, through the same stream as the rest
    kinds = [e["type"] for e in events]
    order = [
        kinds.index("status"),
        kinds.index("source"),
        kinds.index("response.output_text.delta"),
        kinds.index("chat:message:files"),
    ]
    assert order == sorted(order)
    status = next(e for e in events if e["type"] == "status")["data"]
    assert status["call_id"] == "c1" and status["description"] == "Searching argon"
    added = [
        e["data"]
        for e in events
        if e["type"] == "response.output_item.added"
        and e["data"]["item"]["type"] == "message"
        and e["data"]["item"]["id"] == written["id"]
    ]
    assert added and added[0]["output_index"] == 2
    text = "".join(
        e["data"]["delta"]
        for e in events
        if e["type"] == "response.output_text.delta" and e["data"]["item_id"] == written["id"]
    )
    assert text == "Found argon."

    # the model's next request: the tool's citation as a marker (R11), its text as the answer's
    second = emitting.upstream.requests[-1].json["messages"]
    prompt = next(m for m in reversed(second) if m["role"] == "user")
    assert 'name="argon handbook"' in str(prompt["content"])
    assert any(m["role"] == "assistant" and m.get("content") == "Found argon." for m in second)

    # a reload: the chat's snapshot gives the emitted source back with the message
    with emitting.client() as client:
        messages = client.get(f"/api/chats/{chat_id}").json()["messages"]
    assert [s["source"]["name"] for s in messages[-1]["sources"]] == ["argon handbook"]


def test_replace_rewrites_the_tools_text_and_odd_events_pass(emitting: Running) -> None:
    emitting.upstream.set_default(_calls(ToolCallSpec("rewrite", {"text": "final"}, id="c2")))
    _, events, saved = _turn(emitting)
    written = saved["output"][2]
    assert written["type"] == "message" and written["content"][0]["text"] == "final"
    replaced = [e["data"] for e in events if e["type"] == "chat:message"]
    assert replaced == [{"item_id": written["id"], "output_index": 2, "content": "final"}]
    odd = [e for e in events if e["type"] == "message"]
    assert odd and odd[0]["data"] == {"content": 42}  # not text: nothing changed, passed on
    assert saved["status"] == "completed"
