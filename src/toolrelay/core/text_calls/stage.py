"""The text-call stage: between a provider's translator and the accumulator (issue 14).

A model that writes its tool calls as text in its content (a ```` ```json ```` block,
`<tool_call>…</tool_call>`, …) gets real calls: `BodyReader` puts this stage in front
of the accumulator of either input mode, and it hands on what it is given, except
the content that may be a call, which it holds while `TextCallRecogniser`
(`core.text_calls.recogniser`) reads it, then hands on as text or as the calls it
makes. The accumulators know nothing of it.

- Deltas (Chat Completions, Ollama): `TextCallDeltas` is a `DeltaSink` whose
  output is deltas for the `DeltaAccumulator`; a call becomes `ToolCallDelta`s
  with no id, exactly what a translator hands over, so it becomes the same
  `function_call` item with a fresh `call_…` id and the same events.
- Responses API events: `TextCallEvents` holds the message's events; a message
  that is wholly calls is replaced by one `function_call` item per call, in its
  place, built as the provider would have sent them (the reducer gives them
  fresh call ids), and `response.completed` goes on without its `output`, which
  still names the message. Reasoning arrives as its own items there, so no
  `<think>` block is looked for in the message text.

Invariants, in both modes:

1. Nothing is lost or reordered: what is held is handed on, in order, the moment
   it is known to be text (plain text: at its first piece), at the latest at the end.
2. The response's own calls win: a native call (a `ToolCallDelta`, a
   `function_call` item or any item after the message) releases what was held
   and stops the recognition.
3. Only a response that ended on its own makes calls from text: one cut, stopped
   at its token limit (`length`), failed, incomplete or with an error hands on
   what was held as it was.
4. Once the content is known to be text, the stage's entry points are the
   accumulator's own bound methods (`_pass_from_now`): plain text costs one
   check per response, and nothing per piece after it.
5. With `made_up=True`, content that is wholly calls, some to tools not offered,
   goes on as nothing: it is kept in `invented` for the caller, which asks again
   (`engine.tool_select`, rule 8). Without it, such content is text.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from toolrelay.core.events import Event
from toolrelay.core.ids import new_id
from toolrelay.core.stream.delta_accumulator import DeltaAccumulator
from toolrelay.core.stream.deltas import Delta, FinishDelta, TextDelta, ToolCallDelta
from toolrelay.core.stream.event_accumulator import EventAccumulator
from toolrelay.core.text_calls.parse import TextCall
from toolrelay.core.text_calls.recogniser import TextCallRecogniser

__all__ = ["TextCallDeltas", "TextCallEvents"]

_Lane = Callable[[str, list[Event]], None]


class TextCallDeltas:
    """The deltas mode: a `DeltaSink` in front of `acc` (module doc)."""

    def __init__(
        self,
        tools: Collection[str],
        acc: DeltaAccumulator,
        *,
        reasoning: Sequence[tuple[str, str]] = (),
        made_up: bool = False,
    ) -> None:
        self._acc = acc
        self._recogniser = TextCallRecogniser(tools, reasoning=reasoning, made_up=made_up)
        # the `DeltaSink` lanes; the accumulator's own once the content is text (inv. 4)
        self.text: _Lane = self._text
        self.reasoning: _Lane = acc.reasoning
        self.arguments: Callable[[int, str, list[Event]], None] = self._arguments
        self.feed_into: Callable[[Delta, list[Event]], None] = self._feed_into
        if self._recogniser.passing:
            self._pass_from_now()

    @property
    def holding(self) -> bool:
        """Content is held back (it may be a call): the body has said something already."""
        return self._recogniser.holding

    @property
    def invented(self) -> str:
        """After `finish`: the content, when it was wholly calls, some to tools not offered."""
        return self._recogniser.invented

    def _pass_from_now(self) -> None:
        acc = self._acc
        self.text, self.arguments, self.feed_into = acc.text, acc.arguments, acc.feed_into

    def _feed_into(self, delta: Delta, out: list[Event]) -> None:
        if type(delta) is TextDelta:
            self._text(delta.text, out)
            return
        if type(delta) is ToolCallDelta:  # a native call (invariant 2)
            self._release(out)
        self._acc.feed_into(delta, out)

    def _text(self, text: str, out: list[Event]) -> None:
        recogniser = self._recogniser
        shown = recogniser.feed(text)
        if recogniser.passing:
            self._pass_from_now()
        if shown:
            self._acc.text(shown, out)

    def _arguments(self, slot: int, fragment: str, out: list[Event]) -> None:
        self._release(out)  # more of a native call (invariant 2)
        self._acc.arguments(slot, fragment, out)

    def _release(self, out: list[Event]) -> None:
        held = self._recogniser.give_up()
        self._pass_from_now()
        if held:
            self._acc.text(held, out)

    def finish(self, *, truncated: bool = False) -> list[Event]:
        """The end of the body, before the accumulator's `finish`: what was held goes on."""
        acc = self._acc
        out: list[Event] = []
        if acc.finished:
            return out
        if truncated or acc.error is not None or acc.finish_reason == "length":  # inv. 3
            self._release(out)
            return out
        text, calls = self._recogniser.finish()
        self._pass_from_now()
        if text:
            acc.text(text, out)
        for slot, call in enumerate(calls):
            acc.feed_into(ToolCallDelta(slot, None, call.name, call.arguments), out)
        if calls and acc.finish_reason in (None, "stop"):
            acc.feed_into(FinishDelta("tool_calls"), out)
        return out


