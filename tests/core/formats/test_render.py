"""The renderers: chunks, streamed answers, Responses events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.formats.answer import turn_answer
from toolrelay.core.formats.chat_completions.render import (
    ChatStream,
    ChunkWriter,
    chunk,
    chunk_choice,
    completion_for,
)
from toolrelay.core.formats.responses.render import ResponsesStream
from toolrelay.core.formats.sse import sse_data
from toolrelay.core.items import function_call_item, message_item
from toolrelay.core.turn.status import TurnStatus


def _frames(body: bytes) -> list[dict[str, Any]]:
    lines = (line for frame in body.split(b"\n\n") for line in frame.split(b"\n"))
    return [orjson.loads(line[6:]) for line in lines if line.startswith(b"data: {")]


def test_the_fast_chunk_writer_writes_the_same_bytes_as_the_chunk_builder() -> None:
    writer = ChunkWriter("m", id="chatcmpl-1", created=7)
    delta = {"content": "héllo"}
    assert writer.delta(delta) == sse_data(chunk("chatcmpl-1", 7, "m", [chunk_choice(delta)]))
    assert writer.delta({}, "stop", toolrelay={"x": 1}) == sse_data(
        chunk("chatcmpl-1", 7, "m", [chunk_choice({}, "stop")], toolrelay={"x": 1})
    )
    assert writer.extra("usage", {"total_tokens": 3}) == sse_data(
        chunk("chatcmpl-1", 7, "m", [], usage={"total_tokens": 3})
    )


def _final(status: str, output: Sequence[Mapping[str, Any]], **extra: Any) -> Event:
    return Event(ev.CHAT_COMPLETION, {"done": True, "status": status, "output": output, **extra})


def test_chat_stream_joins_message_items_and_ends_with_the_answer() -> None:
    stream = ChatStream("m", include_usage=True)
    body = stream.start()
    body += stream.feed(Event(ev.OUTPUT_TEXT_DELTA, {"item_id": "a", "delta": "one"}))
    body += stream.feed(Event(ev.OUTPUT_ITEM_DONE, {"output_index": 0}))
    body += stream.feed(Event(ev.OUTPUT_TEXT_DELTA, {"item_id": "b", "delta": "two"}))
    call = function_call_item("c1", "add", "{}", status="completed")
    body += stream.feed(_final("completed", [call], usage={"input_tokens": 2, "output_tokens": 1}))
    assert stream.done and body.endswith(b"data: [DONE]\n\n")
    chunks = _frames(body)
    texts = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    assert texts[:3] == ["", "one", "\n\ntwo"]
    assert chunks[-3]["choices"][0]["delta"]["tool_calls"][0]["id"] == "c1"
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"] == {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}


def test_chat_stream_sends_a_failure_as_an_error_frame() -> None:
    stream = ChatStream("m")
    body = stream.feed(_final("failed", [message_item("half")], error={"content": "boom"}))
    assert _frames(body) == [
        {"error": {"message": "boom", "type": "upstream_error", "code": "failed"}}
    ]
    assert body.endswith(b"data: [DONE]\n\n")


def test_chat_stream_shows_loop_events_only_when_asked() -> None:
    event = Event(ev.SOURCE, {"url": "u"})
    assert ChatStream("m").feed(event) == b""
    assert _frames(ChatStream("m", events=True).feed(event))[0]["toolrelay"] == event.to_dict()


def test_streamed_and_whole_chat_answers_agree() -> None:
    text = message_item("partial", status="completed")
    answer = turn_answer(status=TurnStatus.CAPPED, output=[text], error="limit")
    whole = completion_for(answer, "m")
    stream = ChatStream("m")
    last = _frames(stream.feed(_final("capped", [text], error={"content": "limit"})))[-1]
    assert last["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"] == "length"
    assert last["toolrelay"] == whole["toolrelay"] == {"status": "capped", "error": "limit"}


def test_responses_stream_announces_items_that_arrive_complete() -> None:
    stream = ResponsesStream("m")
    body = stream.start()
    item = {"type": "function_call_output", "call_id": "c1", "output": "2"}
    body += stream.feed(Event(ev.OUTPUT_ITEM_DONE, {"output_index": 1, "item": item}))
    body += stream.feed(Event(ev.CHAT_TITLE, {"title": "not a Responses event"}))
    body += stream.feed(_final("completed", [item]))
    events = _frames(body)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == [0, 1, 2, 3, 4]
    assert events[-1]["response"]["output"] == [item]
