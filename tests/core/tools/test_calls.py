"""Splitting, parsing, filtering and validating tool-call arguments (SPEC R6, R8)."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolrelay.core.items import FunctionCallItem, function_call_item
from toolrelay.core.tools.calls import (
    ArgumentsError,
    ParsedArguments,
    canonical_arguments,
    filter_to_schema,
    parse_arguments,
    split_calls,
    split_concatenated,
    validate_arguments,
)

MALFORMED = (
    "Error: Tool call arguments could not be parsed. The model generated "
    "malformed or incomplete JSON for `get_weather`. Please try again."
)
NOT_OBJECT = "Error: Tool call arguments for `get_weather` must be a JSON object. Please try again."
ID_RE = re.compile(r"^call_[0-9a-f]{24}$")

# ---------------------------------------------------------------- split_concatenated


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a":1}{"b":2}', ['{"a":1}', '{"b":2}']),
        (' {"a":1}\n {"b":2} ', ['{"a":1}', '{"b":2}']),
        (
            '{"query":"A","count":5}{"query":"B","count":5}',
            ['{"query":"A","count":5}', '{"query":"B","count":5}'],
        ),
        ('{"a":1}\t{"b":[1,2]}  {"c":"}{"}', ['{"a":1}', '{"b":[1,2]}', '{"c":"}{"}']),
        # R6 allows whitespace between the objects, and Unicode's counts (issue 30 item 3;
        # Open WebUI's `str.isspace` loop): a line separator, a no-break space
        ('{"a":1}\u2028{"b":2}', ['{"a":1}', '{"b":2}']),
        ('{"a":1}\u00a0{"b":2}', ['{"a":1}', '{"b":2}']),
        ('\u3000{"a":1}\u2029\u0085{"b":2}\u00a0', ['{"a":1}', '{"b":2}']),
    ],
)
def test_split_concatenated_splits_back_to_back_values(raw: str, expected: list[str]) -> None:
    assert split_concatenated(raw) == expected


@pytest.mark.parametrize(
    "raw",
    ['{"a":1}', ' {"a":1} ', "", "   ", '{"a":1}{bad', '{"a":1} x', '{"a":', "nope", "{'a': 1}"],
)
def test_split_concatenated_returns_anything_else_unchanged(raw: str) -> None:
    assert split_concatenated(raw) == [raw]


@pytest.mark.parametrize(
    "raw",
    [
        "1 2",
        "[1][2]",
        '"a""b"',
        "NaN Infinity",
        '{"a":1}[2]',
        '[1]{"a":1}',
        '{"a":1} 2',
        "true false",
    ],
)
def test_split_concatenated_splits_only_objects_unlike_open_webui(raw: str) -> None:
    """R6: only a run of JSON objects splits; Open WebUI also splits numbers, arrays, strings."""
    assert split_concatenated(raw) == [raw]


json_objects = st.dictionaries(
    st.text(max_size=5),
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
        max_leaves=6,
    ),
    max_size=4,
)
whitespace = st.text(alphabet=" \t\r\n", max_size=3)


@given(st.lists(json_objects, min_size=2, max_size=5), st.data())
def test_split_concatenated_recovers_each_joined_object(
    objects: list[dict[str, Any]], data: st.DataObject
) -> None:
    encoded = [orjson.dumps(o).decode() for o in objects]
    raw = data.draw(whitespace)
    for text in encoded:
        raw += text + data.draw(whitespace)
    assert split_concatenated(raw) == encoded


@given(st.text())
def test_split_concatenated_never_raises(raw: str) -> None:
    pieces = split_concatenated(raw)
    assert pieces == [raw] or len(pieces) >= 2


def test_split_concatenated_survives_deep_nesting() -> None:
    raw = "[" * 100_000 + "]" * 100_000
    assert split_concatenated(raw + raw) == [raw + raw]


# ---------------------------------------------------------------- split_calls


def test_split_calls_replaces_a_concatenated_call_with_new_ids() -> None:
    keep = function_call_item("call_keep", "other", '{"x":1}', status="completed")
    joined = function_call_item("call_orig", "search", '{"q":"A"} {"q":"B"}', status="completed")
    out = split_calls([keep, joined])

    assert len(out) == 3
    assert out[0] is keep
    first, second = out[1], out[2]
    assert [c["arguments"] for c in (first, second)] == ['{"q":"A"}', '{"q":"B"}']
    for call in (first, second):
        assert ID_RE.match(call["call_id"])
        assert call["call_id"] != "call_orig"
        assert call["id"].startswith("fc_")
        assert call["id"] != joined["id"]
        assert call["name"] == "search"
        assert call["status"] == "completed"
        assert call["type"] == "function_call"
    assert first["call_id"] != second["call_id"]
    assert first["id"] != second["id"]
    assert joined["arguments"] == '{"q":"A"} {"q":"B"}'  # input not mutated


def test_split_calls_keeps_unsplittable_calls_as_the_same_objects() -> None:
    calls: list[FunctionCallItem] = [
        function_call_item("call_a", "f", '{"a":1}'),
        function_call_item("call_b", "f", ""),
        function_call_item("call_c", "f", '{"a":1}{bad'),
    ]
    out = split_calls(calls)
    assert len(out) == 3
    assert all(o is c for o, c in zip(out, calls, strict=True))


# ---------------------------------------------------------------- parse_arguments


@pytest.mark.parametrize(
    ("raw", "value", "canonical"),
    [
        ('{"city": "Paris", "days": 3}', {"city": "Paris", "days": 3}, '{"city":"Paris","days":3}'),
        ('{"b":1,"a":2}', {"b": 1, "a": 2}, '{"b":1,"a":2}'),
        (
            "{'city': 'Paris', 'ok': True, 'n': None}",
            {"city": "Paris", "ok": True, "n": None},
            '{"city":"Paris","ok":true,"n":null}',
        ),
        ("{'a': (1, 2), 'b': {3, 1}}", {"a": [1, 2], "b": [1, 3]}, '{"a":[1,2],"b":[1,3]}'),
        (
            "{1: 'x', None: 2, 2.5: 3}",
            {"1": "x", "null": 2, "2.5": 3},
            '{"1":"x","null":2,"2.5":3}',
        ),
        ("", {}, "{}"),
        ("  \n ", {}, "{}"),
        (None, {}, "{}"),
        (
            "{'big': 123456789012345678901234567890}",
            {"big": 1.2345678901234568e29},
            '{"big":1.2345678901234568e+29}',
        ),
        ('{"s": "é\\n"}', {"s": "é\n"}, '{"s":"é\\n"}'),
    ],
)
def test_parse_arguments_reads_json_then_python_literals(
    raw: str | None, value: dict[str, Any], canonical: str
) -> None:
    assert parse_arguments("get_weather", raw) == ParsedArguments(value, canonical)


@pytest.mark.parametrize(
    "raw",
    [
        '{"city": "Par',
        "{bad json}",
        "{'a': b'bytes'}",
        "{'a': 1j}",
        "{'a': ...}",
        "{(1, 2): 3}",
        "{'a': 1e400}",
        "{'a': '\\ud800'}",
        "__import__('os').system('true')",
        "{'a': " + "[" * 150 + "]" * 150 + "}",
        "{'a': '" + "x" * 300_000 + "'}",
    ],
)
def test_parse_arguments_reports_unreadable_arguments(raw: str) -> None:
    assert parse_arguments("get_weather", raw) == ArgumentsError(MALFORMED)


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "42", "null", "true", "(1, 2)", "1"])
def test_parse_arguments_rejects_non_objects(raw: str) -> None:
    assert parse_arguments("get_weather", raw) == ArgumentsError(NOT_OBJECT)


@given(st.text())
def test_parse_arguments_never_raises(raw: str) -> None:
    result = parse_arguments("t", raw)
    if isinstance(result, ParsedArguments):
        assert orjson.loads(result.canonical) == result.value
    else:
        assert result.message.startswith("Error: Tool call arguments")


@given(json_objects)
def test_parse_arguments_round_trips_json_objects(obj: dict[str, Any]) -> None:
    raw = orjson.dumps(obj).decode()
    assert parse_arguments("t", raw) == ParsedArguments(obj, raw)


def test_canonical_arguments_is_compact_and_keeps_key_order() -> None:
    assert canonical_arguments({"z": 1, "a": [1, {"b": None}]}) == '{"z":1,"a":[1,{"b":null}]}'


# ---------------------------------------------------------------- filter_to_schema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}


def test_filter_to_schema_drops_undeclared_keys() -> None:
    args = {"city": "Paris", "extra": 1, "days": 2}
    assert filter_to_schema(args, SCHEMA) == {"city": "Paris", "days": 2}
    assert args == {"city": "Paris", "extra": 1, "days": 2}


def test_filter_to_schema_without_properties_keeps_everything() -> None:
    args = {"anything": 1}
    assert filter_to_schema(args, None) is args
    assert filter_to_schema(args, {"type": "object"}) is args
    assert filter_to_schema(args, {"properties": "junk"}) is args


def test_filter_to_schema_with_empty_properties_drops_everything() -> None:
    assert filter_to_schema({"a": 1}, {"type": "object", "properties": {}}) == {}


# ---------------------------------------------------------------- validate_arguments


def test_validate_arguments_accepts_valid_arguments() -> None:
    assert validate_arguments("weather", {"city": "Paris", "days": 2}, SCHEMA) is None


def test_validate_arguments_lists_every_problem_with_its_path() -> None:
    assert validate_arguments("weather", {"days": "x"}, SCHEMA) == (
        "Error: Invalid arguments for `weather`: 'city' is a required property; "
        "at $.days: 'x' is not of type 'integer'. Please fix and try again."
    )


def test_validate_arguments_reports_nested_array_paths() -> None:
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
    }
    assert validate_arguments("t", {"items": [1, "two"]}, schema) == (
        "Error: Invalid arguments for `t`: at $.items[1]: 'two' is not of type 'integer'. "
        "Please fix and try again."
    )


def test_validate_arguments_honours_draft7_schemas() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer", "exclusiveMinimum": 0}},
    }
    assert validate_arguments("t", {"n": 0}, schema) == (
        "Error: Invalid arguments for `t`: at $.n: 0 is less than or equal to the minimum of 0. "
        "Please fix and try again."
    )


def test_validate_arguments_caps_the_number_of_problems() -> None:
    schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(12)}}
    message = validate_arguments("t", {f"k{i}": "x" for i in range(12)}, schema)
    assert message is not None
    assert message.count("is not of type 'integer'") == 10
    assert message.endswith("; and 2 more. Please fix and try again.")


@pytest.mark.parametrize(
    "schema",
    [
        None,
        {},
        {"type": 12},
        {"type": "object", "properties": {"a": {"type": "no-such-type"}}},
        {"$schema": "http://example.com/unknown", "type": 5},
        {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/s.json"}}},
    ],
)
def test_validate_arguments_skips_missing_or_broken_schemas(schema: dict[str, Any] | None) -> None:
    assert validate_arguments("t", {"a": "x"}, schema) is None


def test_validate_arguments_uses_the_right_cached_validator_per_schema() -> None:
    ints = {"type": "object", "properties": {"a": {"type": "integer"}}}
    strs = {"type": "object", "properties": {"a": {"type": "string"}}}
    for _ in range(3):
        assert validate_arguments("t", {"a": 1}, ints) is None
        assert validate_arguments("t", {"a": 1}, strs) == (
            "Error: Invalid arguments for `t`: at $.a: 1 is not of type 'string'. "
            "Please fix and try again."
        )