_ITEM_ADDED = "response.output_item.added"
_ITEM_DONE = "response.output_item.done"
_TEXT_DELTA = "response.output_text.delta"
_NOT_CALLS = frozenset({"response.incomplete", "response.failed", "error"})

_EventLane = Callable[[dict[str, Any], Any, list[Event], bool], None]


class TextCallEvents:
    """The Responses events mode: `feed_event_into` in front of `acc` (module doc)."""

    def __init__(
        self, tools: Collection[str], acc: EventAccumulator, *, made_up: bool = False
    ) -> None:
        self._acc = acc
        self._recogniser = TextCallRecogniser(tools, made_up=made_up)
        self._held: list[dict[str, Any]] = []
        """The message's events, each owned (a copy when the caller keeps its own)."""
        self._message: int | None = None
        """The upstream `output_index` of the message being held."""
        self._deltas_seen = False
        self.feed_event_into: _EventLane = self._feed_event_into
        """`EventAccumulator.feed_event_into`, through the stage until it is decided."""
        if self._recogniser.passing:
            self._pass_from_now()

    @property
    def invented(self) -> str:
        """After the end: the message's text, when it was wholly calls, some not offered."""
        return self._recogniser.invented

    def _pass_from_now(self) -> None:
        self.feed_event_into = self._acc.feed_event_into

    def feed_event(self, event: dict[str, Any], *, owned: bool = False) -> list[Event]:
        out: list[Event] = []
        self.feed_event_into(event, event.get("type"), out, owned)
        return out

    def _feed_event_into(
        self, event: dict[str, Any], kind: Any, out: list[Event], owned: bool
    ) -> None:
        base = self._acc.feed_event_into
        if kind == "response.completed":
            self._decide(out, event, owned)
            return
        if kind in _NOT_CALLS:  # invariant 3
            self._release(out)
            base(event, kind, out, owned)
            return
        index = event.get("output_index")
        if self._message is None:  # before the message: reasoning items pass
            if kind == _ITEM_ADDED and _item_type(event) == "message":
                self._message = index if isinstance(index, int) else 0
                self._hold(event, owned)
                return
            if kind == _ITEM_ADDED and _item_type(event) != "reasoning":
                self._release(out)  # a native call came first: invariant 2
            base(event, kind, out, owned)
            return
        if index is not None and index != self._message:  # another item: invariant 2
            self._release(out)
            base(event, kind, out, owned)
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
        """The held events go on as they came; the rest of the response too (invariant 4)."""
        self._recogniser.give_up()
        held, self._held = self._held, []
        self._pass_from_now()
        base = self._acc.feed_event_into
        for event in held:
            base(event, event.get("type"), out, True)

    def _decide(self, out: list[Event], completed: dict[str, Any] | None, owned: bool) -> None:
        """The response completed: the held message is text, or the calls it makes."""
        _text, calls = self._recogniser.finish()  # with calls, the text is ""
        if self._recogniser.invented:  # invariant 5: the message goes nowhere
            self._held = []
            self._pass_from_now()
            if completed is not None:
                completed, owned = _without_output(completed), True
        elif not calls or self._message is None:
            self._release(out)
        else:
            self._held = []
            self._pass_from_now()
            for offset, call in enumerate(calls):
                self._add_call(self._message + offset, call, out)
            if completed is not None:
                completed = _without_output(completed)
                owned = True
        if completed is not None:
            self._acc.feed_event_into(completed, "response.completed", out, owned)

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
        base = self._acc.feed_event_into
        base(added, _ITEM_ADDED, out, True)
        base(done, _ITEM_DONE, out, True)

    def finish(self, *, truncated: bool = False) -> list[Event]:
        """The end of the body, before the accumulator's `finish`: what was held goes on."""
        acc = self._acc
        out: list[Event] = []
        if acc.finished or not self._held:
            return out
        if not truncated and acc.error is None and acc.status in (None, "completed"):
            self._decide(out, None, True)
        else:
            self._release(out)
        return out


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
