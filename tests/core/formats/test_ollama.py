"""Ollama /api/chat translation: exact delta lists for streamed and whole objects."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.core.formats.ollama.parse import OllamaDecoder
from toolrelay.core.stream.deltas import (
    Delta,
    ErrorDelta,
    FinishDelta,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    UsageDelta,
)
from toolrelay.core.stream.framing import NDJSONDecoder

MINTED = re.compile(r"^call_[0-9a-f]{24}$")


def line(message: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    """One streamed /api/chat object."""
    body: dict[str, Any] = {
        "model": "qwen3:8b",
        "created_at": "2025-01-01T00:00:00Z",
        "done": False,
    }
    if message is not None:
        body["message"] = {"role": "assistant", "content": "", **message}
    body.update(top)
    return body


def run(*objects: Any) -> list[Delta]:
    decoder = OllamaDecoder()
    out: list[Delta] = []
    for item in objects:
        out.extend(decoder.feed(item))
    return out


DONE = {
    "done": True,
    "done_reason": "stop",
    "total_duration": 900,
    "load_duration": 100,
    "prompt_eval_count": 12,
    "prompt_eval_duration": 200,
    "eval_count": 7,
    "eval_duration": 500,
}
DONE_USAGE = {
    "prompt_eval_count": 12,
    "eval_count": 7,
    "total_duration": 900,
    "load_duration": 100,
    "prompt_eval_duration": 200,
    "eval_duration": 500,
}


def test_thinking_then_content_then_done() -> None:
    out = run(
        line({"thinking": "Let me"}),
        line({"thinking": " see."}),
        line({"content": "Hi", "thinking": ""}),
        line({"content": "!"}),
        line({"content": ""}, **DONE),
    )
    assert out == [
        ReasoningDelta("Let me"),
        ReasoningDelta(" see."),
        TextDelta("Hi"),
        TextDelta("!"),
        UsageDelta(DONE_USAGE),
        FinishDelta("stop"),
    ]


def test_thinking_before_content_in_one_object() -> None:
    assert run(line({"thinking": "t", "content": "c"})) == [ReasoningDelta("t"), TextDelta("c")]


def test_tool_calls_get_minted_ids_and_compact_arguments() -> None:
    decoder = OllamaDecoder()
    first = decoder.feed(
        line(
            {
                "tool_calls": [
                    {
                        "function": {
                            "name": "get_weather",
                            "arguments": {"city": "Paris", "days": 2},
                        }
                    },
                    {"function": {"index": 1, "name": "get_time", "arguments": {}}},
                ]
            }
        )
    )
    second = decoder.feed(
        line(
            {"tool_calls": [{"id": "call_kept", "function": {"name": "x", "arguments": '{"a":1}'}}]}
        )
    )
    done = decoder.feed(line({"content": ""}, **DONE))
    assert len(first) == 2
    a, b = first
    assert isinstance(a, ToolCallDelta) and isinstance(b, ToolCallDelta)
    assert a.call_id is not None and MINTED.match(a.call_id)
    assert b.call_id is not None and MINTED.match(b.call_id)
    assert a.call_id != b.call_id
    assert first == [
        ToolCallDelta(0, a.call_id, "get_weather", '{"city":"Paris","days":2}'),
        ToolCallDelta(1, b.call_id, "get_time", "{}"),
    ]
    assert second == [ToolCallDelta(2, "call_kept", "x", '{"a":1}')]
    assert done == [UsageDelta(DONE_USAGE), FinishDelta("tool_calls")]


def test_done_with_only_some_counts_and_no_reason() -> None:
    out = run(
        {
            "model": "m",
            "message": {"role": "assistant", "content": "x"},
            "done": True,
            "eval_count": 3,
        }
    )
    assert out == [TextDelta("x"), UsageDelta({"eval_count": 3}), FinishDelta("stop")]


def test_done_reason_passed_through() -> None:
    assert run(line({}, done=True, done_reason="length")) == [FinishDelta("length")]


def test_done_must_be_true_not_truthy() -> None:
    assert run(line({"content": "a"}, done="yes", eval_count=1)) == [TextDelta("a")]


def test_error_line() -> None:
    assert run({"error": "model 'nope' not found"}) == [
        ErrorDelta("model 'nope' not found", "model 'nope' not found")
    ]


def test_non_streaming_object() -> None:
    body = {
        "model": "llama3.2",
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "f", "arguments": {"q": "A"}}}],
        },
        **DONE,
    }
    out = run(body)
    assert len(out) == 3
    call = out[0]
    assert isinstance(call, ToolCallDelta) and call.call_id is not None
    assert out == [
        ToolCallDelta(0, call.call_id, "f", '{"q":"A"}'),
        UsageDelta(DONE_USAGE),
        FinishDelta("tool_calls"),
    ]


def test_garbage_yields_nothing() -> None:
    for item in [
        None,
        "x",
        [1],
        {},
        {"message": "x"},
        {"message": {"content": 3, "tool_calls": "x"}},
    ]:
        assert run(item) == [], item
    weird = run({"message": {"tool_calls": [None, {"function": "x"}]}})
    assert len(weird) == 1 and isinstance(weird[0], ToolCallDelta)
    assert (weird[0].slot, weird[0].name, weird[0].arguments) == (0, None, "")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "message",
                    "content",
                    "thinking",
                    "tool_calls",
                    "function",
                    "name",
                    "arguments",
                    "id",
                    "done",
                    "done_reason",
                    "eval_count",
                    "error",
                ]
            )
            | st.text(max_size=5),
            children,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(json_values, max_size=6))
def test_feed_never_raises(values: list[Any]) -> None:
    decoder = OllamaDecoder()
    for value in values:
        assert isinstance(decoder.feed(value), list)
        assert isinstance(decoder.feed({"message": value, "done": True}), list)


# --- recorded /api/chat bodies, through the real NDJSON framing ----------------

FIXTURES = Path(__file__).parents[2] / "fixtures" / "streams"


def replay(name: str) -> tuple[list[Delta], int]:
    """All deltas of a recorded body, and how many lines were not JSON."""
    framing = NDJSONDecoder()
    decoder = OllamaDecoder()
    deltas: list[Delta] = []
    unreadable = 0
    body = (FIXTURES / name).read_bytes()
    for raw in framing.feed(body) + framing.flush():
        try:
            deltas += decoder.feed(orjson.loads(raw))
        except orjson.JSONDecodeError:
            unreadable += 1
    return deltas, unreadable


def test_recorded_thinking_then_text() -> None:
    deltas, unreadable = replay("ollama/thinking-text.ndjson")
    assert unreadable == 0
    assert deltas == [
        ReasoningDelta("Simple"),
        ReasoningDelta(" greeting"),
        ReasoningDelta("; reply"),
        ReasoningDelta(" kindly."),
        TextDelta("Hello"),
        TextDelta("! Nice"),
        TextDelta(" to meet"),
        TextDelta(" you."),
        UsageDelta(
            {
                "prompt_eval_count": 14,
                "eval_count": 31,
                "total_duration": 1843920917,
                "load_duration": 28518333,
                "prompt_eval_duration": 110416125,
                "eval_duration": 1703188542,
            }
        ),
        FinishDelta("stop"),
    ]


def test_recorded_tool_calls() -> None:
    deltas, _ = replay("ollama/tool-calls.ndjson")
    assert len(deltas) == 7
    first, second = deltas[3], deltas[4]
    assert isinstance(first, ToolCallDelta) and isinstance(second, ToolCallDelta)
    assert first.call_id is not None and MINTED.match(first.call_id)
    assert second.call_id is not None and MINTED.match(second.call_id)
    assert deltas == [
        ReasoningDelta("Need"),
        ReasoningDelta(" both"),
        ReasoningDelta(" cities."),
        ToolCallDelta(0, first.call_id, "get_weather", '{"city":"Toronto","units":"metric"}'),
        ToolCallDelta(1, second.call_id, "get_weather", '{"city":"Montréal","days":2}'),
        UsageDelta(
            {
                "prompt_eval_count": 201,
                "eval_count": 44,
                "total_duration": 2210345000,
                "load_duration": 15020000,
                "prompt_eval_duration": 300111000,
                "eval_duration": 1890200000,
            }
        ),
        FinishDelta("tool_calls"),
    ]


def test_recorded_error_line_keeps_partial_text() -> None:
    message = "an error was encountered while running the model: unexpected EOF"
    assert replay("ollama/error.ndjson") == (
        [TextDelta("Once upon"), TextDelta(" a time"), ErrorDelta(message, message)],
        0,
    )


def test_recorded_truncated_body() -> None:
    assert replay("malformed/ollama-truncated.ndjson") == (
        [TextDelta("Partial"), TextDelta(" answ")],
        1,
    )


def test_recorded_non_streaming_object() -> None:
    body = orjson.loads((FIXTURES / "ollama/chat.json").read_bytes())
    assert OllamaDecoder().feed(body) == [
        TextDelta("The capital of France is Paris."),
        UsageDelta(
            {
                "prompt_eval_count": 31,
                "eval_count": 8,
                "total_duration": 512345678,
                "load_duration": 12345678,
                "prompt_eval_duration": 45678901,
                "eval_duration": 401234567,
            }
        ),
        FinishDelta("stop"),
    ]
