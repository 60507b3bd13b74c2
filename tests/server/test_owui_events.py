"""Issue 29 item 6: the Open WebUI event mode (`GET /api/chats/{id}/events?format=openwebui`)
over a real server, and the translation of each event that differs (`core.formats.openwebui_events`)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import orjson

from tests.patience import HANG
from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.config.settings import ModelRoute
from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.formats.openwebui_events import OpenWebUIEvents
from toolrelay.core.stream.framing import SSEDecoder
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

CHAT = "/v1/chat/completions"


def _owui_events(
    client: httpx2.Client,
    chat_id: str,
    last: int = 0,
    seen: threading.Event | None = None,
    query: str = "?format=openwebui",
) -> list[dict[str, Any]]:
    """Frames to the stream's end; `seen` is set once a turn's event has arrived."""
    out = []
    decoder = SSEDecoder()
    url = f"/api/chats/{chat_id}/events{query}"
    with client.stream("GET", url, headers={"Last-Event-ID": str(last)}) as response:
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            out += [orjson.loads(frame.data) for frame in decoder.feed(chunk)]
            if seen is not None and any(f["data"]["type"] == "response:completion" for f in out):
                seen.set()
    return out


def test_a_turn_in_open_webui_form(running: Running) -> None:
    """Read live: a finished turn's replay has no deltas left (event retention)."""
    seen = threading.Event()
    running.upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2})])),
        SSEReply(chat_chunks(text=["Three", "."]), holds={0: seen}),
    )
    with running.client() as client, ThreadPoolExecutor(1) as pool:
        chat_id = new_chat(client, model="fake")
        posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "1+2?"})
        assert posted.status_code == 202
        reading = pool.submit(_owui_events, client, chat_id, 0, seen)
        frames = reading.result(timeout=HANG)
        saved = wait_saved(client, chat_id)
    assert all(set(f) == {"chat_id", "message_id", "data"} for f in frames)  # snapshot too
    assert frames[0]["data"]["type"] == "chat:snapshot"
    assert frames[0]["data"]["data"]["messages"][-1]["id"] == frames[0]["message_id"]
    turn = [f for f in frames if f.get("data", {}).get("type") != "chat:snapshot"]
    assert {f["chat_id"] for f in turn} == {chat_id}
    assert {f["message_id"] for f in turn} == {saved["id"]}
    kinds = [f["data"]["type"] for f in turn]
    assert kinds[0] == "chat:active" and turn[0]["data"]["data"] == {"active": True}
    done = kinds.index("chat:completion", kinds.index("response:completion"))
    while not turn[done]["data"]["data"].get("done"):
        done = kinds.index("chat:completion", done + 1)
    assert kinds[done + 1] == "chat:active" and turn[done + 1]["data"]["data"] == {"active": False}
    final = turn[done]["data"]["data"]
    assert "title" in final and final["content"] == "Three."
    assert final["output"] == saved["output"]  # whole items, no references
    deltas = [
        f["data"]["data"]
        for f in turn
        if f["data"]["type"] == "response:completion"
        and f["data"]["data"]["type"] == "response.output_text.delta"
    ]
    assert "".join(d["delta"] for d in deltas) == "Three."
    assert all("item_id" in d for d in deltas)  # whole deltas, not a chat stream's lean ones
    responses = [f["data"]["data"] for f in turn if f["data"]["type"] == "response:completion"]
    done_items = [d for d in responses if d["type"] == "response.output_item.done"]
    answer = [d for d in done_items if d["item"]["type"] == "message"][-1]
    assert "from_deltas" not in answer  # Open WebUI's front end gets each item whole
    assert answer["item"]["content"][0]["text"] == "Three."
    assert not [k for k in kinds if k.startswith("response.")]  # all inside response:completion
    titles = [f["data"]["data"] for f in turn if f["data"]["type"] == "chat:title"]
    assert titles == ["1+2?"]  # a string, as Open WebUI sends it


