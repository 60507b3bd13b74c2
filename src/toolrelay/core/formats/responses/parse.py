"""Responses API stream reducer (SPEC R4): `(event, output) -> (new output, meta)`.

Owns the meaning of every OpenAI Responses streaming event
(`response.created` … `response.completed`, plus the top-level `error`) and of
the non-streaming `response` object. It must not frame bytes, do I/O or mutate
anything it was given.

Invariants, in the spirit of h11's `_state.py`:

1. `reduce_event` never mutates `output`, an item, a part or the event. It
   returns a new list that shares untouched items; only the touched item and
   the touched part are copied (this runs once per token, so no deep copies).
2. It never raises. A malformed event (missing field, wrong type, bad index)
   returns the output unchanged (as a new list) and meta `None`.
3. A delta or done event finds its item by `output_index` when that index is
   in range and holds an item of the right type, else by `item_id` (some
   providers mint a new id per event); with neither, the last item if it has
   the right type. An index past the end, or no index, with no match creates
   the item, its type inferred from the event name.
4. Part indexes (`content_index`, `summary_index`) are positional: a part past
   the end is created, padding with empty parts of the same kind.
5. Only `response.completed`/`incomplete`/`failed` finish a response; they
   settle every item still `in_progress` (`completed`, or `incomplete` when the
   response did not complete).
6. Unknown event types and unknown item types pass through untouched.
7. Items are handled as plain dicts, any kind alike; a known kind is created
   and settled in its `core.items` shape, so the output is a list of `Item`s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from toolrelay.core.formats.responses.item_edits import (
    Part,
    Raw,
    as_index,
    edit_item,
    type_of,
    with_part,
)
from toolrelay.core.items import Item, as_items, raw_items

__all__ = ["EVENT_TYPES", "ReduceMeta", "reduce_event", "response_object_to_output"]

Event = Mapping[str, Any]

_TERMINAL: Final = frozenset({"completed", "incomplete", "failed"})


@dataclass(frozen=True, slots=True)
class ReduceMeta:
    """What one event reported besides the output (usage, errors, the end)."""

    usage: dict[str, Any] | None = None
    error: str | None = None
    """Readable message."""
    error_data: Any = None
    done: bool = False
    """`response.completed` / `incomplete` / `failed` seen."""
    status: str | None = None
    """"completed" | "incomplete" | "failed"."""
    response_id: str | None = None
    incomplete_reason: str | None = None
    """`response.incomplete_details.reason`, e.g. "max_output_tokens"."""


Result = tuple[list[Raw], ReduceMeta | None]


def reduce_event(
    event: dict[str, Any], output: Sequence[Mapping[str, Any]]
) -> tuple[list[Item], ReduceMeta | None]:
    """Apply one Responses streaming event to `output`; see the module invariants.

    The items it returns are `Item`s: each known kind keeps its shape (invariant 7)."""
    new, meta = _reduce(event, raw_items(output))
    return as_items(new), meta


def _reduce(event: dict[str, Any], output: Sequence[Raw]) -> Result:
    if not isinstance(event, Mapping):
        return list(output), None
    kind = event.get("type")
    if not isinstance(kind, str):
        return list(output), None
    text = _TEXT_EVENTS.get(kind)
    if text is not None:
        return _text_event(text, event, output), None
    part = _PART_EVENTS.get(kind)
    if part is not None:
        return _part_event(part, event, output), None
    handler = _HANDLERS.get(kind)
    if handler is None:
        return list(output), None
    return handler(event, output)


def response_object_to_output(obj: dict[str, Any]) -> tuple[list[Item], ReduceMeta]:
    """Read a non-streaming `response` object (or an error body) into items and meta."""
    resp: Mapping[str, Any] = obj if isinstance(obj, Mapping) else {}
    status = resp.get("status")
    if not isinstance(status, str):
        status = "failed" if isinstance(resp.get("error"), Mapping) else "completed"
    output, meta = _finish(resp, (), status)
    return as_items(output), meta


# --- text, refusal, reasoning and argument streams ------------------------------


@dataclass(frozen=True, slots=True)
class _TextSpec:
    """Where one text-bearing event writes: item type, part list, part key."""

    item_type: str
    field: str  # "content" | "summary"; "" for function-call arguments on the item
    index_key: str
    part_type: str
    key: str  # the text key inside the part (or on the item)
    source: str  # "delta" appends; any other event key sets the final value


def _text_spec(item_type: str, field: str, part_type: str, key: str, source: str) -> _TextSpec:
    index_key = "summary_index" if field == "summary" else "content_index"
    return _TextSpec(item_type, field, index_key, part_type, key, source)


_TEXT_EVENTS: Final[dict[str, _TextSpec]] = {
    "response.output_text.delta": _text_spec("message", "content", "output_text", "text", "delta"),
    "response.output_text.done": _text_spec("message", "content", "output_text", "text", "text"),
    "response.refusal.delta": _text_spec("message", "content", "refusal", "refusal", "delta"),
    "response.refusal.done": _text_spec("message", "content", "refusal", "refusal", "refusal"),
    "response.reasoning_summary_text.delta": _text_spec(
        "reasoning", "summary", "summary_text", "text", "delta"
    ),
    "response.reasoning_summary_text.done": _text_spec(
        "reasoning", "summary", "summary_text", "text", "text"
    ),
    "response.reasoning_text.delta": _text_spec(
        "reasoning", "content", "reasoning_text", "text", "delta"
    ),
    "response.reasoning_text.done": _text_spec(
        "reasoning", "content", "reasoning_text", "text", "text"
    ),
    "response.function_call_arguments.delta": _text_spec(
        "function_call", "", "", "arguments", "delta"
    ),
    "response.function_call_arguments.done": _text_spec(
        "function_call", "", "", "arguments", "arguments"
    ),
}


def _text_event(spec: _TextSpec, event: Event, output: Sequence[Raw]) -> list[Raw]:
    """Append a delta to, or set the final text of, one part (or the call's arguments)."""
    value = event.get(spec.source)
    if not isinstance(value, str):
        return list(output)
    append = spec.source == "delta"

    def merged(holder: Mapping[str, Any]) -> str:
        old = holder.get(spec.key)
        return ((old if isinstance(old, str) else "") + value) if append else value

    if not spec.field:
        name = event.get("name")

        def change(item: Raw) -> Raw:
            new = {**item, spec.key: merged(item)}
            if isinstance(name, str) and name and not item.get("name"):
                new["name"] = name  # some providers name the call only on `.done`
            return new

        return edit_item(event, output, spec.item_type, change)

    index = as_index(event.get(spec.index_key))
    blank: Part = {"type": spec.part_type, spec.key: ""}
    return edit_item(
        event,
        output,
        spec.item_type,
        lambda item: with_part(
            item,
            spec.field,
            0 if index is None else index,
            blank,
            lambda part: {**part, spec.key: merged(part)},
        ),
    )


# --- whole parts and annotations ------------------------------------------------


@dataclass(frozen=True, slots=True)
class _PartSpec:
    """A part-level event: which list it writes and how its index defaults."""

    field: str
    index_key: str
    append_default: bool  # `.added` without an index appends; `.done` targets 0


_PART_EVENTS: Final[dict[str, _PartSpec]] = {
    "response.content_part.added": _PartSpec("content", "content_index", True),
    "response.content_part.done": _PartSpec("content", "content_index", False),
    "response.reasoning_summary_part.added": _PartSpec("summary", "summary_index", True),
    "response.reasoning_summary_part.done": _PartSpec("summary", "summary_index", False),
}


def _part_event(spec: _PartSpec, event: Event, output: Sequence[Raw]) -> list[Raw]:
    """Put the event's `part` at its index (added: the empty part; done: the final one)."""
    part = event.get("part")
    if not isinstance(part, dict):
        return list(output)
    part_type = part.get("type")
    if spec.field == "summary" or part_type == "reasoning_text":
        item_type = "reasoning"
    else:
        item_type = "message"
    index = as_index(event.get(spec.index_key))
    if index is None and not spec.append_default:
        index = 0
    blank: Part = {"type": part_type if isinstance(part_type, str) else "output_text", "text": ""}
    return edit_item(
        event,
        output,
        item_type,
        lambda item: with_part(item, spec.field, index, blank, lambda _old: part),
    )


def _annotation_added(event: Event, output: Sequence[Raw]) -> Result:
    """`response.output_text.annotation.added`: a citation on one text part."""
    annotation = event.get("annotation")
    if not isinstance(annotation, dict):
        return list(output), None
    at = as_index(event.get("annotation_index"))
    content_index = as_index(event.get("content_index"))

    def update(part: Part) -> Part:
        raw = part.get("annotations")
        annotations = list(raw) if isinstance(raw, list) else []
        if at is not None and 0 <= at < len(annotations):
            annotations[at] = annotation
        else:
            annotations.append(annotation)
        return {**part, "annotations": annotations}

    blank: Part = {"type": "output_text", "text": ""}
    out = edit_item(
        event,
        output,
        "message",
        lambda item: with_part(
            item, "content", 0 if content_index is None else content_index, blank, update
        ),
    )
    return out, None


# --- whole items ------------------------------------------------------------------


def _same_item(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Same id, or the same call (`type` + `call_id`) under another id."""
    ident = b.get("id")
    if ident and a.get("id") == ident:
        return True
    call_id = b.get("call_id")
    return bool(call_id) and a.get("type") == b.get("type") and a.get("call_id") == call_id


def _find_same(output: Sequence[Raw], item: Mapping[str, Any]) -> int | None:
    for i, other in enumerate(output):
        if isinstance(other, Mapping) and _same_item(other, item):
            return i
    return None


def _item_added(event: Event, output: Sequence[Raw]) -> Result:
    """Insert at `output_index`, or replace an item it repeats (same id / call)."""
    item = event.get("item")
    out = list(output)
    if not isinstance(item, dict):
        return out, None
    same = _find_same(out, item)
    idx = as_index(event.get("output_index"))
    if same is not None:
        out[same] = item
    elif idx is not None and 0 <= idx < len(out):
        out.insert(idx, item)
    else:
        out.append(item)
    return out, None


def _item_done(event: Event, output: Sequence[Raw]) -> Result:
    """Replace the item at `output_index`, or the same item elsewhere, else append."""
    item = event.get("item")
    out = list(output)
    if not isinstance(item, dict):
        return out, None
    idx = as_index(event.get("output_index"))
    here = idx if idx is not None and 0 <= idx < len(out) else None
    same = _find_same(out, item)
    if here is not None and _same_item(out[here], item):
        out[here] = item
    elif same is not None:
        out[same] = item
    elif here is not None and type_of(out[here]) == item.get("type"):
        out[here] = item  # the provider changed the id since `output_item.added`
    else:
        out.append(item)
    return out, None


# --- response lifecycle -----------------------------------------------------------


def _response(event: Event) -> Mapping[str, Any]:
    resp = event.get("response")
    return resp if isinstance(resp, Mapping) else {}


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _started(event: Event, output: Sequence[Raw]) -> Result:
    """`response.created` / `in_progress` / `queued`: only the response id matters."""
    response_id = _str_or_none(_response(event).get("id"))
    return list(output), ReduceMeta(response_id=response_id) if response_id else None


def _settle(item: Raw, status: str) -> Raw:
    """A copy marked `status` if the item was still streaming; else the item itself."""
    if isinstance(item, Mapping) and item.get("status") == "in_progress":
        return {**item, "status": status}
    return item


def _error_message(error: Any, fallback: str) -> str:
    if isinstance(error, Mapping):
        message = error.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(error, str) and error:
        return error
    return fallback


def _finish(
    resp: Mapping[str, Any], current: Sequence[Raw], status: str
) -> tuple[list[Raw], ReduceMeta]:
    """The final output and meta of a response that ended with `status`."""
    final = resp.get("output")
    items = [i for i in final if isinstance(i, dict)] if isinstance(final, list) else []
    if not items:
        items = list(current)  # some providers end with an empty `output`
    done = status in _TERMINAL
    if done:
        item_status = "completed" if status == "completed" else "incomplete"
        items = [_settle(i, item_status) for i in items]
    usage = resp.get("usage")
    error = resp.get("error")
    details = resp.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, Mapping) else None
    meta = ReduceMeta(
        usage=dict(usage) if isinstance(usage, Mapping) else None,
        error=_error_message(error, "response failed") if status == "failed" or error else None,
        error_data=error,
        done=done,
        status=status,
        response_id=_str_or_none(resp.get("id")),
        incomplete_reason=_str_or_none(reason),
    )
    return items, meta


def _finisher(status: str) -> Callable[[Event, Sequence[Raw]], Result]:
    def handler(event: Event, output: Sequence[Raw]) -> Result:
        return _finish(_response(event), output, status)

    return handler


def _error_event(event: Event, output: Sequence[Raw]) -> Result:
    """Top-level `error` (`{type, code, message, param}`); some providers nest `error`."""
    nested = event.get("error")
    message = _error_message(event, "") or _error_message(nested, "provider error")
    data = {k: v for k, v in event.items() if k not in ("type", "sequence_number")}
    return list(output), ReduceMeta(error=message, error_data=data)


_HANDLERS: Final[dict[str, Callable[[Event, Sequence[Raw]], Result]]] = {
    "response.created": _started,
    "response.in_progress": _started,
    "response.queued": _started,
    "response.output_item.added": _item_added,
    "response.output_item.done": _item_done,
    "response.output_text.annotation.added": _annotation_added,
    "response.completed": _finisher("completed"),
    "response.incomplete": _finisher("incomplete"),
    "response.failed": _finisher("failed"),
    "error": _error_event,
}

EVENT_TYPES: Final = frozenset(_TEXT_EVENTS) | frozenset(_PART_EVENTS) | frozenset(_HANDLERS)
"""The event types the reducer reads: `error` and names starting with `response.`."""
