"""Deltas → items and events (DESIGN §4), one model response at a time."""

from __future__ import annotations

import re
from itertools import count
from typing import Any

from toolrelay.core import events as ev
from toolrelay.core.items import raw_items
from toolrelay.core.stream.delta_accumulator import DeltaAccumulator as Accumulator
from toolrelay.core.stream.deltas import (
    CitationDelta,
    Delta,
    ErrorDelta,
    FinishDelta,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    UsageDelta,
)
from toolrelay.core.stream.think_tags import TagConfig


def ticking() -> Any:
    ticks = count()
    return lambda: float(next(ticks))


def types(events: list[ev.Event]) -> list[str]:
    return [e.type for e in events]


def test_text_then_finish_gives_one_completed_message() -> None:
    acc = Accumulator()
    events = acc.feed_many([TextDelta("Hel"), TextDelta("lo"), FinishDelta("stop")])
    events += acc.finish()
    assert types(events) == [
        ev.OUTPUT_ITEM_ADDED,
        ev.OUTPUT_TEXT_DELTA,
        ev.OUTPUT_TEXT_DELTA,
        ev.OUTPUT_ITEM_DONE,
    ]
    (item,) = raw_items(acc.output)
    assert item["type"] == "message" and item["status"] == "completed"
    assert item["content"] == [{"type": "output_text", "text": "Hello"}]
    assert re.fullmatch(r"msg_[0-9a-f]{24}", item["id"])
    assert events[1].data == {
        "item_id": item["id"],
        "output_index": 0,
        "content_index": 0,
        "delta": "Hel",
    }
    assert events[-1].data["item"] == item
    assert acc.finish_reason == "stop"


def test_added_event_is_a_snapshot_not_a_live_reference() -> None:
    acc = Accumulator()
    events = acc.feed_many([TextDelta("a"), CitationDelta("https://x.test", "X"), TextDelta("b")])
    assert events[0].data["item"]["content"] == [{"type": "output_text", "text": ""}]


def test_reasoning_then_text_closes_reasoning_with_duration() -> None:
    acc = Accumulator(clock=ticking())
    acc.feed_many([ReasoningDelta("think "), ReasoningDelta("hard"), TextDelta("Answer")])
    acc.finish()
    reasoning, message = raw_items(acc.output)
    assert reasoning["type"] == "reasoning" and reasoning["status"] == "completed"
    assert reasoning["content"][0]["text"] == "think hard"
    assert reasoning["duration"] == 1.0
    assert message["content"][0]["text"] == "Answer"


def test_inline_think_tags_split_into_reasoning_and_message() -> None:
    acc = Accumulator(clock=ticking())
    events = acc.feed_many([TextDelta("<thi"), TextDelta("nk>plan</think>"), TextDelta("Done")])
    events += acc.finish()
    reasoning, message = raw_items(acc.output)
    assert reasoning["type"] == "reasoning" and reasoning["content"][0]["text"] == "plan"
    assert message["content"][0]["text"] == "Done"
    assert "<" not in "".join(e.data.get("delta", "") for e in events)
    assert ev.REASONING_TEXT_DELTA in types(events)


def test_tags_disabled_keeps_text_verbatim() -> None:
    acc = Accumulator(tags=None)
    acc.feed(TextDelta("<think>x</think>"))
    acc.finish()
    assert raw_items(acc.output)[0]["content"][0]["text"] == "<think>x</think>"


def test_native_reasoning_turns_off_tag_detection() -> None:
    acc = Accumulator()
    acc.feed_many([ReasoningDelta("r"), TextDelta("a <think> b")])
    acc.finish()
    assert raw_items(acc.output)[1]["content"][0]["text"] == "a <think> b"


def test_whitespace_only_text_does_not_open_a_message() -> None:
    acc = Accumulator()
    acc.feed_many([TextDelta("\n\n"), ToolCallDelta(0, "call_1", "f", "{}")])
    acc.finish()
    assert [i["type"] for i in acc.output] == ["function_call"]


def test_function_call_is_announced_when_its_name_is_known() -> None:
    acc = Accumulator()
    first = acc.feed(ToolCallDelta(0, "call_1", None, '{"ci'))
    assert first == []
    named = acc.feed(ToolCallDelta(0, None, "weather", ""))
    assert types(named) == [ev.OUTPUT_ITEM_ADDED, ev.FUNCTION_CALL_ARGUMENTS_DELTA]
    assert named[0].data["item"]["status"] == "in_progress"
    assert named[0].data["item"]["arguments"] == ""
    assert named[1].data["delta"] == '{"ci'
    more = acc.feed(ToolCallDelta(0, None, None, 'ty": "Paris"}'))
    assert more[0].data["delta"] == 'ty": "Paris"}'
    done = acc.finish()
    assert types(done) == [ev.FUNCTION_CALL_ARGUMENTS_DONE, ev.OUTPUT_ITEM_DONE]
    (call,) = raw_items(acc.output)
    assert call["arguments"] == '{"city": "Paris"}' and call["status"] == "completed"
    assert call["call_id"] == "call_1" and call["name"] == "weather"


