"""Batches Responses API delta events between structural events.

The pure reducer (`core.formats.responses.parse.reduce_event`) copies the touched item and
concatenates strings on every delta: fine per event, quadratic over a long
stream. `DeltaBuffer` holds the commonest deltas — text, reasoning text,
summary text and arguments aimed at an item and part that already exist —
as string pieces, and folds them into the items (in one join per part)
before the reducer sees any other event, or whenever the output is read.
Anything it is not sure about goes to the reducer untouched, so results are
identical to reducing every event one by one (a property test checks this).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from toolrelay.core.items import Item, as_items, raw_items

# event type → (item type, parts key or None for `arguments`, index key)
_FAST: Final[dict[str, tuple[str, str | None, str | None]]] = {
    "response.output_text.delta": ("message", "content", "content_index"),
    "response.reasoning_text.delta": ("reasoning", "content", "content_index"),
    "response.reasoning_summary_text.delta": ("reasoning", "summary", "summary_index"),
    "response.function_call_arguments.delta": ("function_call", None, None),
}

Key = tuple[int, str | None, int]


class DeltaBuffer:
    __slots__ = ("_last", "_pending")

    def __init__(self) -> None:
        self._pending: dict[Key, list[str]] = {}
        # (event type, output index, part index, pieces, part-index key) of the last delta
        # taken: the next one usually continues it, and items cannot change until `fold`
        self._last: tuple[Any, Any, Any, list[str], str | None] | None = None

    def take(self, event: dict[str, Any], kind: Any, items: Sequence[Mapping[str, Any]]) -> bool:
        """Buffer `event` (of type `kind`, its `type`) if it is a plain delta for an
        existing item and part."""
        last = self._last
        if last is not None and kind == last[0]:  # the hot path: more of the same part
            delta = event.get("delta")
            if (
                delta.__class__ is str
                and event.get("output_index") == last[1]
                and (last[4] is None or event.get(last[4], 0) == last[2])
            ):
                last[3].append(delta)
                return True
        shape = _FAST.get(kind) if kind.__class__ is str else None
        if shape is None:
            return False
        index, delta = event.get("output_index"), event.get("delta")
        if index.__class__ is not int or delta.__class__ is not str or not 0 <= index < len(items):
            return False
        item = items[index]
        item_type, parts_key, index_key = shape
        if item.get("type") != item_type:
            return False
        key: Key
        if parts_key is None:
            if item.get("arguments", "").__class__ is not str:
                return False
            key = (index, None, 0)
        else:
            sub = event.get(index_key, 0) if index_key else 0
            parts = item.get(parts_key)
            if sub.__class__ is not int or parts.__class__ is not list or not 0 <= sub < len(parts):
                return False
            part = parts[sub]
            if part.__class__ is not dict or part.get("text", "").__class__ is not str:
                return False
            key = (index, parts_key, sub)
        pieces = self._pending.get(key)
        if pieces is None:
            pieces = self._pending[key] = [delta]
        else:
            pieces.append(delta)
        self._last = (kind, index, key[2], pieces, index_key)
        return True

    def fold(self, items: list[Item]) -> list[Item]:
        """Apply what is buffered; returns the list with the touched items replaced by copies."""
        if not self._pending:
            return items
        self._last = None
        raw = list(raw_items(items))  # any kind of item alike: a wire-level edit
        for (index, parts_key, sub), pieces in self._pending.items():
            item = dict(raw[index])
            text = "".join(pieces)
            if parts_key is None:
                item["arguments"] = item.get("arguments", "") + text
            else:
                parts = list(item[parts_key])
                part = dict(parts[sub])
                part["text"] = part.get("text", "") + text
                parts[sub] = part
                item[parts_key] = parts
            raw[index] = item
        self._pending.clear()
        return as_items(raw)
