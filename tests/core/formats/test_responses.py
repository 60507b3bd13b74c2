"""The Responses API reducer (SPEC R4): exact outputs per event, recorded streams, purity."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.patience import fuzz_budget
from toolrelay.core.formats.responses.parse import (
    EVENT_TYPES,
    ReduceMeta,
    reduce_event,
    response_object_to_output,
)
from toolrelay.core.items import Item, as_items

FIXTURES = Path(__file__).parents[2] / "fixtures" / "streams" / "openai-responses"


def sse_events(name: str) -> list[dict[str, Any]]:
    """Tiny local SSE reader: blank-line separated blocks, their `data:` lines as JSON."""
    body = (FIXTURES / name).read_text(encoding="utf-8")
    events = []
    for block in body.split("\n\n"):
        data = [line[5:].lstrip(" ") for line in block.splitlines() if line.startswith("data:")]
        if data:
            events.append(orjson.loads("\n".join(data)))
    return events


def reduce_all(
    events: Sequence[dict[str, Any]], output: Sequence[Mapping[str, Any]] = ()
) -> tuple[list[Item], list[ReduceMeta]]:
    out = as_items(list(output))  # any dicts: the reducer reads them defensively
    metas = []
    for event in events:
        out, meta = reduce_event(event, out)
        if meta is not None:
            metas.append(meta)
    return out, metas


def msg(text: str = "Hi", *, id: str = "msg_1", status: str = "in_progress") -> Item:
    return {
        "type": "message",
        "id": id,
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text}],
    }


def rs(
    *, id: str = "rs_1", summary: list[Any] | None = None, content: list[Any] | None = None
) -> Item:
    return {
        "type": "reasoning",
        "id": id,
        "status": "in_progress",
        "summary": summary or [],
        "content": content or [],
    }


def fc(
    args: str = "", *, id: str = "fc_1", call_id: str = "call_1", status: str = "in_progress"
) -> Item:
    return {
        "type": "function_call",
        "id": id,
        "call_id": call_id,
        "name": "get_weather",
        "arguments": args,
        "status": status,
    }


def ev(type_: str, **fields: Any) -> dict[str, Any]:
    return {"type": type_, "sequence_number": 7, **fields}


# --- lifecycle --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["response.created", "response.in_progress", "response.queued"])
def test_start_events_report_the_response_id_only(kind: str) -> None:
    output = [msg()]
    out, meta = reduce_event(ev(kind, response={"id": "resp_1", "output": [fc()]}), output)
    assert out == [msg()]
    assert meta == ReduceMeta(response_id="resp_1")


def test_start_event_without_id_reports_nothing() -> None:
    assert reduce_event(ev("response.created", response={}), []) == ([], None)


def test_unknown_event_type_changes_nothing() -> None:
    output = [msg()]
    out, meta = reduce_event(ev("response.web_search_call.searching", item_id="ws_1"), output)
    assert out == [msg()]
    assert out is not output
    assert meta is None


# --- output_item.added / done -----------------------------------------------------


def test_item_added_appends_at_the_end() -> None:
    out, meta = reduce_event(ev("response.output_item.added", output_index=1, item=fc()), [msg()])
    assert out == [msg(), fc()]
    assert meta is None


def test_item_added_inserts_at_output_index() -> None:
    out, _ = reduce_event(ev("response.output_item.added", output_index=0, item=fc()), [msg()])
    assert out == [fc(), msg()]


def test_item_added_replaces_same_id() -> None:
    out, _ = reduce_event(
        ev("response.output_item.added", output_index=5, item=msg("new")), [msg("old"), fc()]
    )
    assert out == [msg("new"), fc()]


def test_item_added_replaces_same_call_under_another_id() -> None:
    out, _ = reduce_event(
        ev("response.output_item.added", output_index=1, item=fc("{}", id="fc_other")),
        [msg(), fc()],
    )
    assert out == [msg(), fc("{}", id="fc_other")]


def test_item_added_keeps_unknown_item_types_as_they_came() -> None:
    item = {"type": "web_search_call", "id": "ws_1", "status": "in_progress", "action": {"q": "x"}}
    out, _ = reduce_event(ev("response.output_item.added", output_index=1, item=item), [msg()])
    assert out == [msg(), item]


def test_item_done_replaces_at_output_index() -> None:
    done = msg("Hello", status="completed")
    out, meta = reduce_event(ev("response.output_item.done", output_index=0, item=done), [msg()])
    assert out == [done]
    assert meta is None


def test_item_done_follows_the_id_when_the_index_disagrees() -> None:
    done = fc('{"a":1}', status="completed")
    out, _ = reduce_event(ev("response.output_item.done", output_index=0, item=done), [msg(), fc()])
    assert out == [msg(), done]


def test_item_done_with_a_changed_id_replaces_the_same_type_at_the_index() -> None:
    done = msg("Hi", id="msg_renamed", status="completed")
    out, _ = reduce_event(ev("response.output_item.done", output_index=0, item=done), [msg()])
    assert out == [done]


def test_item_done_appends_when_nothing_matches() -> None:
    done = fc("{}", status="completed")
    out, _ = reduce_event(ev("response.output_item.done", output_index=0, item=done), [msg()])
    assert out == [msg(), done]


def test_item_done_past_the_end_appends_even_an_untyped_item() -> None:
    out, _ = reduce_event(ev("response.output_item.done", output_index=3, item={}), [msg()])
    assert out == [msg(), {}]


def test_item_done_without_index_or_match_appends() -> None:
    done = msg("x", id="msg_9", status="completed")
    out, _ = reduce_event(ev("response.output_item.done", item=done), [msg()])
    assert out == [msg(), done]


# --- content parts and text --------------------------------------------------------


def test_content_part_added_appends_the_part() -> None:
    empty = {**msg(), "content": []}
    part = {"type": "output_text", "annotations": [], "text": ""}
    out, meta = reduce_event(
        ev(
            "response.content_part.added",
            item_id="msg_1",
            output_index=0,
            content_index=0,
            part=part,
        ),
        [empty],
    )
    assert out == [{**msg(), "content": [part]}]
    assert meta is None


def test_content_part_done_replaces_the_part() -> None:
    part = {"type": "output_text", "annotations": [], "text": "Hi there"}
    out, _ = reduce_event(
        ev(
            "response.content_part.done",
            item_id="msg_1",
            output_index=0,
            content_index=0,
            part=part,
        ),
        [msg()],
    )
    assert out == [{**msg(), "content": [part]}]


def test_content_part_with_reasoning_text_goes_to_the_reasoning_item() -> None:
    part = {"type": "reasoning_text", "text": ""}
    out, _ = reduce_event(
        ev(
            "response.content_part.added",
            item_id="rs_1",
            output_index=0,
            content_index=0,
            part=part,
        ),
        [rs()],
    )
    assert out == [rs(content=[part])]


def test_output_text_delta_appends() -> None:
    out, meta = reduce_event(
        ev(
            "response.output_text.delta",
            item_id="msg_1",
            output_index=0,
            content_index=0,
            delta=" there",
        ),
        [msg()],
    )
    assert out == [msg("Hi there")]
    assert meta is None


def test_output_text_delta_creates_a_missing_part_padding_before_it() -> None:
    empty = {**msg(), "content": []}
    out, _ = reduce_event(
        ev(
            "response.output_text.delta",
            item_id="msg_1",
            output_index=0,
            content_index=1,
            delta="b",
        ),
        [empty],
    )
    assert out == [
        {
            **msg(),
            "content": [{"type": "output_text", "text": ""}, {"type": "output_text", "text": "b"}],
        }
    ]


def test_output_text_done_sets_the_final_text() -> None:
    out, meta = reduce_event(
        ev(
            "response.output_text.done",
            item_id="msg_1",
            output_index=0,
            content_index=0,
            text="Hello!",
        ),
        [msg("Hell")],
    )
    assert out == [msg("Hello!")]
    assert meta is None


def test_annotation_added_appends_then_replaces_by_index() -> None:
    first = {"type": "url_citation", "url": "https://a.example", "title": "A"}
    second = {"type": "url_citation", "url": "https://b.example", "title": "B"}
    base = ev("response.output_text.annotation.added", item_id="msg_1", output_index=0)
    out, _ = reduce_all(
        [
            {**base, "content_index": 0, "annotation_index": 0, "annotation": first},
            {**base, "content_index": 0, "annotation_index": 0, "annotation": second},
            {**base, "content_index": 0, "annotation_index": 1, "annotation": first},
        ],
        [msg()],
    )
    assert out == [
        {
            **msg(),
            "content": [{"type": "output_text", "text": "Hi", "annotations": [second, first]}],
        }
    ]


def test_refusal_is_kept_in_a_refusal_part() -> None:
    empty = {**msg(), "content": []}
    base = ev("response.refusal.delta", item_id="msg_1", output_index=0, content_index=0)
    out, _ = reduce_all(
        [
            {**base, "delta": "I can't"},
            {**base, "delta": " help"},
        ],
        [empty],
    )
    assert out == [{**msg(), "content": [{"type": "refusal", "refusal": "I can't help"}]}]
    out, _ = reduce_event(
        ev(
            "response.refusal.done",
            item_id="msg_1",
            output_index=0,
            content_index=0,
            refusal="I can't help with that.",
        ),
        out,
    )
    assert out == [
        {**msg(), "content": [{"type": "refusal", "refusal": "I can't help with that."}]}
    ]


# --- function call arguments ------------------------------------------------------


def test_arguments_deltas_append_and_done_sets_the_whole_string() -> None:
    base = ev("response.function_call_arguments.delta", item_id="fc_1", output_index=1)
    out, metas = reduce_all(
        [{**base, "delta": '{"city"'}, {**base, "delta": ':"Par'}], [msg(), fc()]
    )
    assert out == [msg(), fc('{"city":"Par')]
    assert metas == []
    out, meta = reduce_event(
        ev(
            "response.function_call_arguments.done",
            item_id="fc_1",
            output_index=1,
            arguments='{"city":"Paris"}',
        ),
        out,
    )
    assert out == [msg(), fc('{"city":"Paris"}')]
    assert meta is None


def test_arguments_done_without_any_delta() -> None:
    out, _ = reduce_event(
        ev(
            "response.function_call_arguments.done",
            item_id="fc_1",
            output_index=0,
            arguments='{"x":1}',
        ),
        [fc()],
    )
    assert out == [fc('{"x":1}')]


def test_arguments_done_names_an_unnamed_call() -> None:
    unnamed = {**fc(), "name": ""}
    out, _ = reduce_event(
        ev(
            "response.function_call_arguments.done",
            item_id="fc_1",
            output_index=0,
            name="lookup",
            arguments="{}",
        ),
        [unnamed],
    )
    assert out == [{**fc("{}"), "name": "lookup"}]


# --- reasoning --------------------------------------------------------------------


def test_reasoning_summary_parts_and_text() -> None:
    where = {"item_id": "rs_1", "output_index": 0}
    empty_part = {"type": "summary_text", "text": ""}
    out, metas = reduce_all(
        [
            ev("response.reasoning_summary_part.added", **where, summary_index=0, part=empty_part),
            ev("response.reasoning_summary_text.delta", **where, summary_index=0, delta="**Plan**"),
            ev("response.reasoning_summary_part.added", **where, summary_index=1, part=empty_part),
            ev("response.reasoning_summary_text.delta", **where, summary_index=1, delta="Sum"),
            ev("response.reasoning_summary_text.delta", **where, summary_index=1, delta=" it"),
        ],
        [rs()],
    )
    assert out == [
        rs(
            summary=[
                {"type": "summary_text", "text": "**Plan**"},
                {"type": "summary_text", "text": "Sum it"},
            ]
        )
    ]
    assert metas == []
    out, _ = reduce_all(
        [
            ev("response.reasoning_summary_text.done", **where, summary_index=1, text="Sum it up"),
            ev(
                "response.reasoning_summary_part.done",
                **where,
                summary_index=0,
                part={"type": "summary_text", "text": "**Plan!**"},
            ),
        ],
        out,
    )
    assert out == [
        rs(
            summary=[
                {"type": "summary_text", "text": "**Plan!**"},
                {"type": "summary_text", "text": "Sum it up"},
            ]
        )
    ]


def test_reasoning_text_delta_and_done() -> None:
    where = {"item_id": "rs_1", "output_index": 0, "content_index": 0}
    out, _ = reduce_all(
        [
            ev("response.reasoning_text.delta", **where, delta="Let me"),
            ev("response.reasoning_text.delta", **where, delta=" think"),
        ],
        [rs()],
    )
    assert out == [rs(content=[{"type": "reasoning_text", "text": "Let me think"}])]
    out, _ = reduce_event(ev("response.reasoning_text.done", **where, text="Let me think."), out)
    assert out == [rs(content=[{"type": "reasoning_text", "text": "Let me think."}])]


# --- locating the target item -------------------------------------------------------


def test_valid_index_wins_over_a_changed_item_id() -> None:
    out, _ = reduce_event(
        ev(
            "response.output_text.delta",
            item_id="msg_other",
            output_index=1,
            content_index=0,
            delta="!",
        ),
        [fc(), msg()],
    )
    assert out == [fc(), msg("Hi!")]


def test_id_match_when_the_index_is_past_the_end() -> None:
    out, _ = reduce_event(
        ev("response.function_call_arguments.delta", item_id="fc_1", output_index=9, delta="{"),
        [msg(), fc()],
    )
    assert out == [msg(), fc("{")]


def test_id_match_when_the_index_holds_another_type() -> None:
    out, _ = reduce_event(
        ev("response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta="{"),
        [msg(), fc()],
    )
    assert out == [msg(), fc("{")]


def test_index_holding_another_type_without_id_match_is_ignored() -> None:
    out, meta = reduce_event(
        ev("response.function_call_arguments.delta", item_id="fc_x", output_index=0, delta="{"),
        [msg()],
    )
    assert out == [msg()]
    assert meta is None


def test_delta_without_index_or_id_goes_to_the_last_item_of_its_type() -> None:
    out, _ = reduce_all(
        [
            ev("response.output_text.delta", delta="!"),
            ev("response.function_call_arguments.delta", delta="{"),
            ev("response.function_call_arguments.delta", delta="}"),
        ],
        [fc(id="fc_0", call_id="call_0"), msg()],
    )
    assert out == [
        fc(id="fc_0", call_id="call_0"),
        msg("Hi!"),
        {
            "type": "function_call",
            "id": "",
            "call_id": "",
            "name": "",
            "arguments": "{}",
            "status": "in_progress",
        },
    ]


def test_delta_past_the_end_creates_a_message() -> None:
    out, _ = reduce_event(
        ev(
            "response.output_text.delta",
            item_id="msg_new",
            output_index=1,
            content_index=0,
            delta="Yo",
        ),
        [fc()],
    )
    assert out == [fc(), msg("Yo", id="msg_new")]


def test_delta_past_the_end_creates_a_reasoning_item() -> None:
    out, _ = reduce_event(
        ev(
            "response.reasoning_summary_text.delta",
            item_id="rs_new",
            output_index=0,
            summary_index=0,
            delta="Hmm",
        ),
        [],
    )
    assert out == [rs(id="rs_new", summary=[{"type": "summary_text", "text": "Hmm"}])]


def test_delta_past_the_end_creates_a_function_call() -> None:
    out, _ = reduce_event(
        ev("response.function_call_arguments.delta", item_id="fc_new", output_index=0, delta='{"'),
        [],
    )
    assert out == [
        {
            "type": "function_call",
            "id": "fc_new",
            "call_id": "",
            "name": "",
            "arguments": '{"',
            "status": "in_progress",
        }
    ]


def test_deltas_leave_unknown_item_types_alone() -> None:
    ws = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    out, _ = reduce_event(
        ev(
            "response.output_text.delta", item_id="ws_1", output_index=0, content_index=0, delta="x"
        ),
        [ws],
    )
    assert out == [ws]


# --- end of response -----------------------------------------------------------------

USAGE = {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}


def test_completed_takes_the_response_output() -> None:
    final = [msg("Done", status="completed")]
    out, meta = reduce_event(
        ev(
            "response.completed",
            response={"id": "resp_1", "status": "completed", "output": final, "usage": USAGE},
        ),
        [msg("Do")],
    )
    assert out == final
    assert meta == ReduceMeta(usage=USAGE, done=True, status="completed", response_id="resp_1")


def test_completed_with_empty_output_settles_the_streamed_items() -> None:
    done_call = fc("{}", id="fc_2", call_id="call_2", status="completed")
    output = [msg(), fc("{}"), done_call, {"type": "reasoning", "id": "rs_1", "summary": []}]
    out, meta = reduce_event(
        ev("response.completed", response={"id": "resp_1", "output": [], "usage": USAGE}), output
    )
    assert out == [
        msg(status="completed"),
        fc("{}", status="completed"),
        done_call,
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ]
    assert out[2] is done_call
    assert meta == ReduceMeta(usage=USAGE, done=True, status="completed", response_id="resp_1")


def test_incomplete_reports_the_reason_and_marks_open_items_incomplete() -> None:
    out, meta = reduce_event(
        ev(
            "response.incomplete",
            response={
                "id": "resp_2",
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "output": [],
                "usage": USAGE,
            },
        ),
        [msg("Once upon")],
    )
    assert out == [msg("Once upon", status="incomplete")]
    assert meta == ReduceMeta(
        usage=USAGE,
        done=True,
        status="incomplete",
        response_id="resp_2",
        incomplete_reason="max_output_tokens",
    )


def test_failed_reports_the_error_message() -> None:
    error = {"code": "server_error", "message": "Something broke."}
    out, meta = reduce_event(
        ev("response.failed", response={"id": "resp_3", "status": "failed", "error": error}),
        [msg("Par")],
    )
    assert out == [msg("Par", status="incomplete")]
    assert meta == ReduceMeta(
        error="Something broke.", error_data=error, done=True, status="failed", response_id="resp_3"
    )


def test_failed_without_error_details_still_has_a_message() -> None:
    _, meta = reduce_event(ev("response.failed", response={"id": "resp_3"}), [])
    assert meta == ReduceMeta(
        error="response failed", done=True, status="failed", response_id="resp_3"
    )


def test_error_event_reports_the_message() -> None:
    event = ev("error", code="rate_limit_exceeded", message="Slow down.", param=None)
    out, meta = reduce_event(event, [msg()])
    assert out == [msg()]
    assert meta == ReduceMeta(
        error="Slow down.",
        error_data={"code": "rate_limit_exceeded", "message": "Slow down.", "param": None},
    )


def test_error_event_with_a_nested_error_object() -> None:
    _, meta = reduce_event({"type": "error", "error": {"message": "Bad key", "code": "401"}}, [])
    assert meta == ReduceMeta(
        error="Bad key", error_data={"error": {"message": "Bad key", "code": "401"}}
    )


# --- malformed events ------------------------------------------------------------------

MALFORMED = [
    {},
    {"type": 5},
    {"type": "response.output_text.delta", "output_index": 0, "delta": 5},
    {"type": "response.output_text.delta", "output_index": 0, "content_index": -1, "delta": "x"},
    {"type": "response.output_text.delta", "output_index": 0, "content_index": 10**9, "delta": "x"},
    {"type": "response.output_text.delta", "output_index": -1, "delta": "x"},
    {"type": "response.output_text.done", "output_index": 0},
    {"type": "response.function_call_arguments.done", "output_index": 1, "arguments": None},
    {"type": "response.output_item.added", "output_index": 0, "item": "nope"},
    {"type": "response.output_item.done", "item": None},
    {"type": "response.content_part.added", "output_index": 0, "part": []},
    {"type": "response.output_text.annotation.added", "output_index": 0, "annotation": "x"},
    {"type": "response.reasoning_summary_text.delta", "output_index": True, "delta": "x"},
]


@pytest.mark.parametrize("event", MALFORMED)
def test_malformed_events_leave_the_output_unchanged(event: dict[str, Any]) -> None:
    output = [msg(), fc()]
    assert reduce_event(event, output) == ([msg(), fc()], None)


def test_a_part_that_is_not_a_dict_is_left_alone() -> None:
    odd = {**msg(), "content": ["raw"]}
    out, _ = reduce_event(
        ev("response.output_text.delta", output_index=0, content_index=0, delta="x"), [odd]
    )
    assert out == [odd]


# --- purity ----------------------------------------------------------------------------

PURITY_CASES: list[tuple[dict[str, Any], list[Item]]] = [
    (ev("response.created", response={"id": "r"}), [msg()]),
    (ev("response.output_item.added", output_index=1, item=fc()), [msg(), rs()]),
    (ev("response.output_item.done", output_index=0, item=msg("x", status="completed")), [msg()]),
    (
        ev(
            "response.content_part.added",
            output_index=1,
            content_index=1,
            part={"type": "output_text"},
        ),
        [rs(), msg(), fc()],
    ),
    (
        ev(
            "response.content_part.done",
            output_index=1,
            content_index=0,
            part={"type": "output_text"},
        ),
        [rs(), msg(), fc()],
    ),
    (
        ev("response.output_text.delta", output_index=1, content_index=0, delta="!"),
        [rs(), msg(), fc()],
    ),
    (
        ev("response.output_text.done", output_index=1, content_index=0, text="!"),
        [rs(), msg(), fc()],
    ),
    (
        ev(
            "response.output_text.annotation.added",
            output_index=1,
            content_index=0,
            annotation={"type": "url_citation", "url": "u"},
        ),
        [rs(), msg(), fc()],
    ),
    (
        ev("response.refusal.delta", output_index=1, content_index=1, delta="no"),
        [rs(), msg(), fc()],
    ),
    (
        ev("response.refusal.done", output_index=1, content_index=0, refusal="no"),
        [rs(), msg(), fc()],
    ),
    (ev("response.function_call_arguments.delta", output_index=2, delta="{"), [rs(), msg(), fc()]),
    (
        ev("response.function_call_arguments.done", output_index=2, arguments="{}"),
        [rs(), msg(), fc()],
    ),
    (
        ev(
            "response.reasoning_summary_part.added",
            output_index=0,
            summary_index=0,
            part={"type": "summary_text", "text": ""},
        ),
        [rs(summary=[{"type": "summary_text", "text": "a"}]), msg(), fc()],
    ),
    (
        ev(
            "response.reasoning_summary_part.done",
            output_index=0,
            summary_index=0,
            part={"type": "summary_text", "text": "b"},
        ),
        [rs(summary=[{"type": "summary_text", "text": "a"}]), msg(), fc()],
    ),
    (
        ev("response.reasoning_summary_text.delta", output_index=0, summary_index=0, delta="b"),
        [rs(summary=[{"type": "summary_text", "text": "a"}]), msg(), fc()],
    ),
    (
        ev("response.reasoning_summary_text.done", output_index=0, summary_index=0, text="ab"),
        [rs(summary=[{"type": "summary_text", "text": "a"}]), msg(), fc()],
    ),
    (
        ev("response.reasoning_text.delta", output_index=0, content_index=0, delta="b"),
        [rs(content=[{"type": "reasoning_text", "text": "a"}]), msg(), fc()],
    ),
    (
        ev("response.reasoning_text.done", output_index=0, content_index=0, text="ab"),
        [rs(content=[{"type": "reasoning_text", "text": "a"}]), msg(), fc()],
    ),
    (ev("response.completed", response={"output": []}), [rs(), msg(), fc()]),
    (ev("response.incomplete", response={"output": []}), [rs(), msg(), fc()]),
    (ev("response.failed", response={"error": {"message": "x"}}), [rs(), msg(), fc()]),
    (ev("error", message="x"), [msg()]),
]


@pytest.mark.parametrize(("event", "output"), PURITY_CASES, ids=lambda v: str(v)[:60])
def test_reducer_never_mutates_its_input(event: dict[str, Any], output: list[Item]) -> None:
    before, event_before = copy.deepcopy(output), copy.deepcopy(event)
    out, _ = reduce_event(event, output)
    assert output == before
    assert event == event_before
    assert out is not output
    assert out != before or event["type"] in {"response.created", "error"}


@pytest.mark.parametrize(
    ("event", "touched"),
    [
        (ev("response.output_text.delta", output_index=1, content_index=0, delta="!"), 1),
        (ev("response.function_call_arguments.delta", output_index=2, delta="{"), 2),
        (
            ev("response.reasoning_summary_text.delta", output_index=0, summary_index=0, delta="b"),
            0,
        ),
    ],
)
def test_deltas_copy_only_the_touched_item(event: dict[str, Any], touched: int) -> None:
    output = [rs(summary=[{"type": "summary_text", "text": "a"}]), msg(), fc()]
    out, _ = reduce_event(event, output)
    for i, item in enumerate(output):
        assert (out[i] is item) == (i != touched)


# --- hypothesis ----------------------------------------------------------------------

FAMILY = [
    "response.created",
    "response.in_progress",
    "response.queued",
    "response.output_item.added",
    "response.output_item.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.output_text.annotation.added",
    "response.refusal.delta",
    "response.refusal.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
    "response.unknown.delta",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=4,
)
indexes = st.one_of(
    st.integers(-2, 6), st.none(), st.booleans(), st.text(max_size=2), st.just(10**12)
)
ids = st.sampled_from(["msg_1", "fc_1", "rs_1", "call_1", "", "other"]) | json_values
item_types = st.sampled_from(["message", "reasoning", "function_call", "web_search_call", ""])
parts = st.fixed_dictionaries(
    {"type": st.sampled_from(["output_text", "summary_text", "reasoning_text", "refusal"])},
    optional={"text": st.text(max_size=5) | json_values, "annotations": json_values},
)
items = st.fixed_dictionaries(
    {"type": item_types | json_values},
    optional={
        "id": ids,
        "call_id": ids,
        "status": st.sampled_from(["in_progress", "completed"]) | json_values,
        "content": st.lists(parts | json_values, max_size=3) | json_values,
        "summary": st.lists(parts | json_values, max_size=3) | json_values,
        "arguments": st.text(max_size=5) | json_values,
        "name": json_values,
    },
)
responses = st.fixed_dictionaries(
    {},
    optional={
        "id": ids,
        "output": st.lists(items | json_values, max_size=3) | json_values,
        "usage": json_values,
        "error": json_values,
        "incomplete_details": json_values,
        "status": json_values,
    },
)
events = st.fixed_dictionaries(
    {"type": st.sampled_from(FAMILY)},
    optional={
        "output_index": indexes,
        "content_index": indexes,
        "summary_index": indexes,
        "annotation_index": indexes,
        "item_id": ids,
        "delta": st.text(max_size=5) | json_values,
        "text": st.text(max_size=5) | json_values,
        "arguments": st.text(max_size=5) | json_values,
        "refusal": st.text(max_size=5) | json_values,
        "name": json_values,
        "part": parts | json_values,
        "item": items | json_values,
        "annotation": json_values,
        "response": responses | json_values,
        "message": json_values,
        "code": json_values,
        "error": json_values,
    },
)


@settings(
    max_examples=fuzz_budget(200), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.lists(events, max_size=5), st.lists(items, max_size=4))
def test_random_events_never_raise_and_never_mutate(
    stream: list[dict[str, Any]], output: list[Item]
) -> None:
    current: list[Item] = output
    for event in stream:
        before, event_before = copy.deepcopy(current), copy.deepcopy(event)
        new, meta = reduce_event(event, current)
        assert current == before
        assert event == event_before
        assert isinstance(new, list)
        assert meta is None or isinstance(meta, ReduceMeta)
        current = new


# --- recorded streams ------------------------------------------------------------------


def out_text(text: str, *, id: str, status: str = "completed") -> Item:
    return {
        "id": id,
        "type": "message",
        "status": status,
        "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}],
        "role": "assistant",
    }


def weather_call(id: str, call_id: str, city: str, status: str = "completed") -> Item:
    return {
        "id": id,
        "type": "function_call",
        "status": status,
        "arguments": f'{{"city":"{city}"}}',
        "call_id": call_id,
        "name": "get_weather",
    }


def usage(i: int, o: int, r: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": i,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": o,
        "output_tokens_details": {"reasoning_tokens": r},
        "total_tokens": i + o,
    }


def test_fixture_text_only() -> None:
    events = sse_events("text-only.sse")
    out, metas = reduce_all(events)
    rid = "resp_6891a0c2e4f08190b5a3c7d2e1f40a6b0c9d8e7f6a5b4c3d"
    assert out == [
        out_text(
            "Hello! How can I help you today?",
            id="msg_6891a0c36b1c8190a2f4d5e6c7b8a9d00e1f2a3b4c5d6e7f",
        )
    ]
    assert metas == [
        ReduceMeta(response_id=rid),
        ReduceMeta(response_id=rid),
        ReduceMeta(usage=usage(11, 10), done=True, status="completed", response_id=rid),
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def test_fixture_text_only_streams_text_before_the_end() -> None:
    events = sse_events("text-only.sse")
    deltas_end = max(i for i, e in enumerate(events) if e["type"] == "response.output_text.delta")
    out, _ = reduce_all(events[: deltas_end + 1])
    assert out == [
        {
            "id": "msg_6891a0c36b1c8190a2f4d5e6c7b8a9d00e1f2a3b4c5d6e7f",
            "type": "message",
            "status": "in_progress",
            "content": [
                {
                    "type": "output_text",
                    "annotations": [],
                    "logprobs": [],
                    "text": "Hello! How can I help you today?",
                }
            ],
            "role": "assistant",
        }
    ]


def test_fixture_reasoning_summary_then_text() -> None:
    events = sse_events("reasoning-summary-then-text.sse")
    expected = [
        {
            "id": "rs_6891a1d5c0f08193a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2",
            "type": "reasoning",
            "summary": [
                {
                    "type": "summary_text",
                    "text": "**Computing the sum**\n\nThe user asks for 17 + 25. That is 42.",
                },
                {
                    "type": "summary_text",
                    "text": "**Checking**\n\n17 + 25: 7 + 5 = 12, carry 1; 1 + 2 + 1 = 4. So 42.",
                },
            ],
        },
        out_text("17 + 25 = **42**.", id="msg_6891a1d9e2a48193b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6"),
    ]
    before_end, _ = reduce_all(events[:-1])
    assert before_end == expected
    out, metas = reduce_all(events)
    assert out == expected
    assert metas[-1] == ReduceMeta(
        usage=usage(14, 150, 128),
        done=True,
        status="completed",
        response_id="resp_6891a1d4a1e481939f0b2c3d4e5f60718293a4b5c6d7e8f9",
    )


def test_fixture_reasoning_parallel_function_calls() -> None:
    events = sse_events("reasoning-parallel-function-calls.sse")
    expected = [
        {
            "id": "rs_6891a2f1b2d48192b9a8c7d6e5f4a3b2c1d0e9f8a7b6c5d4",
            "type": "reasoning",
            "summary": [],
        },
        weather_call(
            "fc_6891a2f3d4e081928a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d",
            "call_Xk4t2bQ9mRZp0vLwYc7sN1aE",
            "Paris",
        ),
        weather_call(
            "fc_6891a2f4a8c881929b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d",
            "call_Qm8v3JdT5sWx1nKbHf2gLr6U",
            "Tokyo",
        ),
    ]
    before_end, _ = reduce_all(events[:-1])
    assert before_end == expected
    out, metas = reduce_all(events)
    assert out == expected
    assert metas[-1].usage == usage(82, 181, 128)
    assert metas[-1].done is True


def test_fixture_arguments_done_only() -> None:
    events = sse_events("arguments-done-only.sse")
    assert not any(e["type"] == "response.function_call_arguments.delta" for e in events)
    calls = [
        ("fc_7d1e2f3a4b5c6d7e8f9a0b1c", "call_7d1e2f3a4b5c6d7e8f9a0b1c", "Oslo"),
        ("fc_8e2f3a4b5c6d7e8f9a0b1c2d", "call_8e2f3a4b5c6d7e8f9a0b1c2d", "Lima"),
    ]
    before_end, _ = reduce_all(events[:-1])
    assert before_end == [weather_call(*c, status="in_progress") for c in calls]
    out, metas = reduce_all(events)
    assert out == [weather_call(*c) for c in calls]
    assert metas == [
        ReduceMeta(response_id="resp_c2a9f1e04b7d4e6a8f3b5c1d9e2a7f60"),
        ReduceMeta(
            usage=usage(120, 38),
            done=True,
            status="completed",
            response_id="resp_c2a9f1e04b7d4e6a8f3b5c1d9e2a7f60",
        ),
    ]


def test_fixture_changing_item_ids() -> None:
    events = sse_events("changing-item-ids.sse")
    out, metas = reduce_all(events)
    assert out == [
        out_text("Let me check.", id="msg_a5"),
        weather_call("fc_99ff88ee77dd66cc55bb44aa", "call_0f1e2d3c4b5a", "Rome"),
    ]
    assert metas[-1].status == "completed"


def test_fixture_changing_item_ids_mid_stream() -> None:
    events = sse_events("changing-item-ids.sse")
    last_delta = max(i for i, e in enumerate(events) if e["type"] == "response.output_text.delta")
    out, _ = reduce_all(events[: last_delta + 1])
    assert out == [
        {
            "id": "msg_00aa11bb22cc33dd44ee55ff",
            "type": "message",
            "status": "in_progress",
            "content": [
                {"type": "output_text", "annotations": [], "logprobs": [], "text": "Let me check."}
            ],
            "role": "assistant",
        }
    ]


def test_fixture_incomplete_max_tokens() -> None:
    out, metas = reduce_all(sse_events("incomplete-max-tokens.sse"))
    assert out == [
        out_text(
            "Once upon a time, in a kingdom by the sea, there lived a cartographer",
            id="msg_6891a4b3e5f681919a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d",
            status="incomplete",
        )
    ]
    assert metas[-1] == ReduceMeta(
        usage=usage(12, 16),
        done=True,
        status="incomplete",
        response_id="resp_6891a4b2c3d081919e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b",
        incomplete_reason="max_output_tokens",
    )


def test_fixture_failed() -> None:
    out, metas = reduce_all(sse_events("failed.sse"))
    message = "The server had an error while processing your request. Sorry about that!"
    assert out == [
        out_text(
            "The answer is",
            id="msg_6891a5c7f8a98190b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7",
            status="incomplete",
        )
    ]
    assert metas[-1] == ReduceMeta(
        error=message,
        error_data={"code": "server_error", "message": message},
        done=True,
        status="failed",
        response_id="resp_6891a5c6d7e88190a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6",
    )


def test_fixture_error_mid_stream() -> None:
    out, metas = reduce_all(sse_events("error-mid-stream.sse"))
    message = (
        "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): "
        "Limit 30000, Used 30000, Requested 512. Please try again in 1.024s."
    )
    assert out == [
        out_text(
            "Here are three",
            id="msg_6891a6d9a0b18192d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9",
            status="in_progress",
        )
    ]
    assert metas[-1] == ReduceMeta(
        error=message,
        error_data={"code": "rate_limit_exceeded", "message": message, "param": None},
    )
    assert not any(m.done for m in metas)


def test_fixture_bodies_are_sse_without_done_marker() -> None:
    for path in sorted(FIXTURES.glob("*.sse")):
        body = path.read_text(encoding="utf-8")
        assert "[DONE]" not in body
        blocks = [b for b in body.split("\n\n") if b]
        assert body.endswith("\n\n")
        for block in blocks:
            event_line, data_line = block.split("\n")
            data = orjson.loads(data_line.removeprefix("data: "))
            assert event_line == f"event: {data['type']}"
            assert isinstance(data["sequence_number"], int)


# --- non-streaming response object -------------------------------------------------------


def test_response_object_with_function_calls() -> None:
    obj = orjson.loads((FIXTURES / "response-object-function-calls.json").read_bytes())
    out, meta = response_object_to_output(obj)
    assert out == [
        {
            "id": "rs_6891a7e1b2c38193f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1",
            "type": "reasoning",
            "summary": [],
        },
        weather_call(
            "fc_6891a7e2c3d48193a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2",
            "call_Hn2c8WfK4pLq9ZrT1vBx6mYs",
            "Berlin",
        ),
        weather_call(
            "fc_6891a7e3d4e58193b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3",
            "call_Pz5d1RgM7tNw3XsV8kCy2jQa",
            "Madrid",
        ),
    ]
    assert meta == ReduceMeta(
        usage=usage(82, 173, 128),
        done=True,
        status="completed",
        response_id="resp_6891a7e0f1a28193e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0",
    )


def test_response_object_incomplete_settles_open_items() -> None:
    obj = {
        "id": "resp_9",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [msg("Once")],
    }
    out, meta = response_object_to_output(obj)
    assert out == [msg("Once", status="incomplete")]
    assert meta == ReduceMeta(
        done=True, status="incomplete", response_id="resp_9", incomplete_reason="max_output_tokens"
    )


def test_response_object_error_body() -> None:
    body = {"error": {"message": "Invalid model", "type": "invalid_request_error", "code": None}}
    out, meta = response_object_to_output(body)
    assert out == []
    assert meta == ReduceMeta(
        error="Invalid model", error_data=body["error"], done=True, status="failed"
    )


# --- the accumulator's delta batching gives exactly the reducer's result -------------


def _reduce_all(events: list[dict[str, Any]]) -> list[Item]:
    output: list[Item] = []
    for event in events:
        output, _ = reduce_event(event, output)
    return output


@pytest.mark.parametrize(
    "path",
    sorted((Path(__file__).parents[2] / "fixtures" / "streams" / "openai-responses").glob("*.sse")),
    ids=lambda p: p.name,
)
def test_batched_deltas_equal_event_by_event_reduction(path: Path) -> None:
    from toolrelay.core.stream.event_accumulator import EventAccumulator as Accumulator

    events = [
        orjson.loads(line[6:])
        for line in path.read_bytes().split(b"\n")
        if line.startswith(b"data: ")
    ]
    acc = Accumulator()
    for event in events:
        acc.feed_event(event)
    assert acc.output == _reduce_all(events)


@settings(
    max_examples=fuzz_budget(300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.lists(items, min_size=1, max_size=4), st.lists(events, max_size=12))
def test_batched_deltas_equal_reduction_for_random_streams(
    start: list[Item], stream: list[dict[str, Any]]
) -> None:
    from toolrelay.core.stream.event_accumulator import EventAccumulator as Accumulator

    seed = [
        {"type": "response.output_item.added", "output_index": i, "item": it}
        for i, it in enumerate(start)
    ]
    acc = Accumulator()
    for event in seed + stream:
        acc.feed_event(event)
    assert acc.output == _reduce_all(seed + stream)


def test_the_event_types_the_reducer_reads_are_all_responses_names() -> None:
    """`BodyReader` sends a payload whose type is in `EVENT_TYPES` to the Responses
    reader without the `response.` prefix test: nothing else may be in it."""
    assert "response.output_text.delta" in EVENT_TYPES
    assert all(kind == "error" or kind.startswith("response.") for kind in EVENT_TYPES)


def test_concatenated_arguments_split_on_the_responses_path_too() -> None:
    """R6 on a Responses stream (issue 30 item 7: removing the split there failed no
    test). The expected pieces are the raw `arguments.done` string cut by hand."""
    from pathlib import Path

    from toolrelay.core.stream.reader import read_body

    raw = (
        Path(__file__).parents[2] / "fixtures/streams/openai-responses/concatenated-arguments.sse"
    ).read_bytes()
    done = next(
        orjson.loads(line[6:])
        for line in raw.decode().splitlines()
        if line.startswith("data: ") and '"response.function_call_arguments.done"' in line
    )
    assert done["arguments"] == '{"q":"A"}{"q":"B"}'
    result, _ = read_body(raw)
    calls = [i for i in result.to_dict()["output"] if i["type"] == "function_call"]
    assert [(c["name"], c["arguments"], c["status"]) for c in calls] == [
        ("web_search", '{"q":"A"}', "completed"),
        ("web_search", '{"q":"B"}', "completed"),
    ]
    assert "call_3b4c5d6e7f8091a2b3c4d5e6" not in {c["call_id"] for c in calls}  # new ids
    assert len({c["call_id"] for c in calls}) == 2
