"""The text-call stage stands in front of an accumulator, not under it (issue 27 item 1).

A translator feeds the stage as it would feed the accumulator; the accumulator is the
plain one of its input mode, and once the content is known to be text the stage's
entry points are the accumulator's own (no cost per chunk after the first).
"""

from __future__ import annotations

import inspect

import orjson

import toolrelay.core.text_calls as text_calls
from toolrelay.core.events import Event
from toolrelay.core.formats.chat_completions.parse import ChatCompletionsDecoder
from toolrelay.core.items import raw_items
from toolrelay.core.stream.accumulator import Accumulator
from toolrelay.core.stream.delta_accumulator import DeltaAccumulator
from toolrelay.core.stream.event_accumulator import EventAccumulator
from toolrelay.core.stream.reader import BodyReader
from toolrelay.core.text_calls import parse, recogniser, replay, stage
from toolrelay.core.text_calls.stage import TextCallDeltas, TextCallEvents
from toolrelay.testing.wire import chat_chunks, render_responses_sse, render_sse, responses_events

CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


def test_a_translator_feeds_the_stage_as_it_would_the_accumulator() -> None:
    acc = DeltaAccumulator()
    calls = TextCallDeltas(["get_weather"], acc)
    decoder, out = ChatCompletionsDecoder(), list[Event]()
    pieces = [CALL[i : i + 3] for i in range(0, len(CALL), 3)]
    for chunk in chat_chunks(text=pieces, finish_reason="stop"):
        decoder.feed_into(chunk, calls, out)
    out += calls.finish()
    out += acc.finish()
    (item,) = raw_items(acc.output)
    assert (item["type"], item["name"], item["arguments"]) == (
        "function_call",
        "get_weather",
        '{"city":"Paris"}',
    )
    assert acc.finish_reason == "tool_calls"


def test_once_the_content_is_text_the_stage_hands_on_the_accumulators_own_methods() -> None:
    acc = DeltaAccumulator()
    calls = TextCallDeltas(["get_weather"], acc)
    out: list[Event] = []
    assert calls.text != acc.text  # held while it may be a call
    calls.text("Hello", out)
    assert (calls.text, calls.arguments, calls.feed_into) == (
        acc.text,
        acc.arguments,
        acc.feed_into,
    )
    events = EventAccumulator()
    held = TextCallEvents(["get_weather"], events)
    for event in responses_events(text="Hello"):
        held.feed_event(orjson.loads(orjson.dumps(event)), owned=True)
    assert held.feed_event_into == events.feed_event_into


def test_the_reader_reads_with_the_plain_accumulator_of_each_mode() -> None:
    chat = render_sse(chat_chunks(text=CALL, finish_reason="stop"))
    responses = render_responses_sse(responses_events(text=CALL))
    for body, expected in ((chat, DeltaAccumulator), (responses, EventAccumulator)):
        reader = BodyReader("sse", text_tools=["get_weather"])
        reader.feed(body)
        reader.finish()
        assert type(reader.acc) is expected
        assert [i["type"] for i in raw_items(reader.result().output)] == ["function_call"]


def test_no_text_call_class_is_an_accumulator() -> None:
    modules = (text_calls, parse, recogniser, replay, stage)
    classes = [
        c
        for m in modules
        for _, c in inspect.getmembers(m, inspect.isclass)
        if c.__module__ == m.__name__
    ]
    assert {"TextCallDeltas", "TextCallEvents"} <= {c.__name__ for c in classes}
    assert [c.__name__ for c in classes if issubclass(c, Accumulator)] == []
