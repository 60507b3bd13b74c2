"""Tool calls written as text by a model behind a Responses API server (issue 14).

`TextCallEventAccumulator` is the `EventAccumulator` of a route with
`text_tool_calls`: the events of the response's message are held while its
text could still be a call (`core.text_calls.recogniser` decides, on the deltas as
they come). Invariants, as `core.text_calls.delta_mode` keeps them for deltas:

1. Nothing is lost or reordered: held events are fed on, in order, the moment
   the text is known to be text (plain text: at its first delta), at the
   latest at the end.
2. The response's own calls win: a native `function_call` item (or any other
   item after the message) releases what was held and stops the recognition.
3. Only a response that completed makes calls from text: one cut, failed,
   incomplete or with an error releases its message as it was.
4. A message that is wholly calls is replaced by one `function_call` item per
   call, in its place, built as the provider would have sent them (the
   reducer gives them fresh call ids); the message never reaches a listener.
   `response.completed` then goes on without its `output`, which still names
   the message: the items built here are the response's output.
5. Once decided, `feed_event_into` is the plain one again (no cost per event).

Reasoning arrives as its own items on this API, so no `<think>` block is
looked for in the message text.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from toolrelay.core.events import Event
from toolrelay.core.ids import new_id
from toolrelay.core.stream.event_accumulator import EventAccumulator
from toolrelay.core.text_calls.parse import TextCall
from toolrelay.core.text_calls.recogniser import TextCallRecogniser

__all__ = ["TextCallEventAccumulator"]

_ITEM_ADDED = "response.output_item.added"
_ITEM_DONE = "response.output_item.done"
_TEXT_DELTA = "response.output_text.delta"
_NOT_CALLS = frozenset({"response.incomplete", "response.failed", "error"})


class TextCallEventAccumulator(EventAccumulator):
    """`EventAccumulator` plus calls recognised in the message text, for `tools`."""

    def __init__(self, *, tools: Collection[str], **options: Any) -> None:
        super().__init__(**options)
        self._recogniser = TextCallRecogniser(tools)
        self._base = EventAccumulator.feed_event_into.__get__(self)
        self._held: list[dict[str, Any]] = []
        """The message's events, each owned (a copy when the caller keeps its own)."""
        self._message: int | None = None
        """The upstream `output_index` of the message being held."""
        self._deltas_seen = False
        if self._recogniser.passing:
            self._plain_from_now()

    def _plain_from_now(self) -> None:
        self.feed_event_into = self._base  # type: ignore[method-assign]

    def feed_event_into(
        self, event: dict[str, Any], kind: Any, out: list[Event], owned: bool
    ) -> None:
        if kind == "response.completed":
            self._decide(out, event, owned)
            return
        if kind in _NOT_CALLS:  # invariant 3
            self._release(out)
            self._base(event, kind, out, owned)
            return
        index = event.get("output_index")
        if self._message is None:  # before the message: reasoning items pass
            if kind == _ITEM_ADDED and _item_type(event) == "message":
                self._message = index if isinstance(index, int) else 0
                self._hold(event, owned)
                return
            if kind == _ITEM_ADDED and _item_type(event) != "reasoning":
                self._release(out)  # a native call came first: invariant 2
            self._base(event, kind, out, owned)
            return
        if index is not None and index != self._message:  # another item: invariant 2
            self._release(out)
            self._base(event, kind, out, owned)
            return
        self._hold(event, owned)
        if kind == _TEXT_DELTA:
            self._deltas_seen = True
            self._look_at(event.get("delta"), out)
        elif kind == _ITEM_DONE and not self._deltas_seen:  # a body without deltas
            self._look_at(_message_text(event.get("item")), out)

    def _hold(self, event: dict[str, Any], owned: bool) -> None:
        self._held.append(event if owned else dict(event))

    def _look_at(self, text: Any, out: list[Event]) -> None:
        if isinstance(text, str) and text:
            self._recogniser.feed(text)
        if self._recogniser.passing:
            self._release(out)

    def _release(self, out: list[Event]) -> None:
        """The held events go on as they came; the rest of the response too (invariant 5)."""
        self._recogniser.give_up()
        held, self._held = self._held, []
        self._plain_from_now()
        for event in held:
            self._base(event, event.get("type"), out, True)

    def _decide(self, out: list[Event], completed: dict[str, Any] | None, owned: bool) -> None:
        """The response completed: the held message is text, or the calls it makes."""
        _text, calls = self._recogniser.finish()  # with calls, the text is ""
        if not calls or self._message is None:
            self._release(out)
        else:
            self._held = []
            self._plain_from_now()
            for offset, call in enumerate(calls):
                self._add_call(self._message + offset, call, out)
            if completed is not None:
                completed = _without_output(completed)
                owned = True
        if completed is not None:
            self._base(completed, "response.completed", out, owned)

    def _add_call(self, index: int, call: TextCall, out: list[Event]) -> None:
        item = {
            "id": new_id("fc"),
            "type": "function_call",
            "call_id": "",  # a fresh one is given at the end (core.stream.accumulator, invariant 5)
            "name": call.name,
            "arguments": call.arguments,
        }
        added = {
            "type": _ITEM_ADDED,
            "output_index": index,
            "item": item | {"status": "in_progress"},
        }
        done = {"type": _ITEM_DONE, "output_index": index, "item": item | {"status": "completed"}}
        self._base(added, _ITEM_ADDED, out, True)
        self._base(done, _ITEM_DONE, out, True)

    def finish(self, *, truncated: bool = False) -> list[Event]:
        if self.finished:
            return []
        out: list[Event] = []
        if self._held:
            ended = not truncated and self.error is None and self.status in (None, "completed")
            if ended:
                self._decide(out, None, True)
            else:
                self._release(out)
        return out + super().finish(truncated=truncated)


def _item_type(event: Mapping[str, Any]) -> Any:
    item = event.get("item")
    return item.get("type") if isinstance(item, Mapping) else None


def _message_text(item: Any) -> str:
    parts = item.get("content") if isinstance(item, Mapping) else None
    if not isinstance(parts, list):
        return ""
    return "".join(
        p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str)
    )


def _without_output(event: dict[str, Any]) -> dict[str, Any]:
    response = event.get("response")
    if not isinstance(response, Mapping):
        return event
    return {**event, "response": {**response, "output": []}}