def test_parallel_calls_keep_their_order_and_indexes() -> None:
    acc = Accumulator(offset=3)
    events = acc.feed_many(
        [
            TextDelta("Checking."),
            ToolCallDelta(0, "a", "f", '{"x":'),
            ToolCallDelta(1, "b", "g", '{"y":'),
            ToolCallDelta(0, None, None, "1}"),
            ToolCallDelta(1, None, None, "2}"),
        ]
    )
    acc.finish()
    out = raw_items(acc.output)
    assert [i["type"] for i in out] == ["message", "function_call", "function_call"]
    assert [(c["call_id"], c["arguments"]) for c in out[1:]] == [("a", '{"x":1}'), ("b", '{"y":2}')]
    added = [e.data["output_index"] for e in events if e.type == ev.OUTPUT_ITEM_ADDED]
    assert added == [3, 4, 5]


def test_concatenated_arguments_are_split_without_an_orphan() -> None:
    acc = Accumulator()
    acc.feed(ToolCallDelta(0, "orig", "search", '{"q":"A"}{"q":"B"}'))
    events = acc.finish()
    calls = acc.function_calls()
    assert [c["arguments"] for c in calls] == ['{"q":"A"}', '{"q":"B"}']
    assert "orig" not in {c["call_id"] for c in calls}
    assert len({c["call_id"] for c in calls}) == 2
    done_ids = [e.data["item"]["id"] for e in events if e.type == ev.OUTPUT_ITEM_DONE]
    assert done_ids == [c["id"] for c in calls]


def test_truncated_stream_marks_open_items_incomplete() -> None:
    acc = Accumulator()
    acc.feed_many([TextDelta("partial"), ToolCallDelta(0, "c", "f", '{"a": ')])
    acc.finish(truncated=True)
    message, call = raw_items(acc.output)
    assert message["status"] == "completed"  # closed when the call began
    assert call["status"] == "incomplete" and call["arguments"] == '{"a": '


def test_error_delta_is_reported_and_partial_output_kept() -> None:
    acc = Accumulator()
    events = acc.feed_many([TextDelta("so far"), ErrorDelta("upstream overloaded")])
    events += acc.finish()
    assert ev.Event(ev.CHAT_MESSAGE_ERROR, {"error": {"content": "upstream overloaded"}}) in events
    assert raw_items(acc.output)[0]["content"][0]["text"] == "so far"
    assert acc.output[0]["status"] == "incomplete"


def test_usage_event_is_normalised() -> None:
    acc = Accumulator()
    (event,) = acc.feed(UsageDelta({"prompt_tokens": 3, "completion_tokens": 4}))
    assert event.type == ev.CHAT_COMPLETION
    assert event.data["usage"]["input_tokens"] == 3
    assert event.data["usage"]["output_tokens"] == 4
    assert event.data["usage"]["total_tokens"] == 7


def test_citation_becomes_source_event_and_annotation() -> None:
    acc = Accumulator()
    events = acc.feed_many([TextDelta("See"), CitationDelta("https://a.test", "A")])
    acc.finish()
    assert events[-1] == ev.Event(
        ev.SOURCE,
        {
            "source": {"name": "A", "url": "https://a.test"},
            "document": ["A"],
            "metadata": [{"source": "https://a.test", "name": "A"}],
        },
    )
    part = raw_items(acc.output)[0]["content"][0]
    assert part["annotations"] == [{"type": "url_citation", "url": "https://a.test", "title": "A"}]


def test_reasoning_details_merge_by_index() -> None:
    acc = Accumulator()
    acc.feed_many(
        [
            ReasoningDelta("a", ({"type": "reasoning.text", "text": "a", "index": 0},)),
            ReasoningDelta("b", ({"type": "reasoning.text", "text": "b", "index": 0},)),
        ]
    )
    acc.finish()
    assert raw_items(acc.output)[0]["details"] == [
        {"type": "reasoning.text", "text": "ab", "index": 0}
    ]


