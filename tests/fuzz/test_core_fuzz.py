"""Fuzz: no model output, however hostile, raises inside the sans-IO core (issue 7 item 13).

Every entry point that takes model output is driven with bodies from
`strategies` (seeded with the recorded provider bodies): `BodyReader` in each
framing, cut at random read boundaries, with a dropped connection or not; then
what it produced goes on through the rest of the core as the engine would
send it (argument parsing, R6 splitting, transcript conversion, usage
merging). The contract is the documented one: errors become `ReadResult.error`
/ error events, never exceptions. `make test` runs a short budget,
`make fuzz` (TOOLRELAY_FUZZ=1) a long one; every input found becomes a
regression test in `test_core_regressions.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.strategies import bodies, json_values
from tests.patience import fuzz_budget
from toolrelay.core.formats.content import detect_format
from toolrelay.core.formats.responses.parse import reduce_event, response_object_to_output
from toolrelay.core.formats.transcript import (
    repair_history,
    to_chat_messages,
    to_responses_input,
    used_call_ids,
)
from toolrelay.core.items import is_call, output_text
from toolrelay.core.stream.event_accumulator import EventAccumulator as Accumulator
from toolrelay.core.stream.reader import BodyReader, ReadResult
from toolrelay.core.tools.calls import parse_arguments, split_calls, split_concatenated
from toolrelay.core.turn.decide import Step, decide
from toolrelay.core.turn.usage import merge_usage, normalise_usage

FUZZ = settings(
    max_examples=fuzz_budget(240),
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
FORMATS = st.sampled_from([None, "sse", "ndjson", "json"])


def read(body: bytes, fmt: str | None, cuts: list[int], dropped: bool) -> ReadResult:
    reader = BodyReader(fmt or detect_format(body), call_ids={"call_1", "functions.weather:0"})  # type: ignore[arg-type]
    start = 0
    for cut in sorted(cuts):
        reader.feed(body[start:cut])
        start = cut
    reader.feed(body[start:])
    reader.finish(dropped=dropped)
    return reader.result()


def downstream(output: list[Any]) -> None:
    """What the engine does next with a response's items."""
    calls = [i for i in output if isinstance(i, dict) and i.get("type") == "function_call"]
    for call in split_calls(calls):
        name, raw = call.get("name"), call.get("arguments")
        parse_arguments(
            name if isinstance(name, str) else "", raw if isinstance(raw, str) else None
        )
    for mode in ("none", "reasoning_content", "think_tags"):
        repair_history(to_chat_messages(output, reasoning=mode))
    to_responses_input(output)
    to_responses_input(output[-1:], context=output)
    used_call_ids([], output)


@FUZZ
@given(bodies(), FORMATS, st.lists(st.integers(0, 4096), max_size=8), st.booleans())
def test_body_reader_never_raises(
    body: bytes, fmt: str | None, cuts: list[int], dropped: bool
) -> None:
    result = read(body, fmt, [c for c in cuts if c <= len(body)], dropped)
    assert isinstance(result.output, list)
    assert result.error is None or isinstance(result.error, str)
    merge_usage(result.usage, result.usage)
    downstream(result.output)
    output_text(result.output)
    calls = [i for i in result.output if is_call(i)]
    assert all(isinstance(c.get(k), str) for c in calls for k in ("call_id", "name", "arguments"))
    decide(Step(result.output, calls, result.error, 0, 5, deferred_names=frozenset({"x"})))


@FUZZ
@given(st.lists(json_values, max_size=8), st.lists(json_values, max_size=4))
def test_hostile_items_never_raise_in_conversion(items: list[Any], messages: list[Any]) -> None:
    output = [i for i in items if isinstance(i, dict)]
    downstream(output)
    used_call_ids([m for m in messages if isinstance(m, dict)], output)
    repair_history([m for m in messages if isinstance(m, dict)])


@FUZZ
@given(st.lists(json_values, max_size=10), st.lists(json_values, max_size=4))
def test_hostile_responses_events_never_raise(events: list[Any], start: list[Any]) -> None:
    output: Sequence[Mapping[str, Any]] = [i for i in start if isinstance(i, dict)]
    for event in events:
        if isinstance(event, dict):
            output, _meta = reduce_event(event, output)
    acc = Accumulator()
    for event in events:
        if isinstance(event, dict):
            acc.feed_event(event)
    acc.finish()
    downstream(acc.output)
    if events and isinstance(events[0], dict):
        response_object_to_output(events[0])


@FUZZ
@given(st.text(max_size=60) | st.sampled_from(['{"a":1}{"b":', '{"a":NaN}{"b":1}', "{}" * 30]))
def test_argument_text_never_raises(raw: str) -> None:
    pieces = split_concatenated(raw)
    assert pieces == [raw] or "".join(pieces).replace(" ", "") != ""
    parse_arguments("tool", raw)


@FUZZ
@given(json_values, json_values)
def test_usage_never_raises(a: Any, b: Any) -> None:
    normalise_usage(a)
    merge_usage(a if isinstance(a, dict) else None, b if isinstance(b, dict) else None)
