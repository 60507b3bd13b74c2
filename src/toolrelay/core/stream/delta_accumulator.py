"""Normalised deltas -> output items + client events (the deltas input mode).

Chat Completions chunks and Ollama lines arrive here as `core.stream.deltas` values.
Text and reasoning go into one open item at a time (inline `<think>` and
`<code_interpreter>` tags cut it, SPEC R5); tool-call fragments build one
`function_call` per slot, whose arguments are joined at `finish()` and split
when they hold several objects (R6). Shared invariants: `core.stream.accumulator`.

The common deltas (more text, reasoning or arguments for what is already
open) have lanes, `text`, `reasoning` and `arguments` (`core.stream.deltas.DeltaSink`):
a translator's hot path calls them with the string, so no delta is built per
chunk, and `feed_into` dispatches to the same lanes, so each delta has one
meaning. A lane's common case is inline: one append and, unless quiet, one
event. What intercepts deltas sits in front of the lanes, not under them (the
text-call stage, `core.text_calls.stage`, is a `DeltaSink` feeding these).
"""

from __future__ import annotations

from typing import Any, Literal

from toolrelay.core import events as ev
from toolrelay.core.events import BlankEvent, Event
from toolrelay.core.ids import new_id
from toolrelay.core.items import (
    CodeInterpreterItem,
    FunctionCallItem,
    Item,
    TextItem,
    code_interpreter_item,
    copy_item,
    merge_reasoning_details,
    new_text_item,
    updated,
)
from toolrelay.core.stream.accumulator import Accumulator
from toolrelay.core.stream.deltas import (
    CitationDelta,
    Delta,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from toolrelay.core.stream.think_tags import Chunk, Close, Open, TagConfig, TagSplitter

__all__ = ["DeltaAccumulator"]

_OpenItem = TextItem | CodeInterpreterItem
"""The item streamed text goes into (all literal kinds: `item["type"]` narrows it)."""

_TEXT_KINDS = {"message": ev.OUTPUT_TEXT_DELTA, "reasoning": ev.REASONING_TEXT_DELTA}
_CODE_DELTA = "response.code_interpreter_call_code.delta"


class DeltaAccumulator(Accumulator):
    """Builds the items of one Chat Completions or Ollama response from its deltas."""

    def __init__(self, *, tags: TagConfig | None = TagConfig(), **options: Any) -> None:
        super().__init__(**options)
        self._splitter: TagSplitter | None = None
        self._tags = tags
        self._native_reasoning = True
        """Reasoning deltas go straight into the open reasoning item (no `<think>` tags)."""
        self._use_tags(tags)
        # the item receiving streamed text, its buffer and its kind
        self._open: _OpenItem | None = None
        self._open_kind: str | None = None
        self._open_data: dict[str, Any] = {}
        """What the open item's delta events say but the delta: each is a copy of it
        (a dict copy costs less than building the dict)."""
        self._open_index = -1
        self._buffer: list[str] = []
        self._pending_ws = ""
        self._tag_kind = "text"
        self._slots: dict[int, _Call] = {}

    @property
    def output(self) -> list[Item]:
        """A copy of the items so far, open text and arguments materialised."""
        items = [copy_item(i) for i in self._items]
        if self._open is not None and self._buffer:
            items[self._open_index] = self._materialised(self._open)
        for call in self._slots.values():
            if call.item is not None and call.args:
                items[call.index] = updated(call.item, arguments="".join(call.args))
        return items

    # -- feeding -------------------------------------------------------------
    def feed_into(self, delta: Delta, out: list[Event]) -> None:
        """`out += feed(delta)`; the commonest deltas go to their lanes (module doc)."""
        if type(delta) is TextDelta:
            self.text(delta.text, out)
        elif type(delta) is ToolCallDelta:
            if delta.name is None and delta.call_id is None:
                self.arguments(delta.slot, delta.arguments, out)
            else:
                out += self._tool_call(delta)
        elif type(delta) is ReasoningDelta:
            if delta.details:
                out += self._reasoning(delta.text, delta.details)
            else:
                self.reasoning(delta.text, out)
        elif type(delta) is CitationDelta:
            out += self._citation(delta.url, delta.title)
        else:
            out += self._about_response(delta)

    def text(self, text: str, out: list[Event]) -> None:
        """Visible text: more of the open message when it holds no inline tag."""
        splitter = self._splitter
        if (
            self._open_kind == "message"
            and text
            and (
                splitter is None
                or (splitter.mark1 not in text and splitter.mark2 not in text)
                or splitter.plain(text)
            )
        ):
            self._buffer.append(text)
            if not self._quiet:
                data = self._open_data.copy()
                data["delta"] = text
                event: Event = BlankEvent()
                event.type, event.data = ev.OUTPUT_TEXT_DELTA, data
                out.append(event)
        else:
            out += self._text_delta(text)

    def reasoning(self, text: str, out: list[Event]) -> None:
        """Reasoning text: more of the open reasoning item when no tags are looked for."""
        if text and self._open_kind == "reasoning" and self._native_reasoning:
            self._buffer.append(text)
            if not self._quiet:
                data = self._open_data.copy()
                data["delta"] = text
                event: Event = BlankEvent()
                event.type, event.data = ev.REASONING_TEXT_DELTA, data
                out.append(event)
        else:
            out += self._reasoning(text, ())

    def arguments(self, slot: int, fragment: str, out: list[Event]) -> None:
        """More arguments for the call in `slot` (no id, no name)."""
        call = self._slots.get(slot)
        if fragment and call is not None and call.item is not None:
            call.args.append(fragment)
            if not self._quiet:  # `_arguments_event`, inline
                data = call.data.copy()
                data["delta"] = fragment
                event: Event = BlankEvent()
                event.type, event.data = ev.FUNCTION_CALL_ARGUMENTS_DELTA, data
                out.append(event)
        else:
            out += self._tool_call(ToolCallDelta(slot, None, None, fragment))

    def _use_tags(self, tags: TagConfig | None) -> None:
        """Look for these inline tags from now on (None: none at all)."""
        self._tags = tags
        # no tag family at all (native reasoning switched them off): no splitter to ask
        self._splitter = TagSplitter(tags) if tags is not None and tags.pairs() else None
        self._native_reasoning = tags is None or not tags.reasoning

    def _more_text(self, item: _OpenItem, text: str) -> Event:
        """Append to the open item's buffer; its delta event."""
        self._buffer.append(text)
        data = {
            "item_id": item["id"],
            "output_index": self._offset + self._open_index,
            "content_index": 0,
            "delta": text,
        }
        return Event(_TEXT_KINDS[item["type"]], data)

    def _text_delta(self, text: str) -> list[Event]:
        """Text that may hold inline tags, or that starts a new item."""
        splitter = self._splitter
        if splitter is None:
            return self._text("message", text)
        if splitter.passes(text):
            return self._chunk(splitter.inside, text)
        return self._segments(splitter.feed(text))

    def _text(self, kind: Literal["message", "reasoning"], text: str) -> list[Event]:
        if not text:
            return []
        item = self._open
        if item is not None and item["type"] == kind:  # more of the same item
            return [self._more_text(item, text)]
        if kind == "message" and not self._slots and not self._pending_ws + text.strip():
            self._pending_ws += text  # whitespace only never opens a response's first message
            return []
        if kind == "message":
            text = self._pending_ws + text
        self._pending_ws = ""
        out = self._close_open("completed")
        new = new_text_item(kind)
        out.append(self._start(new))
        out.append(self._more_text(new, text))
        return out

    def _reasoning(self, text: str, details: tuple[dict[str, Any], ...]) -> list[Event]:
        tags, splitter = self._tags, self._splitter
        if (
            splitter is not None
            and tags is not None
            and tags.reasoning
            and splitter.inside == "text"
        ):
            # a provider with a native reasoning field: stop looking for <think> tags
            out = self._segments(splitter.flush())
            self._use_tags(
                TagConfig(reasoning=(), solution=False, code_interpreter=tags.code_interpreter)
            )
            return out + self._reasoning(text, details)
        out = self._text("reasoning", text) if text else []
        if details:
            if self._open is None or self._open["type"] != "reasoning":
                out.extend(self._close_open("completed"))
                out.append(self._start(new_text_item("reasoning")))
            assert self._open is not None and self._open["type"] == "reasoning"
            merge_reasoning_details(self._open.setdefault("details", []), details)
        return out

    def _segments(self, segments: list[Any]) -> list[Event]:
        out: list[Event] = []
        for seg in segments:
            match seg:
                case Chunk(kind, text):
                    out.extend(self._chunk(kind, text))
                case Open(kind, attributes, _tag):
                    self._tag_kind = kind
                    out.extend(self._close_open("completed"))
                    self._pending_ws = ""
                    if kind == "code_interpreter":
                        lang = attributes.get("lang") or "python"
                        code = code_interpreter_item(lang=lang, attributes=attributes)
                        out.append(self._start(code))
                    else:
                        opened = new_text_item("reasoning" if kind == "reasoning" else "message")
                        if attributes:
                            opened["attributes"] = attributes
                        out.append(self._start(opened))
                case Close(kind):
                    self._tag_kind = "text"
                    if kind == "code_interpreter":
                        self.code_closed = True
                    out.extend(self._close_open("completed"))
        return out

    def _chunk(self, kind: str, text: str) -> list[Event]:
        if kind == "reasoning":
            return self._text("reasoning", text)
        if kind == "code_interpreter":
            if self._open is None or self._open["type"] != "code_interpreter":
                return self._text("message", text)
            self._buffer.append(text)
            data = {"item_id": self._open["id"], "output_index": self._offset + self._open_index}
            return [Event(_CODE_DELTA, {**data, "delta": text})]
        return self._text("message", text)

    def _tool_call(self, delta: ToolCallDelta) -> list[Event]:
        out: list[Event] = []
        call = self._slots.get(delta.slot)
        if call is None:
            out.extend(self._close_open("completed"))
            self._pending_ws = ""  # whitespace before the first call leads nothing
            call = self._slots[delta.slot] = _Call(self._unique(delta.call_id))
        if delta.name and not call.name:
            call.name = delta.name
        if delta.arguments:
            call.args.append(delta.arguments)
        if call.item is None:
            if not call.name:
                return out
            call.item = {
                "type": "function_call",
                "id": new_id("fc"),
                "call_id": call.call_id,
                "name": call.name,
                "arguments": "",
                "status": "in_progress",
            }
            call.index = len(self._items)
            call.data = {
                "item_id": call.item["id"],
                "output_index": self._offset + call.index,
                "delta": "",
            }
            self._items.append(call.item)
            out.append(self._announce(call.item, call.index))
            delta_text = "".join(call.args)
        else:
            delta_text = delta.arguments
        if delta_text:
            out.append(self._arguments_event(call, delta_text))
        return out

    def _arguments_event(self, call: _Call, text: str) -> Event:
        data = call.data.copy()  # as `_open_data`
        data["delta"] = text
        event: Event = BlankEvent()
        event.type, event.data = ev.FUNCTION_CALL_ARGUMENTS_DELTA, data
        return event

    def _citation(self, url: str, title: str | None) -> list[Event]:
        name = title or url
        if self._open is not None and self._open["type"] == "message":
            part = self._open["content"][0]
            part.setdefault("annotations", []).append(
                {"type": "url_citation", "url": url, "title": name}
            )
        source: ev.SourceData = {
            "source": {"name": name, "url": url},
            "document": [name],
            "metadata": [{"source": url, "name": name}],
        }
        return [ev.event(ev.SOURCE, source)]

    # -- end -----------------------------------------------------------------
    def _finish(self, status: str) -> list[Event]:
        out: list[Event] = []
        if self._splitter is not None:
            out.extend(self._segments(self._splitter.flush()))
        out.extend(self._close_open(status))
        calls = [c for c in self._slots.values() if c.item is not None]
        for call in calls:
            assert call.item is not None
            call.item["arguments"] = "".join(call.args)
            call.item["status"] = status
            call.args = []
            done: ev.ArgumentsDoneData = {
                "item_id": call.item["id"],
                "output_index": self._offset + call.index,
                "arguments": call.item["arguments"],
            }
            out.append(ev.event(ev.FUNCTION_CALL_ARGUMENTS_DONE, done))
        for call in calls:
            out.extend(self._split(call.index, status))
        return out

    # -- the open item -----------------------------------------------------------
    def _start(self, item: _OpenItem) -> Event:
        self._items.append(item)
        self._open = item
        self._open_index = len(self._items) - 1
        self._open_kind = item["type"]
        self._open_data = {
            "item_id": item["id"],
            "output_index": self._offset + self._open_index,
            "content_index": 0,
            "delta": "",
        }
        self._buffer = []
        if item["type"] == "reasoning" and self._clock is not None:
            item["started_at"] = self._clock()
        return self._announce(item, self._open_index)

    def _close_open(self, status: str) -> list[Event]:
        item = self._open
        if item is None:
            return []
        closed = self._materialised(item)
        closed["status"] = status
        if closed["type"] == "reasoning" and self._clock is not None and "started_at" in closed:
            closed["ended_at"] = self._clock()
            closed["duration"] = round(closed["ended_at"] - closed["started_at"], 3)
        self._items[self._open_index] = closed
        self._open = self._open_kind = None
        self._buffer = []
        return [self._done(self._open_index)]

    def _materialised(self, item: _OpenItem) -> _OpenItem:
        text = "".join(self._buffer)
        if item["type"] == "code_interpreter":
            return updated(item, code=item["code"] + text)
        part = {**item["content"][0], "text": item["content"][0]["text"] + text}
        return updated(item, content=[part])


class _Call:
    """One streamed tool call being assembled (arguments buffered as fragments)."""

    __slots__ = ("args", "call_id", "data", "index", "item", "name")

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self.name = ""
        self.args: list[str] = []
        self.item: FunctionCallItem | None = None
        self.index = -1
        self.data: dict[str, Any] = {}
        """Its argument delta events' data but the delta, once it is announced."""
