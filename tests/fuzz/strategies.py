"""Hostile model output, seeded with the recorded provider bodies (the corpus).

Three layers of mutation, from coarse to fine: bytes (flips, cuts, splices,
insertions), frames (a recorded JSON payload with one value replaced by a value
of another type: dict `call_id`, object `arguments`, null `choices` …) and
whole random JSON values. The JSON layer finds what byte flips rarely do:
well-formed bodies of the wrong shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from hypothesis import strategies as st

STREAMS = Path(__file__).parent.parent / "fixtures" / "streams"
CORPUS: list[bytes] = [
    p.read_bytes()
    for p in sorted(STREAMS.rglob("*"))
    if p.suffix in (".sse", ".ndjson", ".json")
    and not p.name.endswith((".expected.json", ".exchange.json"))
]

HOSTILE: list[Any] = [
    None,
    True,
    0,
    -1,
    2**70,
    1.5,
    "",
    "x",
    "{",
    '{"a":1}{"b":2}',
    "1 2",
    [],
    [None],
    [{"type": "output_text", "text": 1}],
    {},
    {"q": 1},
    {"0": {"1": []}},
    {"type": "function_call"},
    {"type": "message", "content": "text"},
    [[[[[]]]]],
]
KEYS = [
    "type",
    "id",
    "call_id",
    "name",
    "arguments",
    "content",
    "text",
    "delta",
    "output",
    "output_index",
    "content_index",
    "summary_index",
    "item",
    "item_id",
    "part",
    "response",
    "choices",
    "index",
    "tool_calls",
    "function",
    "message",
    "usage",
    "error",
    "status",
    "summary",
    "reasoning_details",
    "thinking",
    "done",
    "finish_reason",
    "annotations",
]

json_values = st.recursive(
    st.sampled_from(HOSTILE) | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=5)
    ),
    max_leaves=10,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found += _paths(inner, (*prefix, i))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


@st.composite
def mutated_json(draw: st.DrawFn, value: Any) -> Any:
    """`value` with up to three sub-values replaced by hostile ones."""
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(_paths(value)))
        value = _replace(value, path, draw(json_values))
    return value


def _dumps(value: Any) -> bytes:
    """JSON text for any drawn value (orjson refuses ints beyond 64 bits)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value).encode()


def _frames(body: bytes) -> tuple[bytes, list[bytes]]:
    """A body's separator and its lines (SSE data lines and NDJSON lines alike)."""
    sep = b"\r\n" if b"\r\n" in body else b"\n"
    return sep, body.split(sep)


@st.composite
def frame_mutated(draw: st.DrawFn, body: bytes) -> bytes:
    """A recorded body with some JSON payloads reshaped."""
    sep, lines = _frames(body)
    out: list[bytes] = []
    for line in lines:
        prefix, payload = (b"data: ", line[6:]) if line.startswith(b"data: ") else (b"", line)
        try:
            value = orjson.loads(payload)
        except orjson.JSONDecodeError:
            out.append(line)
            continue
        if draw(st.booleans()):
            value = draw(mutated_json(value))
        out.append(prefix + _dumps(value))
    return sep.join(out)


@st.composite
def byte_mutated(draw: st.DrawFn, body: bytes) -> bytes:
    """Flips, cuts, duplicated spans and inserted junk."""
    data = bytearray(body)
    for _ in range(draw(st.integers(1, 6))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        action = draw(st.sampled_from(["flip", "cut", "dup", "insert", "truncate"]))
        if action == "flip":
            data[at] = draw(st.integers(0, 255))
        elif action == "cut":
            del data[at : at + draw(st.integers(1, 40))]
        elif action == "dup":
            data[at:at] = data[at : at + draw(st.integers(1, 80))]
        elif action == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=12))
        else:
            del data[at:]
    return bytes(data)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """One hostile body: a reshaped or byte-mutated recording, or random JSON frames."""
    kind = draw(st.sampled_from(["frames", "bytes", "both", "random"]))
    if kind == "random":
        frames = draw(st.lists(json_values, max_size=6))
        return b"".join(b"data: " + _dumps(f) + b"\n\n" for f in frames)
    body = draw(st.sampled_from(CORPUS))
    if kind in ("frames", "both"):
        body = draw(frame_mutated(body))
    if kind in ("bytes", "both"):
        body = draw(byte_mutated(body))
    return body
