"""A deltas accumulator that turns tool calls written as text into real ones (issue 14).

`TextCallAccumulator` is a `DeltaAccumulator` whose content goes through a
`TextCallRecogniser` first (`core.text_tool_calls`). Calls it recognises are
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

from toolrelay.core.delta_accumulator import DeltaAccumulator
from toolrelay.core.deltas import Delta, TextDelta, ToolCallDelta
from toolrelay.core.events import Event
from toolrelay.core.text_tool_calls import TextCallRecogniser
from toolrelay.core.think_tags import TagConfig

__all__ = ["TextCallAccumulator"]


class TextCallAccumulator(DeltaAccumulator):
    """`DeltaAccumulator` plus calls recognised in text, for the tools named in `tools`."""

    def __init__(
        self, *, tools: Collection[str], tags: TagConfig | None = TagConfig(), **options: Any
    ) -> None:
        super().__init__(tags=tags, **options)
        reasoning = tags.reasoning if tags is not None else ()
        self._recogniser = TextCallRecogniser(tools, reasoning=reasoning)
        self.calls_from_text = 0
        """How many calls this response made in text (0: none, or not recognised)."""
        if self._recogniser.passing:
            self._plain_from_now()

    def _plain_from_now(self) -> None:
        """Invariant 4: the instance's `feed_into` becomes the base class's."""
        self.feed_into = super().feed_into  # type: ignore[method-assign]

    def feed_into(self, delta: Delta, out: list[Event]) -> None:
        recogniser = self._recogniser
        if type(delta) is TextDelta:
            text = recogniser.feed(delta.text)
            if recogniser.passing:
                self._plain_from_now()
            if text:
                super().feed_into(delta if text is delta.text else TextDelta(text), out)
        elif type(delta) is ToolCallDelta:  # invariant 2
            self._release(out)
            super().feed_into(delta, out)
        else:
            super().feed_into(delta, out)

    def _release(self, out: list[Event]) -> None:
        held = self._recogniser.give_up()
        self._plain_from_now()
        if held:
            super().feed_into(TextDelta(held), out)

    def finish(self, *, truncated: bool = False) -> list[Event]:
        if self.finished:
            return []
        out: list[Event] = []
        if truncated or self.error is not None or self.finish_reason == "length":  # inv. 3
            self._release(out)
            return out + super().finish(truncated=truncated)
        text, calls = self._recogniser.finish()
        self._plain_from_now()
        base = super().feed_into
        if text:
            base(TextDelta(text), out)
        for slot, call in enumerate(calls):
            base(ToolCallDelta(slot, None, call.name, call.arguments), out)
        if calls:
            self.calls_from_text = len(calls)
            if self.finish_reason in (None, "stop"):
                self.finish_reason = "tool_calls"
        return out + super().finish(truncated=truncated)