def test_code_interpreter_block_when_enabled() -> None:
    acc = Accumulator(tags=TagConfig(code_interpreter=True))
    acc.feed_many(
        [
            TextDelta('Run:<code_interpreter lang="python">print(1)'),
            TextDelta("</code_interpreter>"),
        ]
    )
    acc.finish()
    message, code = raw_items(acc.output)
    assert message["content"][0]["text"] == "Run:"
    assert code["type"] == "code_interpreter" and code["code"] == "print(1)"
    assert code["lang"] == "python"
    assert acc.code_closed


def test_finish_is_idempotent() -> None:
    acc = Accumulator()
    acc.feed(TextDelta("x"))
    assert acc.finish() != []
    assert acc.finish() == []


def test_quiet_mode_gives_the_same_items_without_delta_events() -> None:
    deltas: list[Delta] = [
        ReasoningDelta("plan "),
        ReasoningDelta("more"),
        TextDelta("Hello "),
        TextDelta("world"),
        ToolCallDelta(0, "c1", "f", '{"a":'),
        ToolCallDelta(0, None, None, "1}"),
        FinishDelta("tool_calls"),
    ]
    loud, quiet = Accumulator(), Accumulator(quiet=True)
    loud_events = loud.feed_many(deltas) + loud.finish()
    quiet_events = quiet.feed_many(deltas) + quiet.finish()

    def strip(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in i.items() if k != "id"} for i in items]

    assert strip(raw_items(quiet.output)) == strip(raw_items(loud.output))
    delta_types = {ev.OUTPUT_TEXT_DELTA, ev.REASONING_TEXT_DELTA, ev.FUNCTION_CALL_ARGUMENTS_DELTA}
    assert any(e.type in delta_types for e in loud_events)
    assert len([e for e in quiet_events if e.type in delta_types]) <= 3  # only items' first deltas


def test_delta_events_name_their_item_and_turn_wide_index() -> None:
    """The per-chunk events the hot path builds inline, exactly (offset 2: two items
    came before in this turn)."""
    acc = Accumulator(offset=2)
    events = acc.feed_many(
        [
            ReasoningDelta("a"),
            ReasoningDelta("b"),
            TextDelta("c"),
            TextDelta("d"),
            ToolCallDelta(0, "c1", "f", ""),
            ToolCallDelta(0, None, None, '{"x":'),
            ToolCallDelta(0, None, None, "1}"),
        ]
    )
    ids = [e.data["item"]["id"] for e in events if e.type == ev.OUTPUT_ITEM_ADDED]
    deltas = [(e.type, e.data) for e in events if e.type.endswith(".delta")]
    text = {"content_index": 0}
    assert deltas == [
        (ev.REASONING_TEXT_DELTA, {"item_id": ids[0], "output_index": 2, **text, "delta": "a"}),
        (ev.REASONING_TEXT_DELTA, {"item_id": ids[0], "output_index": 2, **text, "delta": "b"}),
        (ev.OUTPUT_TEXT_DELTA, {"item_id": ids[1], "output_index": 3, **text, "delta": "c"}),
        (ev.OUTPUT_TEXT_DELTA, {"item_id": ids[1], "output_index": 3, **text, "delta": "d"}),
        (
            ev.FUNCTION_CALL_ARGUMENTS_DELTA,
            {"item_id": ids[2], "output_index": 4, "delta": '{"x":'},
        ),
        (ev.FUNCTION_CALL_ARGUMENTS_DELTA, {"item_id": ids[2], "output_index": 4, "delta": "1}"}),
    ]


def test_text_cut_anywhere_inside_an_open_message_finds_the_same_tags() -> None:
    """The text lane's shortcut (no character that can start a tag: `TagSplitter`
    marks) must not pass text while the splitter holds the start of a tag or is
    inside a block, nor miss a trigger when a config has more than two."""
    three = TagConfig(reasoning=(("<think>", "</think>"), ("[T]", "[/T]"), ("◁think▷", "◁/think▷")))
    cases = [
        (TagConfig(), "Hi there <think>plan more</think>Done, ok"),
        (three, "Hi there [T]plan more[/T]Done, ok"),
        (three, "Hi there ◁think▷plan more◁/think▷Done, ok"),
    ]

    def texts(acc: Accumulator) -> list[tuple[str, str]]:
        return [(i["type"], i["content"][0]["text"]) for i in raw_items(acc.output)]

    for tags, text in cases:
        whole = Accumulator(tags=tags)
        whole.feed_many([TextDelta(text[:3]), TextDelta(text[3:])])
        whole.finish()
        assert [kind for kind, _ in texts(whole)] == ["message", "reasoning", "message"]
        for size in (1, 2, 3, 5):
            acc = Accumulator(tags=tags)
            acc.feed_many([TextDelta(text[i : i + size]) for i in range(0, len(text), size)])
            acc.finish()
            assert texts(acc) == texts(whole), (text, size)
