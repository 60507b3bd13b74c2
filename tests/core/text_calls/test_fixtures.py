"""Tool calls written as text, through the whole core: recorded bodies and generated ones.

The recorded bodies are the real embedded model's (tests/fixtures/text_tool_calls,
whose README says how each expectation was checked by hand). Each is replayed
through `BodyReader` with the tools its request offered, whole and cut at random
bytes. The generated bodies check the accumulator's own invariants: the call's
JSON never reaches the client as text, a native call wins, a cut or limited
response makes no calls, and a recognised call is the same item a native one is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.test_replay_fixtures import mask
from tests.patience import fuzz_budget
from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.formats.content import detect_format
from toolrelay.core.items import raw_items
from toolrelay.core.stream.reader import BodyReader, read_body
from toolrelay.testing.wire import (
    ToolCallSpec,
    chat_chunks,
    chat_completion,
    render_responses_sse,
    render_sse,
    responses_events,
)

FIXTURES = Path(__file__).parents[2] / "fixtures" / "text_tool_calls"
WEATHER = ("get_weather", "get_time")

PLAIN_CPU = (
    "A CPU is a central processing unit that performs calculations and processes data. "
    "It is responsible for executing instructions and managing the flow of control in a "
    "computer system."
)
CASES: dict[str, tuple[list[tuple[str, str]], str, str]] = {
    # case: (calls as (name, arguments), visible text, finish reason) — checked by hand
    "qwen-fenced-call.sse": ([("get_weather", '{"city":"Paris"}')], "", "tool_calls"),
    "qwen-fenced-call.json": ([("get_weather", '{"city":"Paris"}')], "", "tool_calls"),
    "qwen-fenced-call-list.sse": (
        [("get_weather", '{"city":"Paris"}'), ("get_weather", '{"city":"London"}')],
        "",
        "tool_calls",
    ),
    "qwen-bare-call.sse": ([("get_weather", '{"city":"Paris"}')], "", "tool_calls"),
    "qwen-made-up-tool.sse": (
        [],
        '{"name": "say_hello", "arguments": {"message": "Hello, world!"}}',
        "stop",
    ),
    "qwen-made-up-tool.json": ([], '{"name": "cat joke", "arguments": {"cat": "Meow"}}', "stop"),
    "qwen-fenced-json-data.sse": ([], '```json\n{\n  "name": "Ann",\n  "age": 30\n}\n```', "stop"),
    "qwen-cut-by-length.json": ([], "", "length"),  # text: checked against the body below
    "qwen-plain.sse": ([], PLAIN_CPU, "stop"),
    "qwen-hello.sse": ([], "Hello!", "stop"),
}


def offered(case: str) -> list[str]:
    request = json.loads((FIXTURES / f"{case}.request.json").read_text())
    return [t["function"]["name"] for t in request.get("tools", [])] or list(WEATHER)


def replay(
    body: bytes, tools: Sequence[str], cuts: Sequence[int] = ()
) -> tuple[dict[str, Any], list[Event]]:
    reader = BodyReader(detect_format(body), text_tools=tools)
    events, start = [], 0
    for cut in sorted({*cuts, len(body)}):
        events += reader.feed(body[start:cut])
        start = cut
    events += reader.finish()
    return mask(reader.result().to_dict()), events


def summary(result: dict[str, Any]) -> tuple[list[tuple[str, str]], str, str]:
    calls = [(i["name"], i["arguments"]) for i in result["output"] if i["type"] == "function_call"]
    text = "".join(
        part["text"] for i in result["output"] if i["type"] == "message" for part in i["content"]
    )
    return calls, text, result["finish_reason"]


def test_every_recorded_body_has_a_hand_written_expectation() -> None:
    bodies = {p.name for p in FIXTURES.iterdir() if not p.name.endswith((".md", ".request.json"))}
    assert bodies == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_recorded_body(case: str) -> None:
    body = (FIXTURES / case).read_bytes()
    result, events = replay(body, offered(case))
    calls, text, finish = CASES[case]
    if case == "qwen-cut-by-length.json":
        text = json.loads(body)["choices"][0]["message"]["content"]
        assert text.endswith('{"name": "get_time') and text.count("\n") == 11
    assert summary(result) == (calls, text, finish)
    if calls:  # what a client saw: the calls, never their JSON as text
        assert not [e for e in events if e.type == ev.OUTPUT_TEXT_DELTA]
        assert all(i["status"] == "completed" for i in result["output"])
        assert [i["call_id"] for i in result["output"]] == ["call_*"] * len(calls)


def test_recorded_calls_are_text_when_the_feature_is_off() -> None:
    body = (FIXTURES / "qwen-fenced-call.sse").read_bytes()
    result, _ = replay(body, [])
    assert summary(result)[0] == [] and summary(result)[1].startswith("```json")


@settings(
    max_examples=fuzz_budget(120), suppress_health_check=[HealthCheck.too_slow], deadline=None
)
@given(st.data())
def test_any_cut_of_a_recorded_body_gives_the_same_items(data: st.DataObject) -> None:
    case = data.draw(st.sampled_from(sorted(CASES)))
    body = (FIXTURES / case).read_bytes()
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(body)), max_size=25))
    assert replay(body, offered(case), cuts)[0] == replay(body, offered(case))[0]


# ---------------------------------------------------------------- the accumulator's rules

CALL_TEXT = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'


def sse(**kwargs: Any) -> bytes:
    return render_sse(chat_chunks(**kwargs))


def test_a_recognised_call_is_the_item_a_native_one_is() -> None:
    from_text, _ = read_body(sse(text=list(CALL_TEXT)), text_tools=WEATHER)
    native, _ = read_body(
        sse(tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})]), text_tools=WEATHER
    )
    assert mask(from_text.to_dict()) == mask(native.to_dict())
    assert raw_items(from_text.output)[0]["call_id"] != raw_items(native.output)[0]["call_id"]


def test_a_native_call_wins_and_the_held_text_is_kept() -> None:
    body = sse(text=['{"name": "get_', "time"], tool_calls=[ToolCallSpec("get_weather", {})])
    result, _ = read_body(body, text_tools=WEATHER)
    assert [i["type"] for i in result.output] == ["message", "function_call"]
    assert raw_items(result.output)[0]["content"][0]["text"] == '{"name": "get_time'
    assert raw_items(result.output)[1]["name"] == "get_weather"


def test_a_cut_body_makes_no_call_and_loses_no_text() -> None:
    body = sse(text=[CALL_TEXT]).split(b'"finish_reason":"stop"')[0]
    body = body[: body.rfind(b"\n\n") + 2]  # the text chunks, then the body ends
    result, _ = read_body(body, text_tools=WEATHER)
    assert result.error is not None and result.finish_reason == "error"
    assert [i["type"] for i in result.output] == ["message"]
    assert raw_items(result.output)[0]["content"][0]["text"] == CALL_TEXT


def test_a_call_stopped_by_the_token_limit_stays_text() -> None:
    result, _ = read_body(sse(text=[CALL_TEXT], finish_reason="length"), text_tools=WEATHER)
    assert [i["type"] for i in result.output] == ["message"] and result.finish_reason == "length"


def test_non_streaming_and_ollama_bodies_too() -> None:
    whole = json.dumps(chat_completion(text=CALL_TEXT)).encode()
    result, _ = read_body(whole, text_tools=WEATHER)
    assert [(i["type"], i.get("name")) for i in result.output] == [("function_call", "get_weather")]
    lines = b"".join(
        json.dumps(line).encode() + b"\n"
        for line in [
            {"message": {"role": "assistant", "content": piece}, "done": False}
            for piece in (CALL_TEXT[:9], CALL_TEXT[9:])
        ]
        + [{"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"}]
    )
    result, _ = read_body(lines, "ndjson", text_tools=WEATHER)
    assert [(i["type"], i.get("name")) for i in result.output] == [("function_call", "get_weather")]
    assert result.finish_reason == "tool_calls"


def test_reasoning_before_the_call_stays_reasoning() -> None:
    text = ["<think>", "The user wants Paris.", "</think>", "\n\n", CALL_TEXT]
    result, events = read_body(sse(text=text), text_tools=WEATHER)
    assert [i["type"] for i in result.output] == ["reasoning", "function_call"]
    assert raw_items(result.output)[0]["content"][0]["text"] == "The user wants Paris."
    assert not [e for e in events if e.type == ev.OUTPUT_TEXT_DELTA]


@settings(
    max_examples=fuzz_budget(120), suppress_health_check=[HealthCheck.too_slow], deadline=None
)
@given(
    st.lists(
        st.sampled_from(
            [CALL_TEXT, "Sure. ", '{"name": "get_time", "arguments": {}}', "\n", "```", "x"]
        ),
        min_size=1,
        max_size=4,
    ),
    st.data(),
)
def test_any_cut_of_a_generated_body_gives_the_same_items(
    parts: list[str], data: st.DataObject
) -> None:
    content = "".join(parts)
    at = sorted(data.draw(st.sets(st.integers(min_value=1, max_value=len(content)), max_size=20)))
    pieces = [content[a:b] for a, b in zip([0, *at], [*at, len(content)], strict=True)]
    whole = replay(sse(text=[content]), WEATHER)[0]
    cut, events = replay(sse(text=[p for p in pieces if p]), WEATHER)
    assert cut == whole
    shown = "".join(e.data["delta"] for e in events if e.type == ev.OUTPUT_TEXT_DELTA)
    assert shown == summary(cut)[1]  # nothing was shown that the items do not keep
    calls = [i for i in whole["output"] if i["type"] == "function_call"]
    assert calls or summary(whole)[1] == (content if content.strip() else "")


def test_held_content_counts_as_said_when_responses_events_follow() -> None:
    """A body that starts as Chat Completions and switches to Responses events is read as
    Chat Completions (core.stream.reader), also while its content is held: nothing is dropped."""
    head = render_sse(chat_chunks(text=['{"name": "get_'])[:-1], done=False)
    body = head + render_responses_sse(responses_events(text=["hi"]))
    on, _ = read_body(body, "sse", text_tools=WEATHER)
    off, _ = read_body(body, "sse")
    assert mask(on.to_dict()) == mask(off.to_dict())
    assert summary(mask(on.to_dict()))[1] == '{"name": "get_'
