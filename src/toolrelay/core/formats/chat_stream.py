"""A chat's SSE stream as one reader is sent it, and read back into whole events.

The bus keeps every event whole (a replay of a finished turn, whose deltas are
gone, needs its items whole). What one reader is sent can be leaner, because
the server knows what that reader already has: `ChatFrames` is one connection's
writer. A `response.output_item.done` whose item this connection sent from its
`output_item.added` through every delta comes with the text those deltas built
left out (its parts' `text`, a call's `arguments`) and `from_deltas: true`; the
server checks the deltas built exactly that text (it keeps the delta strings the
events already hold, and joins them once, at the `done`), and sends
the item whole otherwise (a reader that joined mid-item, a replay without the
deltas, a text rewritten since). Items are the large part of a turn's bytes.

Deltas are most of a turn's frames, so a delta's frame is lean: no `type`
beside `data` (the frame's `event:` line names it), and `item_id`,
`output_index` and `content_index` only when one of them differs from the
connection's previous delta (its first delta always has them).

`ChatStreamReader` is the other end, for Python clients: SSE bytes in, whole
events out (`{"type", "data"}` as the bus holds them), the left-out text put
back from the deltas it read, a lean delta's type and place filled in. The web
page's `stream.js`/`render.js` do the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.stream.framing import SSEDecoder

__all__ = ["ChatFrames", "ChatStreamReader", "frame"]

_TEXT_DELTAS: Final = frozenset({ev.OUTPUT_TEXT_DELTA, ev.REASONING_TEXT_DELTA})
_PLACE: Final = frozenset({"item_id", "output_index", "content_index"})
_DELTA_KEYS: Final = _PLACE | {"delta"}
_HEADS: Final = {kind: b"\nevent: " + kind.encode() + b"\ndata: " for kind in ev.DELTA_EVENTS}
_ARGS: Final = -1
"""The key a call's arguments are built under (content indexes are >= 0)."""


def frame(seq: int, event: Event) -> bytes:
    """One whole event as an SSE frame: `id:`, `event:` and `data: {"type", "data"}`."""
    data = orjson.dumps({"type": event.type, "data": event.data})
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (seq, event.type.encode(), data)


class ChatFrames:
    """One connection's frames of a chat's events (module doc): items it saw built
    from their deltas are not sent a second time in their `done`."""

    __slots__ = ("_built", "_place")

    def __init__(self) -> None:
        self._built: dict[str, dict[int, list[str]]] = {}
        """Per item this connection saw added: the deltas sent, per part."""
        self._place: tuple[Any, Any, Any] | None = None
        """The previous delta's item id, output index and content index."""

    def frame(self, seq: int, event: Event) -> bytes:
        """`event` as this connection's SSE frame."""
        kind = event.type
        if kind in ev.DELTA_EVENTS:
            data = event.data
            delta = data.get("delta")
            if not isinstance(delta, str) or "item_id" not in data:
                return frame(seq, event)  # not a delta of ours (a tool's own): as it came
            parts = self._built.get(data["item_id"]) if self._built else None
            if parts is not None:
                index = data.get("content_index", 0) if kind in _TEXT_DELTAS else _ARGS
                pieces = parts.get(index)
                if pieces is None:
                    parts[index] = [delta]
                else:
                    pieces.append(delta)
            return self._delta_frame(seq, kind, data, delta)
        if kind == ev.OUTPUT_ITEM_ADDED:
            self._added(event.data)
        elif kind == ev.OUTPUT_ITEM_DONE:
            event = self._done(event)
        elif kind in (ev.TURN_RESUMED, ev.CHAT_COMPLETION) or kind == ev.CHAT_MESSAGE:
            self._forget(event)
        return frame(seq, event)

    def _delta_frame(self, seq: int, kind: str, data: dict[str, Any], delta: str) -> bytes:
        """A delta's lean frame (module doc): its place only when it moved."""
        place = (data["item_id"], data.get("output_index"), data.get("content_index"))
        head = b"id: " + str(seq).encode() + _HEADS[kind]
        if place != self._place:
            self._place = place
            return head + orjson.dumps({"data": data}) + b"\n\n"
        if data.keys() <= _DELTA_KEYS:  # nothing else in it
            return head + b'{"data":{"delta":' + orjson.dumps(delta) + b"}}\n\n"
        keep = {k: v for k, v in data.items() if k not in _PLACE}  # a provider's own fields
        return head + orjson.dumps({"data": keep}) + b"\n\n"

    def _added(self, data: Mapping[str, Any]) -> None:
        item = data.get("item")
        key = item.get("id") if isinstance(item, Mapping) else None
        if isinstance(key, str):
            self._built[key] = {}

    def _forget(self, event: Event) -> None:
        """A rewrite or a takeover: what the deltas built is no longer the item's text."""
        if event.type == ev.CHAT_MESSAGE:
            self._built.pop(event.data.get("item_id"), None)  # type: ignore[arg-type]
        elif event.type == ev.TURN_RESUMED or event.data.get("done"):
            self._built.clear()

    def _done(self, event: Event) -> Event:
        item = event.data.get("item")
        key = item.get("id") if isinstance(item, Mapping) else None
        parts = self._built.pop(key, None) if isinstance(key, str) else None
        if parts is None or not isinstance(item, Mapping):
            return event
        lean = _without_built(item, parts)
        if lean is None:
            return event
        return Event(event.type, {**event.data, "item": lean, "from_deltas": True})


