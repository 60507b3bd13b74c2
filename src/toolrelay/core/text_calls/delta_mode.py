"""A deltas accumulator that turns tool calls written as text into real ones (issue 14).

`TextCallAccumulator` is a `DeltaAccumulator` whose content goes through a
`TextCallRecogniser` first (`core.text_calls.recogniser`). Calls it recognises are
fed to the accumulator as `ToolCallDelta`s with no id, exactly what a
provider's translator hands over, so they become the same `function_call`
items with the same fresh `call_…` ids and the same events. Invariants:

1. Text is never lost or reordered: what the recogniser holds is fed as
   text when it turns out to be text, at the latest at `finish()`.
2. The response's own tool calls win: a native `ToolCallDelta` releases what
   was held as text and stops the recognition.
3. A body that was cut, stopped at its token limit (`length`) or reported an
   error makes no calls from text: what was held is text (a response that did
   not end on its own runs no tool).
4. Once the content is known to be text, `feed_into` is the plain
   `DeltaAccumulator` one again: plain text costs one check per response.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from toolrelay.core.events import Event
from toolrelay.core.stream.delta_accumulator import DeltaAccumulator
from toolrelay.core.stream.deltas import Delta, ToolCallDelta
from toolrelay.core.stream.think_tags import TagConfig
from toolrelay.core.text_calls.recogniser import TextCallRecogniser

__all__ = ["TextCallAccumulator"]


class TextCallAccumulator(DeltaAccumulator):
    """`DeltaAccumulator` plus calls recognised in text, for the tools named in `tools`."""

    def __init__(
        self, *, tools: Collection[str], tags: TagConfig | None = TagConfig(), **options: Any
    ) -> None:
        super().__init__(tags=tags, **options)
        reasoning = tags.reasoning if tags is not None else ()
        self._recogniser = TextCallRecogniser(tools, reasoning=reasoning)
        self._base = DeltaAccumulator.feed_into.__get__(self)
        """The plain `feed_into` and lanes, bound once (invariant 4)."""
        self._plain_text = DeltaAccumulator.text.__get__(self)
        self._plain_arguments = DeltaAccumulator.arguments.__get__(self)
        if self._recogniser.passing:
            self._plain_from_now()

    @property
    def holding(self) -> bool:
        """Content is held back (it may be a call): the body has said something already."""
        return self._recogniser.holding

    def _plain_from_now(self) -> None:
        """Invariant 4: `feed_into` and the lanes (`core.stream.deltas.DeltaSink`) are the plain
        ones from now on; a translator calls the lanes directly, so both are replaced."""
        self.feed_into = self._base  # type: ignore[method-assign]
        self.text = self._plain_text  # type: ignore[method-assign]
        self.arguments = self._plain_arguments  # type: ignore[method-assign]

    def feed_into(self, delta: Delta, out: list[Event]) -> None:
        if type(delta) is ToolCallDelta:  # a native call (invariant 2)
            self._release(out)
        self._base(delta, out)  # text goes on to the `text` lane below

    def text(self, text: str, out: list[Event]) -> None:
        recogniser = self._recogniser
        shown = recogniser.feed(text)
        if recogniser.passing:
            self._plain_from_now()
        if shown:
            self._plain_text(shown, out)

    def arguments(self, slot: int, fragment: str, out: list[Event]) -> None:
        self._release(out)  # more of a native call (invariant 2)
        self._plain_arguments(slot, fragment, out)

    def _release(self, out: list[Event]) -> None:
        held = self._recogniser.give_up()
        self._plain_from_now()
        if held:
            self._plain_text(held, out)

    def finish(self, *, truncated: bool = False) -> list[Event]:
        if self.finished:
            return []
        out: list[Event] = []
        if truncated or self.error is not None or self.finish_reason == "length":  # inv. 3
            self._release(out)
            return out + super().finish(truncated=truncated)
        text, calls = self._recogniser.finish()
        self._plain_from_now()
        base = self._base
        if text:
            self._plain_text(text, out)
        for slot, call in enumerate(calls):
            base(ToolCallDelta(slot, None, call.name, call.arguments), out)
        if calls and self.finish_reason in (None, "stop"):
            self.finish_reason = "tool_calls"
        return out + super().finish(truncated=truncated)
