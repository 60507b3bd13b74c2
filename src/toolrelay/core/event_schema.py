"""The event protocol as one JSON Schema, and as the table in `docs/events.md`.

Both are made from `core.events.PAYLOADS`, so the payload types mypy checks, the
schema a client (or a test) validates frames against and the documented table
cannot drift apart: `tests/core/test_event_schema.py` compares the committed
`docs/events.schema.json` and the table with what this module makes now.
Regenerate both with `python -m toolrelay.core.event_schema docs`.

The schema describes one event, `{"type", "data"}` (an SSE frame's `data:`
line): a known `type` must carry its payload; an unknown one (a tool's own
event) only needs an object. Payloads allow more keys than they name. A
delta's frame on a chat's stream has no `type` (`LeanDeltaData`,
`core.formats.chat_stream`).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NotRequired, Required, Union, get_args, get_origin, get_type_hints

import orjson

from toolrelay.core.events import PAYLOADS, LeanDeltaData

SCHEMA_ID = "https://toolrelay.dev/events.schema.json"
TABLE_START = "<!-- event table: made by python -m toolrelay.core.event_schema docs -->"
TABLE_END = "<!-- end of event table -->"


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one event of the protocol."""
    defs: dict[str, Any] = {}
    _define(LeanDeltaData, defs)
    lean = {"$ref": f"#/$defs/{LeanDeltaData.__name__}"}
    rules: list[dict[str, Any]] = [  # a frame without `type`: a chat stream's delta
        {"if": {"not": {"required": ["type"]}}, "then": {"properties": {"data": lean}}}
    ]
    for name, payload in PAYLOADS.items():
        _define(payload, defs)
        rules.append(
            {
                "if": {"properties": {"type": {"const": name}}, "required": ["type"]},
                "then": {"properties": {"data": {"$ref": f"#/$defs/{payload.__name__}"}}},
            }
        )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "toolrelay event",
        "description": (
            "One event a client sees: {type, data}. Known types carry their payload; "
            "other types (a tool's own events) pass through with any object. A delta's "
            "frame on a chat's stream leaves out `type` (its SSE `event:` line names it) "
            "and its place when unchanged (LeanDeltaData)."
        ),
        "type": "object",
        "required": ["data"],
        "properties": {
            "type": {"type": "string", "examples": list(PAYLOADS)},
            "data": {"type": "object"},
        },
        "allOf": rules,
        "$defs": dict(sorted(defs.items())),
    }


_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    Any: {},
}


def _define(payload: type, defs: dict[str, Any]) -> None:
    """Add the TypedDict `payload` (and those it holds) to `defs`, by its name.

    Read from the annotations, not `__required_keys__`: on Python 3.11 that set
    ignores `NotRequired` under `from __future__ import annotations`.
    """
    if payload.__name__ in defs:
        return
    defs[payload.__name__] = {}  # taken before the fields: a cycle ends here
    hints = get_type_hints(payload, include_extras=True)
    total = getattr(payload, "__total__", True)
    properties, required = {}, []
    for key, hint in hints.items():
        wrapper = get_origin(hint)
        if wrapper in (NotRequired, Required):
            hint = get_args(hint)[0]
        if wrapper is Required or (total and wrapper is not NotRequired):
            required.append(key)
        properties[key] = _type(hint, defs)
    made: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        made["required"] = required
    if payload.__doc__:
        made["description"] = " ".join(payload.__doc__.split())
    defs[payload.__name__] = made


def _type(hint: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The schema of one annotation of a payload's field."""
    if hint in _SCALARS:
        return _SCALARS[hint]
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return {"anyOf": [_type(arg, defs) for arg in get_args(hint)]}
    if origin is not None and issubclass(origin, Mapping):
        return {"type": "object"}
    if origin is not None and issubclass(origin, Sequence):
        return {"type": "array", "items": _type(get_args(hint)[0], defs)}
    if isinstance(hint, type) and hasattr(hint, "__total__"):  # a TypedDict
        _define(hint, defs)
        return {"$ref": f"#/$defs/{hint.__name__}"}
    raise TypeError(f"no schema for {hint!r}")


def schema_json() -> str:
    """`schema()` as the committed file holds it: sorted keys, two-space indent."""
    return orjson.dumps(schema(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"


def table() -> str:
    """The protocol as a Markdown table: each type, its payload's keys, what it means."""
    made = schema()["$defs"]
    rows = ["| type | data | meaning |", "|---|---|---|"]
    for name, payload in PAYLOADS.items():
        shape = made[payload.__name__]
        required = set(shape.get("required", ()))
        keys = [k if k in required else f"{k}?" for k in shape.get("properties", {})]
        meaning = " ".join((payload.__doc__ or "").split())
        rows.append(f"| `{name}` | `{{{', '.join(keys)}}}` | {meaning} |")
    return "\n".join([TABLE_START, *rows, TABLE_END])


def with_table(markdown: str) -> str:
    """`markdown` with the text between the table's markers replaced by `table()`."""
    head, found, rest = markdown.partition(TABLE_START)
    if not found:
        raise ValueError(f"no {TABLE_START!r} in the page")
    _, found, tail = rest.partition(TABLE_END)
    if not found:
        raise ValueError(f"no {TABLE_END!r} after the table's start")
    return head + table() + tail


def main(argv: list[str]) -> int:
    """Write `events.schema.json` and `events.md`'s table into the folder named."""
    docs = Path(argv[0] if argv else "docs")
    (docs / "events.schema.json").write_text(schema_json(), encoding="utf-8")
    page = docs / "events.md"
    page.write_text(with_table(page.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