def _without_built(item: Mapping[str, Any], parts: dict[int, list[str]]) -> dict[str, Any] | None:
    """`item` without the text its deltas built, or None when they did not build it all.

    All or nothing, so a reader puts text back without guessing: a call's
    `arguments`, or the `text` of every `content` part (an item with a part of
    another kind, a refusal, an image, stays whole).
    """
    lean = dict(item)
    if item.get("type") == "function_call":
        arguments = item.get("arguments")
        if not isinstance(arguments, str) or set(parts) != {_ARGS}:
            return None
        if not _same(parts, _ARGS, arguments):
            return None
        del lean["arguments"]
        return lean
    content = item.get("content")
    if not isinstance(content, list) or not content or not set(parts) <= set(range(len(content))):
        return None
    kept: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        if not (isinstance(part, Mapping) and isinstance(part.get("text"), str)):
            return None
        if not _same(parts, index, part["text"]):
            return None
        kept.append({k: v for k, v in part.items() if k != "text"})
    lean["content"] = kept
    return lean


def _same(parts: dict[int, list[str]], index: int, text: str) -> bool:
    return "".join(parts.get(index, ())) == text


class ChatStreamReader:
    """A chat stream's SSE bytes in, whole events out: `feed(chunk)` gives
    `(id, event)` pairs, each item's `done` with the text its deltas built."""

    __slots__ = ("_decoder", "_place", "_text")

    def __init__(self) -> None:
        self._decoder = SSEDecoder()
        self._text: dict[str, dict[int, list[str]]] = {}
        self._place: dict[str, Any] = {}
        """The previous delta's item id, output index and content index."""

    def feed(self, chunk: bytes) -> list[tuple[str | None, Event]]:
        """The events whose frames `chunk` completes (comments and keep-alives skipped)."""
        out: list[tuple[str | None, Event]] = []
        for sse in self._decoder.feed(chunk):
            if sse.data:
                out.append((sse.id, self.event(sse.event, orjson.loads(sse.data))))
        return out

    def event(self, name: str | None, body: Mapping[str, Any]) -> Event:
        """One frame's whole event from its `event:` name and decoded `data:` line."""
        kind = str(body.get("type") or name or "")
        data = dict(body.get("data") or {})
        if kind == ev.OUTPUT_ITEM_ADDED:
            item = data.get("item")
            if isinstance(item, Mapping) and isinstance(item.get("id"), str):
                self._text[item["id"]] = {}
        elif kind in ev.DELTA_EVENTS:
            if "item_id" in data:
                self._place = {k: data[k] for k in _PLACE if k in data}
            elif "type" not in body:  # a lean delta: its place is the previous one's
                data = {**self._place, **data}
            parts = self._text.get(data.get("item_id"))  # type: ignore[arg-type]
            if parts is not None:
                index = data.get("content_index", 0) if kind in _TEXT_DELTAS else _ARGS
                parts.setdefault(index, []).append(str(data.get("delta", "")))
        elif kind == ev.OUTPUT_ITEM_DONE and data.pop("from_deltas", False):
            item = data.get("item")
            if isinstance(item, Mapping):
                data["item"] = _rebuilt(item, self._text.pop(str(item.get("id")), {}))
        return Event(kind, data)


def _rebuilt(item: Mapping[str, Any], parts: dict[int, list[str]]) -> dict[str, Any]:
    """`item` with the text its deltas built put back (`from_deltas`): a call's
    `arguments`, else every content part's `text`."""
    whole = dict(item)
    if item.get("type") == "function_call":
        whole["arguments"] = "".join(parts.get(_ARGS, ()))
        return whole
    content = item.get("content")
    if isinstance(content, list):
        whole["content"] = [
            {**part, "text": "".join(parts.get(index, ()))}
            for index, part in enumerate(content)
            if isinstance(part, Mapping)
        ]
    return whole
