"""Finding and copying the item and the part a Responses event is about (`responses.parse`).

Invariants 3 and 4 of `core.formats.responses.parse` live here: an event finds
its item by `output_index`, else by `item_id`, else the last item of the right
type (`locate`), and a part index past the end pads with empty parts, up to
`MAX_PAD` (`with_part`). Nothing here mutates what it is given: an edit returns
a new list sharing the untouched items, with the touched item and part copied.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

__all__ = [
    "MAX_PAD",
    "Part",
    "Raw",
    "edit_item",
    "as_index",
    "locate",
    "new_item",
    "type_of",
    "with_part",
]

Event = Mapping[str, Any]
Part = dict[str, Any]
Raw = dict[str, Any]
"""An item as the reducer handles it: any kind alike, as a plain dict (the wire edge)."""

MAX_PAD: Final = 64
"""How far past the end a part index may point; more is treated as malformed."""


def as_index(value: Any) -> int | None:
    """An int index; None when absent; -1 (never valid) when present but not an int."""
    if value is None:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def type_of(item: Any) -> Any:
    return item.get("type") if isinstance(item, Mapping) else None


def locate(event: Event, output: Sequence[Raw], item_type: str) -> int | None:
    """Index of the target item, `len(output)` to create it, None to ignore the event."""
    n = len(output)
    idx = as_index(event.get("output_index"))
    if idx is not None and 0 <= idx < n and type_of(output[idx]) == item_type:
        return idx
    item_id = event.get("item_id")
    if isinstance(item_id, str) and item_id:
        for i, item in enumerate(output):
            if type_of(item) == item_type and item.get("id") == item_id:
                return i
    elif idx is None and n and type_of(output[-1]) == item_type:
        return n - 1  # neither index nor id: the item being streamed is the last one
    if idx is None or idx >= n:
        return n
    return None


def new_item(item_type: str, item_id: Any) -> Raw:
    """The item a delta creates when no `output_item.added` announced it."""
    ident = item_id if isinstance(item_id, str) else ""
    if item_type == "function_call":
        return {
            "type": "function_call",
            "id": ident,
            "call_id": "",
            "name": "",
            "arguments": "",
            "status": "in_progress",
        }
    if item_type == "reasoning":
        return {
            "type": "reasoning",
            "id": ident,
            "status": "in_progress",
            "summary": [],
            "content": [],
        }
    return {
        "type": "message",
        "id": ident,
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }


def edit_item(
    event: Event, output: Sequence[Raw], item_type: str, change: Callable[[Raw], Raw | None]
) -> list[Raw]:
    """Replace (or create) the event's target item with `change(item)`; None = no change."""
    i = locate(event, output, item_type)
    if i is None:
        return list(output)
    base = output[i] if i < len(output) else new_item(item_type, event.get("item_id"))
    new = change(base)
    out = list(output)
    if new is None:
        return out
    if i < len(out):
        out[i] = new
    else:
        out.append(new)
    return out


def with_part(
    item: Raw, field: str, index: int | None, blank: Part, update: Callable[[Part], Part | None]
) -> Raw | None:
    """A copy of `item` whose `field[index]` part is `update(part)`; index None appends."""
    raw = item.get(field)
    parts = list(raw) if isinstance(raw, list) else []
    if index is None:
        index = len(parts)
    if index < 0 or index > len(parts) + MAX_PAD:
        return None
    while len(parts) <= index:
        parts.append(dict(blank))
    part = parts[index]
    if not isinstance(part, dict):
        return None
    new = update(part)
    if new is None:
        return None
    parts[index] = new
    return {**item, field: parts}
