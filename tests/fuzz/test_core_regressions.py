"""Inputs the fuzzer found raising inside the core, each kept as a regression test."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from toolrelay.core.formats.transcript import to_chat_messages, to_responses_input, used_call_ids
from toolrelay.core.items import raw_items
from toolrelay.core.stream.event_accumulator import EventAccumulator as Accumulator
from toolrelay.core.stream.reader import BodyReader, read_body
from toolrelay.core.tools.calls import split_calls, split_concatenated


def test_response_object_with_object_arguments() -> None:
    """Issue 7 item 13's minimal input (KeyError: 0 in split_concatenated)."""
    body = (
        b'{"object":"response","status":"completed","output":[{"type":"function_call",'
        b'"id":"f","call_id":"c","name":"lookup","arguments":{"q":1}}]}'
    )
    result, _ = read_body(body)
    assert result.error is None
    assert raw_items(result.output)[0]["arguments"] == '{"q":1}'


def test_responses_event_with_a_list_type() -> None:
    acc = Accumulator()
    acc.feed_event({"type": []})
    acc.finish()
    assert acc.output == []


def test_content_part_with_a_list_type() -> None:
    def frame(event: dict[str, Any]) -> bytes:
        return b"data: " + orjson.dumps(event) + b"\n\n"

    body = (
        frame(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"id": "m", "type": "message", "status": "in_progress", "content": []},
            }
        )
        + frame(
            {
                "type": "response.content_part.added",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": [], "text": ""},
            }
        )
        + frame(
            {
                "type": "response.output_text.delta",
                "output_index": 0,
                "content_index": 0,
                "delta": "Hi",
            }
        )
    )
    reader = BodyReader("sse")
    reader.feed(body)
    reader.finish()
    output = reader.result().output
    to_chat_messages(output)
    to_responses_input(output)


@pytest.mark.parametrize("call_id", [{"a": 1}, ["c"], 7, None])
def test_transcript_with_a_call_id_that_is_not_a_string(call_id: Any) -> None:
    output = [
        {"type": "function_call", "id": "f", "call_id": call_id, "name": "n", "arguments": "{}"},
        {"type": "function_call_output", "id": "o", "call_id": call_id, "output": "x"},
        {"type": "message", "content": 5},
    ]
    assert to_chat_messages(output) == []
    assert to_responses_input(output) == []
    assert used_call_ids([{"role": "tool", "tool_call_id": ["x"]}], output) == set()


def test_split_calls_with_missing_or_object_arguments() -> None:
    calls: list[Any] = [
        {"type": "function_call", "call_id": "a"},
        {"call_id": "b", "arguments": {"q": 1}},
    ]
    assert split_calls(calls) == calls
    odd: Any = {"q": 1}
    assert split_concatenated(odd) == [odd]


def test_responses_event_without_a_type() -> None:
    acc = Accumulator()
    assert acc.feed_event({"output_index": 0}) == []
    acc.finish()


def test_chat_content_part_with_a_list_type() -> None:
    """Found by `make fuzz`: a Mistral-style content part whose `type` is a list."""
    chunk = {"choices": [{"index": 0, "delta": {"content": [{"type": [], "text": "17"}, "!"]}}]}
    result, _ = read_body(b"data: " + orjson.dumps(chunk) + b"\n\ndata: [DONE]\n\n")
    assert result.error is None
    assert raw_items(result.output)[0]["content"][0]["text"] == "!"


def test_chat_chunk_whose_delta_is_a_one_item_list() -> None:
    """AttributeError: 'list' object has no attribute 'get' (the translator's
    fast path took a one-item list for a one-key delta)."""
    text = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}
    odd = {"choices": [{"index": 0, "delta": ["content"], "finish_reason": None}]}
    body = b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in (text, odd, text))
    result, _ = read_body(body + b"data: [DONE]\n\n", "sse")
    assert result.error is None
    assert raw_items(result.output)[0]["content"][0]["text"] == "HiHi"
