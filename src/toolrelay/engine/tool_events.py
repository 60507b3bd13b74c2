"""A batch's tool-emitted events applied to the turn (`core.tools.emitted_events` says what each means).

Each call of a batch gets its own `__event_emitter__` (`emitter(call_id)`),
so what a tool emits lands on its own call. Everything goes out through the
turn's `emit` (the coalescer): in order with the rest of the turn, `source`
events seen by the loop, which re-injects them as citation markers (R11).

- Text (`message`, `replace`) goes into one message item per batch, placed
  right after the batch's `function_call_output` items (`index`): it is
  announced with `response.output_item.added` at the first text, grows by
  `response.output_text.delta` (merged by the coalescer like the model's
  own text), is replaced with a `chat:message` event `{item_id,
  output_index, content}`, and is closed (`response.output_item.done`) when
  the batch ends. The model reads it in later rounds as the answer's text,
  and the saved turn keeps it.
- Files, statuses and sources are kept per call and put on that call's
  output item (`files`, `statuses`, `sources`) when it is built, so a saved
  chat shows them again after a reload.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.items import FunctionCallOutputItem, Item, updated
from toolrelay.core.tools.emitted_events import read_tool_event, with_marks, with_text
from toolrelay.engine.interfaces import EventEmitter

Emit = Callable[[Event], Awaitable[None]]


class BatchEvents:
    """What the tools of one batch emit, applied as they emit it."""

    def __init__(self, emit: Emit, index: int) -> None:
        self._emit = emit
        self.index = index
        """Where the batch's message item goes: after the batch's outputs."""
        self.message: Item | None = None
        self._marks: dict[str, dict[str, list[dict[str, Any]]]] = {}

    def emitter(self, call_id: str | None) -> EventEmitter:
        """The `__event_emitter__` of one call."""

        async def emit(event: dict[str, Any]) -> None:
            await self.apply(call_id, event)

        return emit

    async def apply(self, call_id: str | None, event: Any) -> None:
        read = read_tool_event(event if isinstance(event, dict) else {})
        data = read.data
        if read.kind in ("append", "replace"):
            await self._text(read.text, replace=read.kind == "replace")
            return
        if call_id is not None:
            data = {**data, "call_id": call_id} if read.kind in ("status", "files") else data
            key = {"files": "files", "status": "statuses", "source": "sources"}.get(read.kind)
            if key is not None:
                marks = self._marks.setdefault(call_id, {})
                added = list(read.files) if read.kind == "files" else [read.data]
                marks.setdefault(key, []).extend(added)
        await self._emit(Event(read.type, data))

    async def _text(self, text: str, *, replace: bool) -> None:
        first = self.message is None
        item = self.message = with_text(self.message, text, replace=replace)
        if first:
            empty = updated(item, content=[{"type": "output_text", "text": ""}])
            await self._emit(
                ev.event(ev.OUTPUT_ITEM_ADDED, {"output_index": self.index, "item": empty})
            )
        if replace:
            await self._emit(
                ev.event(
                    ev.CHAT_MESSAGE,
                    {"item_id": item["id"], "output_index": self.index, "content": text},
                )
            )
        elif text:
            await self._emit(
                ev.event(
                    ev.OUTPUT_TEXT_DELTA,
                    {
                        "item_id": item["id"],
                        "output_index": self.index,
                        "content_index": 0,
                        "delta": text,
                    },
                )
            )

    def marked(self, output: FunctionCallOutputItem) -> FunctionCallOutputItem:
        """A call's output item with what its tool emitted while it ran."""
        marks = self._marks.pop(str(output.get("call_id")), None)
        return with_marks(output, marks) if marks else output

    async def close(self) -> list[Item]:
        """The batch's message item, completed (`[]` when no tool wrote text)."""
        if self.message is None:
            return []
        item = self.message = updated(self.message, status="completed")
        await self._emit(ev.event(ev.OUTPUT_ITEM_DONE, {"output_index": self.index, "item": item}))
        return [item]
