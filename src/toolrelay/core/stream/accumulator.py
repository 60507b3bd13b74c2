"""A model response -> output items + client events: what both input modes share.

A response arrives in one of two input modes, each with its own class:
`DeltaAccumulator` (`core.stream.delta_accumulator`) takes the normalised deltas of
Chat Completions and Ollama; `EventAccumulator` (`core.stream.event_accumulator`)
takes Responses API events through the pure reducer. `core.stream.reader.BodyReader`
picks one per response. Both end with `finish()`. What was said about the response
rather than its items (usage, finish reason, error, id, status) is a `ResponseFacts`
value an accumulator may share: the reader's two share one, so what a body said
before its first Responses event counts, with nothing copied. Invariants:

1. Items get stable ids when created and are announced once with
   `response.output_item.added`; a function_call is announced as soon as its
   name is known, before its arguments finish.
2. Text is buffered per open item and joined on demand, so appending is O(1)
   per delta; `output` materialises a snapshot the caller may keep.
3. Every item announced is closed by `finish()` with `response.output_item.done`:
   `completed` after a clean end, `incomplete` when the body was cut or failed.
4. Output indexes in events are turn-wide: `offset` counts the items earlier
   iterations of the turn already produced.
5. Call ids are unique across the conversation: a missing or reused id
   (providers such as Kimi restart theirs each round) is replaced by a fresh
   one, so a call and its result always pair up (reference §2.4).

No clock is read unless one is injected (reasoning durations need it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.ids import new_id
from toolrelay.core.items import FunctionCallItem, Item, copy_item, is_call, updated
from toolrelay.core.stream.deltas import Delta, ErrorDelta, FinishDelta, ResponseIdDelta, UsageDelta
from toolrelay.core.tools.calls import split_calls
from toolrelay.core.turn.usage import normalise_usage

__all__ = ["Accumulator", "Clock", "ResponseFacts"]

Clock = Callable[[], float]


class ResponseFacts:
    """What a response said about itself, apart from its items (module doc)."""

    __slots__ = ("error", "error_data", "finish_reason", "response_id", "status", "usage")

    def __init__(self) -> None:
        self.usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.error: str | None = None
        self.error_data: Any = None
        self.response_id: str | None = None
        self.status: str | None = None


class Accumulator:
    """The items of one model response and what was said about it (module doc)."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        offset: int = 0,
        quiet: bool = False,
        call_ids: Iterable[str] = (),
        facts: ResponseFacts | None = None,
    ) -> None:
        self.facts = ResponseFacts() if facts is None else facts
        self._items: list[Item] = []
        self._call_ids = set(call_ids)
        """Call ids already taken in the conversation or this response (invariant 5)."""
        self._offset = offset
        self._quiet = quiet
        """Nobody listens: the per-chunk delta events are not built (items are the same)."""
        self._clock = clock
        self.code_closed = False
        self.finished = False

    # -- what was said about the response (`facts`) ------------------------------
    @property
    def usage(self) -> dict[str, Any] | None:
        return self.facts.usage

    @usage.setter
    def usage(self, value: dict[str, Any] | None) -> None:
        self.facts.usage = value

    @property
    def finish_reason(self) -> str | None:
        return self.facts.finish_reason

    @finish_reason.setter
    def finish_reason(self, value: str | None) -> None:
        self.facts.finish_reason = value

    @property
    def error(self) -> str | None:
        return self.facts.error

    @error.setter
    def error(self, value: str | None) -> None:
        self.facts.error = value

    @property
    def error_data(self) -> Any:
        return self.facts.error_data

    @error_data.setter
    def error_data(self, value: Any) -> None:
        self.facts.error_data = value

    @property
    def response_id(self) -> str | None:
        return self.facts.response_id

    @response_id.setter
    def response_id(self, value: str | None) -> None:
        self.facts.response_id = value

    @property
    def status(self) -> str | None:
        return self.facts.status

    @status.setter
    def status(self, value: str | None) -> None:
        self.facts.status = value

    # -- reading -----------------------------------------------------------
    @property
    def output(self) -> list[Item]:
        """A copy of the items so far, open parts materialised."""
        return [copy_item(i) for i in self._settled()]

    def function_calls(self) -> list[FunctionCallItem]:
        """Completed function_call items of this response (split per R6), in order."""
        return [i for i in self._settled() if is_call(i)]

    def _settled(self) -> list[Item]:
        """The items with everything buffered folded in (a mode may buffer)."""
        return self._items

    # -- feeding -----------------------------------------------------------
    def feed(self, delta: Delta) -> list[Event]:
        out: list[Event] = []
        self.feed_into(delta, out)
        return out

    def feed_many(self, deltas: Iterable[Delta]) -> list[Event]:
        out: list[Event] = []
        for delta in deltas:
            self.feed_into(delta, out)
        return out

    def feed_into(self, delta: Delta, out: list[Event]) -> None:
        """`out += feed(delta)`: here, what a delta says about the response; an item it
        would build counts only in the deltas mode (`DeltaAccumulator` builds it)."""
        out += self._about_response(delta)

    def _about_response(self, delta: Delta) -> list[Event]:
        """Deltas that say something about the response, not its items."""
        match delta:
            case UsageDelta(usage):
                self.usage = usage
                return [ev.event(ev.CHAT_COMPLETION, {"usage": normalise_usage(usage)})]
            case FinishDelta(reason):
                self.finish_reason = reason
            case ErrorDelta(message, data):
                return self._error(message, data)
            case ResponseIdDelta(response_id):
                self.response_id = response_id
        return []

    def _error(self, message: str, data: Any) -> list[Event]:
        self.error = message
        self.error_data = data
        return [ev.event(ev.CHAT_MESSAGE_ERROR, {"error": {"content": message}})]

    # -- end ---------------------------------------------------------------
    def finish(self, *, truncated: bool = False) -> list[Event]:
        """Close every open item; split concatenated calls (R6). Idempotent."""
        if self.finished:
            return []
        self.finished = True
        return self._finish("incomplete" if truncated or self.error else "completed")

    def _finish(self, status: str) -> list[Event]:
        """Close the items (each input mode its own way) with `status`; their events."""
        raise NotImplementedError

    # -- item plumbing -------------------------------------------------------
    def _announce(self, item: Item, index: int) -> Event:
        return ev.event(ev.OUTPUT_ITEM_ADDED, self._item_data(item, index))

    def _done(self, index: int) -> Event:
        return ev.event(ev.OUTPUT_ITEM_DONE, self._item_data(self._items[index], index))

    def _item_data(self, item: Item, index: int) -> ev.ItemData:
        """A snapshot for listeners; quiet, nobody looks, so it is not copied."""
        return {
            "output_index": self._offset + index,
            "item": item if self._quiet else copy_item(item),
        }

    def _unique(self, call_id: Any) -> str:
        """`call_id`, or a fresh id when it is missing or already taken (invariant 5)."""
        if call_id.__class__ is not str or not call_id or call_id in self._call_ids:
            call_id = new_id("call")
        self._call_ids.add(call_id)
        return str(call_id)

    def _split(self, index: int, status: str) -> list[Event]:
        """Close the call at `index`, split into one call per argument object (R6)."""
        item = self._items[index]
        assert is_call(item)
        parts = split_calls([item]) if status == "completed" else [item]
        # a copy; the first part keeps the item's id: the client replaces the item it shows
        self._items[index] = updated(parts[0], id=item["id"])
        out = [self._done(index)]
        for extra in parts[1:]:
            self._call_ids.add(extra["call_id"])
            self._items.append(extra)
            out.append(self._announce(self._items[-1], len(self._items) - 1))
            out.append(self._done(len(self._items) - 1))
        return out
