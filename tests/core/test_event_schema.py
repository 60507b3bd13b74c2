"""The event protocol's schema and table are made from the payload types, and stay committed.

`docs/events.schema.json` and the table in `docs/events.md` must equal what
`toolrelay.core.event_schema` makes now: a payload type changed without
regenerating them fails here (`python -m toolrelay.core.event_schema docs`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from toolrelay.core import events as ev
from toolrelay.core.event_schema import schema, schema_json, table, with_table
from toolrelay.events import schema as public_schema

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_committed_schema_is_the_generated_one() -> None:
    assert (DOCS / "events.schema.json").read_text(encoding="utf-8") == schema_json()
    assert public_schema() == orjson.loads(schema_json())


def test_the_documented_table_is_the_generated_one() -> None:
    page = (DOCS / "events.md").read_text(encoding="utf-8")
    assert table() in page
    assert with_table(page) == page


def test_the_schema_is_valid_and_names_every_payload() -> None:
    made = schema()
    jsonschema.Draft202012Validator.check_schema(made)
    typed = [rule for rule in made["allOf"] if "properties" in rule["if"]]
    assert {rule["if"]["properties"]["type"]["const"] for rule in typed} == set(ev.PAYLOADS)
    assert len(made["allOf"]) == len(typed) + 1  # and a delta's lean frame (no type)


VALID: list[dict[str, Any]] = [
    {
        "type": ev.OUTPUT_TEXT_DELTA,
        "data": {"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Hi"},
    },
    {"type": ev.CHAT_TITLE, "data": {"title": "Paris"}},
    {"type": ev.TOOL_PROGRESS, "data": {"call_id": None, "progress": 0.5}},
    {"type": "my_tool:own_event", "data": {"anything": [1, 2]}},  # a tool's own event
    {"type": ev.CHAT_COMPLETION, "data": {"usage": {"input_tokens": 3}}},
    {"data": {"delta": "more"}},  # a chat stream's lean delta: its place as before
    {"data": {"item_id": "msg_2", "output_index": 1, "delta": "x"}},  # its place moved
]
INVALID: list[dict[str, Any]] = [
    {"type": ev.OUTPUT_TEXT_DELTA, "data": {"item_id": "msg_1", "output_index": 0}},  # no delta
    {"type": ev.CHAT_TITLE, "data": {"title": 3}},
    {"type": ev.OUTPUT_ITEM_DONE, "data": {"output_index": "0", "item": {}}},
    {"type": ev.CHAT_MESSAGE_ERROR, "data": {"error": {}}},
    {"type": ev.CHAT_TAGS},
    {"data": {"item_id": "msg_1"}},  # a lean delta without its delta
    {"data": {"delta": "x", "output_index": "0"}},
    {"delta": "x"},  # no data
]


@pytest.mark.parametrize("event", VALID)
def test_valid_events_pass(event: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(schema()).validate(event)


@pytest.mark.parametrize("event", INVALID)
def test_wrong_payloads_fail(event: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema()).validate(event)