def test_each_differing_event_is_translated() -> None:
    owui = OpenWebUIEvents(title="Old")
    owui.message_id = "msg_1"
    out = owui.feed(Event(ev.OUTPUT_TEXT_DELTA, {"item_id": "m", "delta": "x"}))
    assert [e.type for e in out] == ["chat:active", "response:completion"]
    assert out[1].data == {"type": ev.OUTPUT_TEXT_DELTA, "item_id": "m", "delta": "x"}
    assert owui.feed(Event(ev.CHAT_OUTLET, {"content": "Hi", "output": []}))[0].data == {
        "messages": [{"id": "msg_1", "role": "assistant", "content": "Hi", "output": []}]
    }
    assert owui.feed(Event(ev.CHAT_TASKS_CANCEL, {})) == []  # held for the output
    out = owui.feed(Event(ev.CHAT_COMPLETION, {"done": True, "output": [{"id": "m"}]}))
    assert [e.type for e in out] == ["chat:tasks:cancel", "chat:completion", "chat:active"]
    assert out[0].data == {"output": [{"id": "m"}]} and out[1].data["title"] == "Old"
    title = owui.feed(Event(ev.CHAT_TITLE, {"title": "New"}))
    found: list[tuple[str, Any]] = [(e.type, e.data) for e in title]
    assert found == [("chat:title", "New")]  # a string; no new turn
    tags: Any = owui.feed(Event(ev.CHAT_TAGS, {"tags": ["a"]}))[0].data
    assert tags == ["a"]
    assert owui.title == "New" and not owui.active


def test_a_route_can_make_open_webui_the_default(tmp_path: Path, upstream: FakeModelServer) -> None:
    routes = [ModelRoute(name="owui", base_url=upstream.base_url, model="m", events="openwebui")]
    upstream.set_default(SSEReply(chat_chunks(text="Hi.")))
    settings = make_settings(tmp_path, upstream, models=routes)
    with ServerThread(settings) as base_url, Running(base_url, upstream, settings).client() as c:
        chat_id = new_chat(c, model="owui")
        assert c.post(f"/api/chats/{chat_id}/messages", json={"content": "hi"}).status_code == 202
        wait_saved(c, chat_id)
        plain = _owui_events(c, chat_id, query="")  # the route's default form
    assert all("chat_id" in e for e in plain)  # enveloped, unasked
    kinds = [e["data"]["type"] for e in plain if e["data"]["type"] != "chat:snapshot"]
    assert kinds[0] == "chat:active" and "response:completion" in kinds


def test_the_final_events_item_references_become_whole_items() -> None:
    """The chat stream's final event refers to items its output_item.done events sent
    (`server.live_events`); Open WebUI's front end replaces the message with the final
    event's output and content, so both are made whole again."""
    text = [{"type": "output_text", "text": "Hi."}]
    item: dict[str, Any] = {"id": "m", "type": "message", "status": "completed", "content": text}
    call: dict[str, Any] = {"id": "c", "type": "function_call", "status": "completed", "name": "f"}
    refs: list[Any] = [{"id": "m", "type": "message", "status": "completed", "ref": True}]
    final = Event(ev.CHAT_COMPLETION, {"done": True, "output": refs + [call]})
    owui = OpenWebUIEvents()
    owui.feed(Event(ev.OUTPUT_ITEM_DONE, {"output_index": 0, "item": item}))
    assert not owui.unresolved(final)
    done = [e.data for e in owui.feed(final) if e.type == ev.CHAT_COMPLETION][0]
    assert done["output"] == [item, call] and done["content"] == "Hi."
    late = OpenWebUIEvents()  # resumed after the item's done event: told by the saved message
    assert late.unresolved(final)
    late.remember([item])
    done = [e.data for e in late.feed(final) if e.type == ev.CHAT_COMPLETION][0]
    assert done["output"] == [item, call] and done["content"] == "Hi."


def test_a_resumed_open_webui_subscriber_gets_the_whole_final_event(running: Running) -> None:
    running.upstream.route(CHAT, SSEReply(chat_chunks(text=["Hel", "lo."])))
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        assert client.post(f"/api/chats/{chat_id}/messages", json={"content": "hi"}).status_code
        saved = wait_saved(client, chat_id)
        plain = read_events(client, chat_id, last=0)
        done_at = [s for s, e in plain if e["type"] == ev.OUTPUT_ITEM_DONE][-1]
        final = [e for _, e in plain if e["type"] == ev.CHAT_COMPLETION and e["data"]["done"]]
        assert final[0]["data"]["output"][0].get("ref") is True  # what the plain stream sends
        frames = _owui_events(client, chat_id, last=done_at)  # the item went before
    found = [f["data"]["data"] for f in frames if f["data"]["type"] == ev.CHAT_COMPLETION]
    whole = [d for d in found if d.get("done")]
    assert whole[0]["output"] == saved["output"] and whole[0]["content"] == "Hello."
