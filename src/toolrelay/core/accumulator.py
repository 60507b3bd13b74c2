"""Deltas and Responses events → output items + client events, for one model response.

The single place where a model response becomes items (STYLE habit 2). Chat
Completions and Ollama arrive as normalised deltas (`feed`), the Responses API
as events run through the pure reducer (`feed_event`); both end with
`finish()`. Invariants:

1. Items get stable ids when created and are announced once with
   `response.output_item.added`; a function_call is announced as soon as its
   name is known, before its arguments finish.
2. Text is buffered per open item and joined on demand, so appending is O(1)
   per delta; `output` materialises a snapshot the caller may keep.
3. Every item announced is closed by `finish()` with `response.output_item.done`:
   `completed` after a clean end, `incomplete` when the body was cut or failed.
4. Output indexes in events are turn-wide: `offset` counts the items earlier
   iterations of the turn already produced.

No clock is read unless one is injected (reasoning durations need it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

from toolrelay.core import events as ev
from toolrelay.core.chat_completions import arguments_text
from toolrelay.core.deltas import (
    CitationDelta,
    Delta,
    ErrorDelta,
    FinishDelta,
    ReasoningDelta,
    ResponseIdDelta,
    TextDelta,
    ToolCallDelta,
    UsageDelta,
)
from toolrelay.core.events import Event
from toolrelay.core.ids import new_id
from toolrelay.core.items import (
    Item,
    code_interpreter_item,
    copy_item,
    merge_reasoning_details,
    new_text_item,
)
from toolrelay.core.responses import reduce_event
from toolrelay.core.responses_buffer import DeltaBuffer
from toolrelay.core.think_tags import Chunk, Close, Open, TagConfig, TagSplitter
from toolrelay.core.tool_calls import split_calls
from toolrelay.core.usage import normalise_usage

Clock = Callable[[], float]
_TEXT_KINDS = {"message": ev.OUTPUT_TEXT_DELTA, "reasoning": ev.REASONING_TEXT_DELTA}
_CODE_DELTA = "response.code_interpreter_call_code.delta"


class Accumulator:
    """Builds the items of one model response; see the module docstring."""

    def __init__(
        self,
        *,
        tags: TagConfig | None = TagConfig(),
        clock: Clock | None = None,
        offset: int = 0,
        quiet: bool = False,
        call_ids: Iterable[str] = (),
    ) -> None:
        self._items: list[Item] = []
        self._call_ids = set(call_ids)
        """Call ids already taken in the conversation or this response (see `_unique`)."""
        self._offset = offset
        self._quiet = quiet
        """Nobody listens: the per-chunk delta events are not built (items are the same)."""
        self._clock = clock
        self._splitter = TagSplitter(tags) if tags is not None else None
        self._tags = tags
        # the item receiving streamed text, its buffer and its kind
        self._open: Item | None = None
        self._open_index = -1
        self._buffer: list[str] = []
        self._pending_ws = ""
        self._tag_kind = "text"
        self._slots: dict[int, _Call] = {}
        self._responses_mode = False
        self._deltas = DeltaBuffer()
        self.usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.error: str | None = None
        self.error_data: Any = None
        self.response_id: str | None = None
        self.status: str | None = None
        self.code_closed = False
        self.finished = False

    # -- snapshots -------------------------------------------------------
    @property
    def output(self) -> list[Item]:
        """A copy of the items so far, open text materialised."""
        self._items = self._deltas.fold(self._items)
        items = [copy_item(i) for i in self._items]
        if self._open is not None and self._buffer:
            items[self._open_index] = self._materialised(self._open)
        for call in self._slots.values():
            if call.item is not None and call.args:
                items[call.index] = {**items[call.index], "arguments": "".join(call.args)}
        return items

    def function_calls(self) -> list[Item]:
        """Completed function_call items of this response (split per R6), in order."""
        self._items = self._deltas.fold(self._items)
        return [i for i in self._items if i.get("type") == "function_call"]

    # -- chat completions / ollama --------------------------------------
    def feed_many(self, deltas: Iterable[Delta]) -> list[Event]:
        out: list[Event] = []
        for delta in deltas:
            out.extend(self.feed(delta))
        return out

    def feed_into(self, delta: Delta, out: list[Event]) -> None:
        """`out += feed(delta)`, with the commonest case — more text for the open
        item — done inline: this runs once per chunk of every response."""
        item = self._open
        cls = delta.__class__
        if cls is ToolCallDelta and delta.name is None and delta.arguments:  # type: ignore[union-attr]
            call = self._slots.get(delta.slot)  # type: ignore[union-attr]
            if call is not None and call.item is not None:
                call.args.append(delta.arguments)  # type: ignore[union-attr]
                if self._quiet:
                    return
                data = {
                    "item_id": call.item["id"],
                    "output_index": self._offset + call.index,
                    "delta": delta.arguments,  # type: ignore[union-attr]
                }
                out.append(Event(ev.FUNCTION_CALL_ARGUMENTS_DELTA, data))
                return
        elif item is not None:
            text = delta.text if cls is TextDelta or cls is ReasoningDelta else ""  # type: ignore[union-attr]
            if text and (
                (cls is TextDelta and item["type"] == "message" and self._plain_text(text))
                or (
                    cls is ReasoningDelta
                    and item["type"] == "reasoning"
                    and not delta.details  # type: ignore[union-attr]
                    and (self._tags is None or not self._tags.reasoning)
                )
            ):
                if self._quiet:
                    self._buffer.append(text)
                else:
                    out.append(self._more_text(item, text))
                return
        out += self._dispatch(delta)

    def _more_text(self, item: Item, text: str) -> Event:
        """Append to the open item's buffer; its delta event."""
        self._buffer.append(text)
        data = {
            "item_id": item["id"],
            "output_index": self._offset + self._open_index,
            "content_index": 0,
            "delta": text,
        }
        return Event(_TEXT_KINDS[item["type"]], data)

    def _plain_text(self, text: str) -> bool:
        splitter = self._splitter
        return splitter is None or (splitter.passes(text) and splitter.inside == "text")

    def feed(self, delta: Delta) -> list[Event]:
        out: list[Event] = []
        self.feed_into(delta, out)
        return out

    def _dispatch(self, delta: Delta) -> list[Event]:
        cls = delta.__class__
        if cls is ToolCallDelta:
            return self._tool_call(delta)  # type: ignore[arg-type]
        if cls is ReasoningDelta:
            return self._reasoning(delta.text, delta.details)  # type: ignore[union-attr]
        if cls is TextDelta:  # the hot paths, before the general dispatch
            splitter = self._splitter
            if splitter is None:
                return self._text("message", delta.text)  # type: ignore[union-attr]
            text = delta.text  # type: ignore[union-attr]
            if splitter.passes(text):
                return self._chunk(splitter.inside, text)
            return self._segments(splitter.feed(text))
        match delta:
            case UsageDelta(usage):
                self.usage = usage
                return [Event(ev.CHAT_COMPLETION, {"usage": normalise_usage(usage)})]
            case FinishDelta(reason):
                self.finish_reason = reason
                return []
            case ErrorDelta(message, data):
                return self._error(message, data)
            case CitationDelta(url, title):
                return self._citation(url, title)
            case ResponseIdDelta(response_id):
                self.response_id = response_id
                return []
        return []

    def _text(self, kind: str, text: str) -> list[Event]:
        if not text:
            return []
        item = self._open
        if item is not None and item["type"] == kind:  # the hot path: more of the same item
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
            self._tags = TagConfig(
                reasoning=(), solution=False, code_interpreter=tags.code_interpreter
            )
            self._splitter = TagSplitter(self._tags)
            return out + self._reasoning(text, details)
        out = self._text("reasoning", text) if text else []
        if details:
            if self._open is None or self._open["type"] != "reasoning":
                out.extend(self._close_open("completed"))
                out.append(self._start(new_text_item("reasoning")))
            assert self._open is not None
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
                        item = cast(Item, code_interpreter_item(lang=lang, attributes=attributes))
                        out.append(self._start(item))
                    else:
                        item = new_text_item("reasoning" if kind == "reasoning" else "message")
                        if attributes:
                            item["attributes"] = attributes
                        out.append(self._start(item))
                case Close(kind):
                    self._tag_kind = "text"
                    if kind == "code_interpreter":
                        self.code_closed = True
                    out.extend(self._close_open("completed"))
        return out

    def _chunk(self, kind: str, text: str) -> list[Event]:
        if kind == "text":
            return self._text("message", text)
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
            self._items.append(call.item)
            out.append(self._announce(call.item, call.index))
            delta_text = "".join(call.args)
        else:
            delta_text = delta.arguments
        if delta_text:
            out.append(
                Event(
                    ev.FUNCTION_CALL_ARGUMENTS_DELTA,
                    {
                        "item_id": call.item["id"],
                        "output_index": self._offset + call.index,
                        "delta": delta_text,
                    },
                )
            )
        return out

    def _unique(self, call_id: Any) -> str:
        """`call_id`, or a fresh id when it is missing or already taken: providers such
        as Kimi restart their ids each round, and a reused id would pair a call with
        another call's result (reference §2.4)."""
        if call_id.__class__ is not str or not call_id or call_id in self._call_ids:
            call_id = new_id("call")
        self._call_ids.add(call_id)
        return str(call_id)

    def _error(self, message: str, data: Any) -> list[Event]:
        self.error = message
        self.error_data = data
        return [Event(ev.CHAT_MESSAGE_ERROR, {"error": {"content": message}})]

    def _citation(self, url: str, title: str | None) -> list[Event]:
        name = title or url
        if self._open is not None and self._open["type"] == "message":
            part = self._open["content"][0]
            part.setdefault("annotations", []).append(
                {"type": "url_citation", "url": url, "title": name}
            )
        source = {
            "source": {"name": name, "url": url},
            "document": [name],
            "metadata": [{"source": url, "name": name}],
        }
        return [Event(ev.SOURCE, source)]

    # -- responses api ---------------------------------------------------
    def feed_event(self, event: dict[str, Any], *, owned: bool = False) -> list[Event]:
        """One Responses API streaming event, reduced purely and forwarded.

        Plain deltas are batched by `DeltaBuffer` and folded in before the next
        structural event: the same result as reducing each, without quadratic copying.
        `owned`: the caller hands `event` over (a freshly parsed chunk), so a buffered
        delta's dict is reused as its forwarded event's data instead of copied.
        """
        if self._deltas.take(event, self._items):  # only after a structural event: mode is set
            if self._quiet:
                return []
            if not owned:
                event = dict(event)
            kind = event.pop("type")
            event.pop("sequence_number", None)
            event["output_index"] += self._offset
            return [Event(kind, event)]
        self._responses_mode = True
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
                out.append(Event(ev.CHAT_COMPLETION, {"usage": normalise_usage(meta.usage)}))
            if meta.status:
                self.status = meta.status
            if meta.error:
                out.extend(self._error(meta.error, meta.error_data))
        return out

    # -- end -------------------------------------------------------------
    def finish(self, *, truncated: bool = False) -> list[Event]:
        """Close every open item; split concatenated calls (R6). Idempotent."""
        if self.finished:
            return []
        self.finished = True
        status = "incomplete" if truncated or self.error else "completed"
        out: list[Event] = []
        if self._splitter is not None:
            out.extend(self._segments(self._splitter.flush()))
        out.extend(self._close_open(status))
        if self._responses_mode:
            out.extend(self._finish_responses(status))
        else:
            out.extend(self._finish_calls(status))
        return out

    def _finish_calls(self, status: str) -> list[Event]:
        out: list[Event] = []
        calls = [c for c in self._slots.values() if c.item is not None]
        for call in calls:
            assert call.item is not None
            call.item["arguments"] = "".join(call.args)
            call.item["status"] = status
            call.args = []
            data = {"item_id": call.item["id"], "output_index": self._offset + call.index}
            out.append(
                Event(
                    ev.FUNCTION_CALL_ARGUMENTS_DONE, {**data, "arguments": call.item["arguments"]}
                )
            )
        for call in calls:
            out.extend(self._split(call.index, status))
        return out

    def _split(self, index: int, status: str) -> list[Event]:
        item = self._items[index]
        parts = split_calls([item]) if status == "completed" else [item]  # type: ignore[list-item]
        first = dict(parts[0])
        if parts[0] is not item:
            first["id"] = item.get("id")  # the client replaces the item it already shows
        self._items[index] = first
        out = [self._done(index)]
        for extra in parts[1:]:
            self._call_ids.add(extra["call_id"])
            self._items.append(dict(extra))
            out.append(self._announce(self._items[-1], len(self._items) - 1))
            out.append(self._done(len(self._items) - 1))
        return out

    def _finish_responses(self, status: str) -> list[Event]:
        self._items = self._deltas.fold(self._items)
        out: list[Event] = []
        items: list[Item] = []
        for i, item in enumerate(self._items):
            if item.get("status") == "in_progress":
                item = {**item, "status": status}
                items.append(item)
                out.append(
                    Event(ev.OUTPUT_ITEM_DONE, {"output_index": self._offset + i, "item": item})
                )
            else:
                items.append(item)
        self._items = items
        calls = [i for i, it in enumerate(items) if it.get("type") == "function_call"]
        for index in calls:
            out.extend(self._own_call(index))
        if status == "completed":
            for index in calls:
                if len(split_calls([items[index]])) > 1:  # type: ignore[list-item]
                    out.extend(self._split(index, status))
        return out

    def _own_call(self, index: int) -> list[Event]:
        """A Responses call made usable, announced again if changed: a fresh id when its
        id is missing or taken, a string name, arguments as a string (object
        arguments as compact JSON, as the Chat Completions translator writes them)."""
        item = self._items[index]
        name, arguments = item.get("name"), item.get("arguments")
        fixed = {
            **item,
            "call_id": self._unique(item.get("call_id")),
            "name": name if name.__class__ is str else "",
            "arguments": arguments_text(arguments),
        }
        if fixed == item:
            return []
        self._items[index] = fixed
        return [self._done(index)]

    # -- item plumbing ---------------------------------------------------
    def _start(self, item: Item) -> Event:
        self._items.append(item)
        self._open = item
        self._open_index = len(self._items) - 1
        self._buffer = []
        if item["type"] == "reasoning" and self._clock is not None:
            item["started_at"] = self._clock()
        return self._announce(item, self._open_index)

    def _announce(self, item: Item, index: int) -> Event:
        return Event(ev.OUTPUT_ITEM_ADDED, self._item_data(item, index))

    def _done(self, index: int) -> Event:
        return Event(ev.OUTPUT_ITEM_DONE, self._item_data(self._items[index], index))

    def _item_data(self, item: Item, index: int) -> dict[str, Any]:
        """A snapshot for listeners; quiet, nobody looks, so it is not copied."""
        return {
            "output_index": self._offset + index,
            "item": item if self._quiet else copy_item(item),
        }

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
        self._open = None
        self._buffer = []
        return [self._done(self._open_index)]

    def _materialised(self, item: Item) -> Item:
        text = "".join(self._buffer)
        if item["type"] == "code_interpreter":
            return {**item, "code": item["code"] + text}
        part = {**item["content"][0], "text": item["content"][0]["text"] + text}
        return {**item, "content": [part]}


class _Call:
    """One streamed tool call being assembled (arguments buffered as fragments)."""

    __slots__ = ("args", "call_id", "index", "item", "name")

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self.name = ""
        self.args: list[str] = []
        self.item: Item | None = None
        self.index = -1
