"""One reader's chat stream (`ChatFrames`) and its reading back (`ChatStreamReader`).

An item's `done` leaves out the text a reader was sent as deltas, only when that
reader was sent all of them and they build exactly that text; read back, every
event is what the bus held.
"""

from __future__ import annotations

from typing import Any

import orjson

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.formats.chat_stream import ChatFrames, ChatStreamReader
from toolrelay.core.stream.framing import SSEDecoder


def _message(text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def _call(arguments: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c1",
        "name": "f",
        "arguments": arguments,
    }


def _delta(kind: str, item_id: str, delta: str, index: int = 0) -> Event:
    data: dict[str, Any] = {"item_id": item_id, "output_index": index, "delta": delta}
    if kind != ev.FUNCTION_CALL_ARGUMENTS_DELTA:
        data["content_index"] = 0
    return Event(kind, data)


def _turn() -> list[Event]:
    return [
        Event(ev.OUTPUT_ITEM_ADDED, {"output_index": 0, "item": _call("")}),
        _delta(ev.FUNCTION_CALL_ARGUMENTS_DELTA, "fc_1", '{"a":'),
        _delta(ev.FUNCTION_CALL_ARGUMENTS_DELTA, "fc_1", " 1}"),
        Event(ev.OUTPUT_ITEM_DONE, {"output_index": 0, "item": _call('{"a": 1}')}),
        Event(ev.OUTPUT_ITEM_ADDED, {"output_index": 1, "item": _message("", "in_progress")}),
        _delta(ev.OUTPUT_TEXT_DELTA, "msg_1", "Hello ", 1),
        _delta(ev.OUTPUT_TEXT_DELTA, "msg_1", "there.", 1),
        Event(ev.OUTPUT_ITEM_DONE, {"output_index": 1, "item": _message("Hello there.")}),
        Event(ev.CHAT_COMPLETION, {"done": True, "status": "completed"}),
    ]


def _sent(events: list[Event]) -> list[dict[str, Any]]:
    """Each frame's `data:` line, with `event` (its `event:` line) beside."""
    frames = ChatFrames()
    wire = b"".join(frames.frame(seq, event) for seq, event in enumerate(events, 1))
    return [{**orjson.loads(f.data), "event": f.event} for f in SSEDecoder().feed(wire)]


def test_a_reader_sent_every_delta_gets_each_done_without_the_text() -> None:
    events = _turn()
    sent = _sent(events)
    done = [e["data"] for e in sent if e["event"] == ev.OUTPUT_ITEM_DONE]
    assert [d.get("from_deltas") for d in done] == [True, True]
    assert "arguments" not in done[0]["item"]
    assert done[1]["item"]["content"] == [{"type": "output_text", "annotations": []}]
    assert b"Hello there." not in orjson.dumps(sent)  # the text went only as its deltas


def test_a_delta_frame_names_its_place_only_when_it_moved() -> None:
    events = _turn()
    events.insert(2, Event(events[1].type, {**events[1].data, "delta": "", "logprobs": []}))
    sent = _sent(events)
    deltas = [e for e in sent if e["event"] in ev.DELTA_EVENTS]
    assert all("type" not in e for e in deltas)  # the `event:` line names it
    assert [e["data"] for e in deltas] == [
        {"item_id": "fc_1", "output_index": 0, "delta": '{"a":'},
        {"delta": "", "logprobs": []},  # a provider's own field passes through
        {"delta": " 1}"},
        {"item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": "Hello "},
        {"delta": "there."},
    ]
    assert all(e["type"] == e["event"] for e in sent if e not in deltas)


def test_read_back_every_event_is_the_one_the_bus_held() -> None:
    events = _turn()
    events.insert(2, Event(events[1].type, {**events[1].data, "delta": "", "logprobs": []}))
    frames = ChatFrames()
    wire = b"".join(frames.frame(seq, event) for seq, event in enumerate(events, 1))
    reader = ChatStreamReader()
    got = [e for chunk in _chunks(wire, 7) for _, e in reader.feed(chunk)]
    assert got == events
    assert wire.count(b'"from_deltas":true') == 2  # both items' text put back from deltas


def test_a_reader_that_joined_mid_item_gets_it_whole() -> None:
    events = _turn()[5:]  # from the message's first delta: its `added` was before
    sent = _sent(events)
    assert sent[-2]["data"] == events[-2].data  # whole, no from_deltas


def test_a_replay_without_the_deltas_gets_the_items_whole() -> None:
    events = [e for e in _turn() if e.type not in ev.DELTA_EVENTS]
    sent = _sent(events)
    assert [e["data"] for e in sent] == [e.data for e in events]


def test_deltas_that_did_not_build_the_text_leave_it_whole() -> None:
    rewritten = _turn()
    rewritten[7] = Event(ev.OUTPUT_ITEM_DONE, {"output_index": 1, "item": _message("Hi.")})
    assert _sent(rewritten)[7]["data"] == rewritten[7].data
    replaced = _turn()
    replaced.insert(
        7, Event(ev.CHAT_MESSAGE, {"item_id": "msg_1", "output_index": 1, "content": "x"})
    )
    assert _sent(replaced)[8]["data"] == replaced[8].data
    refusal = _turn()
    item = _message("Hello there.")
    item["content"].append({"type": "refusal", "refusal": "no"})
    refusal[7] = Event(ev.OUTPUT_ITEM_DONE, {"output_index": 1, "item": item})
    assert _sent(refusal)[7]["data"] == refusal[7].data


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_a_delta_typed_event_that_is_not_ours_goes_as_it_came() -> None:
    """A tool's own event may reuse a delta's type without its keys: sent whole, and
    the deltas around it keep their places."""
    odd = Event(ev.OUTPUT_TEXT_DELTA, {"note": "from a tool"})
    events = _turn()
    events.insert(6, odd)
    sent = _sent(events)
    assert {k: v for k, v in sent[6].items() if k != "event"} == odd.to_dict()
    assert sent[7]["data"] == {"delta": "there."}  # still the message's place
    reader = ChatStreamReader()
    wire = b"".join(ChatFrames().frame(seq, e) for seq, e in enumerate(events, 1))
    assert [e for _, e in reader.feed(wire)] == events  # read back as they were
