"""Tool calls written as text by a model behind a Responses API server (`core.text_calls.stage`).

The same recognition as for Chat Completions bodies, on Responses events: a
message that is wholly a call becomes the `function_call` item a native call
is, and never reaches a listener as text; plain text, a native call, a made-up
tool or a response that did not complete leave the body exactly as it was read
without the feature; any cut of the bytes gives the same items.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.test_replay_fixtures import mask
from tests.patience import fuzz_budget
from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.items import raw_items
from toolrelay.core.stream.reader import BodyReader, read_body
from toolrelay.testing.wire import ToolCallSpec, render_responses_sse, responses_events

WEATHER = ("get_weather", "get_time")
CALL_TEXT = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'


def body(**kwargs: Any) -> bytes:
    return render_responses_sse(responses_events(**kwargs))


def read(
    data: bytes, tools: Sequence[str] = WEATHER, cuts: Sequence[int] = ()
) -> tuple[dict[str, Any], list[Event]]:
    reader = BodyReader("sse", text_tools=tools)
    events, start = [], 0
    for cut in sorted({*cuts, len(data)}):
        events += reader.feed(data[start:cut])
        start = cut
    events += reader.finish()
    return mask(reader.result().to_dict()), events


def kinds(result: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(i["type"], i.get("name")) for i in result["output"]]


def test_a_message_that_is_a_call_becomes_the_item_a_native_call_is() -> None:
    from_text, events = read(body(text=[CALL_TEXT[i : i + 4] for i in range(0, len(CALL_TEXT), 4)]))
    native, _ = read(body(function_calls=[ToolCallSpec("get_weather", {"city": "Paris"})]))
    assert kinds(from_text) == [("function_call", "get_weather")]
    assert from_text["output"][0]["arguments"] == '{"city":"Paris"}'
    assert from_text["output"][0]["call_id"] == "call_*"  # a fresh id, as for a native one
    assert from_text["finish_reason"] == native["finish_reason"] == "tool_calls"
    assert from_text["output"][0]["status"] == "completed"
    shown = {e.type for e in events}
    assert ev.OUTPUT_TEXT_DELTA not in shown  # the JSON never flashed as text
    added = [e.data["item"]["type"] for e in events if e.type == ev.OUTPUT_ITEM_ADDED]
    assert added == ["function_call"]


def test_reasoning_before_the_call_stays_and_a_list_makes_two_calls() -> None:
    two = '[{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "get_time", "parameters": {}}]'
    result, _ = read(body(reasoning_summary=["Two things."], text=[two[:10], two[10:]]))
    assert kinds(result) == [
        ("reasoning", None),
        ("function_call", "get_weather"),
        ("function_call", "get_time"),
    ]
    unmasked, _ = read_body(body(text=[two]), text_tools=WEATHER)
    items = raw_items(unmasked.output)
    assert len({i["id"] for i in items}) == len({i["call_id"] for i in items}) == 2


def same_as_without(data: bytes) -> dict[str, Any]:
    on, on_events = read(data)
    off, off_events = read(data, tools=())
    assert on == off
    assert [(e.type, e.data) for e in on_events] == [(e.type, e.data) for e in off_events]
    return on


def test_what_is_not_a_call_is_read_as_without_the_feature() -> None:
    plain = same_as_without(body(text=["Hello", " there"]))
    assert kinds(plain) == [("message", None)]
    made_up = same_as_without(body(text=['{"name": "say_hi", "arguments": {}}']))
    assert kinds(made_up) == [("message", None)]
    native_wins = same_as_without(
        body(
            text=['{"name": "get_time", ', '"arguments": {}}'],
            function_calls=[ToolCallSpec("get_weather", {})],
        )
    )
    assert kinds(native_wins) == [("message", None), ("function_call", "get_weather")]


def test_a_response_that_did_not_complete_makes_no_call() -> None:
    events = responses_events(text=[CALL_TEXT])
    incomplete = events[-1] | {"type": "response.incomplete"}
    incomplete["response"] = incomplete["response"] | {
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
    }
    limited = same_as_without(render_responses_sse([*events[:-1], incomplete]))
    assert kinds(limited) == [("message", None)]
    cut = render_responses_sse(events[:-1])  # the body ends before response.completed
    result, _ = read(cut)
    assert kinds(result) == [("message", None)] and result["error"] is not None
    assert raw_items(result["output"])[0]["content"][0]["text"] == CALL_TEXT


def test_a_non_streamed_response_object_too() -> None:
    final = responses_events(text=[CALL_TEXT])[-1]["response"]
    whole, _ = read_body(json.dumps(final).encode(), text_tools=WEATHER)
    assert [(i["type"], i.get("name")) for i in whole.output] == [("function_call", "get_weather")]
    assert whole.finish_reason == "tool_calls"


@settings(
    max_examples=fuzz_budget(100), suppress_health_check=[HealthCheck.too_slow], deadline=None
)
@given(
    st.lists(
        st.sampled_from(
            [CALL_TEXT, "Sure. ", '{"name": "get_time", "arguments": {}}', "\n", "```"]
        ),
        min_size=1,
        max_size=3,
    ),
    st.data(),
)
def test_any_cut_gives_the_same_items(parts: list[str], data: st.DataObject) -> None:
    content = "".join(parts)
    at = sorted(data.draw(st.sets(st.integers(min_value=1, max_value=len(content)), max_size=10)))
    pieces = [content[a:b] for a, b in zip([0, *at], [*at, len(content)], strict=True) if a < b]
    whole = read(body(text=[content]))[0]
    streamed = body(text=pieces)
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(streamed)), max_size=15))
    cut, events = read(streamed, cuts=cuts)
    assert cut == whole
    shown = "".join(e.data["delta"] for e in events if e.type == ev.OUTPUT_TEXT_DELTA)
    text = "".join(p["text"] for i in cut["output"] if i["type"] == "message" for p in i["content"])
    assert shown == text
