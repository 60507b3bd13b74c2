"""Responses API events -> output items + client events (the events input mode).

Each event goes through the pure reducer (`core.formats.responses.parse.reduce_event`,
SPEC R4) and is forwarded with a turn-wide `output_index`; plain deltas are
batched by `DeltaBuffer` and folded in before the next structural event, the
same result as reducing each without quadratic copying. Shared invariants:
`core.stream.accumulator`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolrelay.core import events as ev
from toolrelay.core.events import BlankEvent, Event
from toolrelay.core.formats.chat_completions.parse import arguments_text
from toolrelay.core.formats.responses.parse import reduce_event
from toolrelay.core.items import Item, as_item, is_call, updated
from toolrelay.core.stream.accumulator import Accumulator
from toolrelay.core.stream.responses_buffer import DeltaBuffer
from toolrelay.core.tools.calls import split_calls
from toolrelay.core.turn.usage import normalise_usage

__all__ = ["EventAccumulator"]


class EventAccumulator(Accumulator):
    """Builds the items of one Responses API response from its events."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._deltas = DeltaBuffer()

    def _settled(self) -> list[Item]:
        self._items = self._deltas.fold(self._items)
        return self._items

    def feed_event(self, event: dict[str, Any], *, owned: bool = False) -> list[Event]:
        """One Responses API streaming event, reduced purely and forwarded.

        `owned`: the caller hands `event` over (a freshly parsed chunk), so a buffered
        delta's dict is reused as its forwarded event's data instead of copied.
        """
        out: list[Event] = []
        self.feed_event_into(event, event.get("type"), out, owned)
        return out

    def feed_event_into(
        self, event: dict[str, Any], kind: Any, out: list[Event], owned: bool
    ) -> None:
        """`out += feed_event(event)`; a buffered delta (the hot path) costs one append.
        `kind`: `event["type"]`, which the caller has read already (None if absent)."""
        if self._deltas.take(event, kind, self._items):
            if not self._quiet:
                if not owned:
                    event = dict(event)
                del event["type"]  # there: a buffered delta has a type
                event.pop("sequence_number", None)
                if self._offset:
                    event["output_index"] += self._offset
                made: Event = BlankEvent()
                made.type, made.data = kind, event
                out.append(made)
            return
        out += self._structural(event)

    def _structural(self, event: dict[str, Any]) -> list[Event]:
        """Anything but a buffered delta: through the reducer, forwarded, meta kept."""
        out: list[Event] = []
        self._items, meta = reduce_event(event, self._deltas.fold(self._items))
        index, kind = event.get("output_index"), event.get("type")
        if index.__class__ is int and kind.__class__ is str:  # forwarded to listeners as is
            data = dict(event)
            del data["type"]
            data.pop("sequence_number", None)
            data["output_index"] = self._offset + index
            out.append(Event(kind, data))
        if meta is not None:
            if meta.response_id:
                self.response_id = meta.response_id
            if meta.usage:
                self.usage = meta.usage
                out.append(ev.event(ev.CHAT_COMPLETION, {"usage": normalise_usage(meta.usage)}))
            if meta.status:
                self.status = meta.status
            if meta.error:
                out.extend(self._error(meta.error, meta.error_data))
        return out

    def _finish(self, status: str) -> list[Event]:
        """Settle items still in progress, give calls unique ids, split concatenated calls."""
        out: list[Event] = []
        items: list[Item] = []
        for i, item in enumerate(self._settled()):
            if item.get("status") == "in_progress":
                item = updated(item, status=status)
                out.append(
                    ev.event(ev.OUTPUT_ITEM_DONE, {"output_index": self._offset + i, "item": item})
                )
            items.append(item)
        self._items = items
        calls = [i for i, it in enumerate(items) if is_call(it)]
        for index in calls:
            out.extend(self._own_call(index))
        if status == "completed":
            for index in calls:
                if len(split_calls([self._items[index]])) > 1:
                    out.extend(self._split(index, status))
        return out

    def _own_call(self, index: int) -> list[Event]:
        """A call made usable, announced again if changed: a fresh id when its id is
        missing or taken, a string name, arguments as a string (object arguments as
        compact JSON, as the Chat Completions translator writes them)."""
        item: Mapping[str, Any] = self._items[index]  # as the provider sent it
        name, arguments = item.get("name"), item.get("arguments")
        fixed = {
            **item,
            "call_id": self._unique(item.get("call_id")),
            "name": name if name.__class__ is str else "",
            "arguments": arguments_text(arguments),
        }
        if fixed == item:
            return []
        self._items[index] = as_item(fixed)  # now a function_call in our shape
        return [self._done(index)]
