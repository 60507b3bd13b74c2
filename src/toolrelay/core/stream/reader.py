"""A whole upstream body → items: framing + provider translator + accumulator.

`BodyReader` is what the engine, `toolrelay replay`, the CLI and the tests all
use (STYLE habit 3). SSE frames are dispatched per payload, like a browser
would: Responses API events (`type: response.*` / `error`) go to the reducer,
anything else is a Chat Completions chunk. A frame that is not JSON ends the
read with an error (SPEC R22: the partial output is kept, nothing crashes).

Input modes: a body is read by a `DeltaAccumulator` (Chat Completions,
Ollama) until its first Responses event, from which an `EventAccumulator` reads
it; the two share one `ResponseFacts`, so what was said about the response
before (an error, usage) counts. A body speaks one API: once deltas have built
items, Responses events are ignored except `error`; once in events mode, chunks
add no items (their usage, finish reason and errors still count).

With `text_tools`, a text-call stage sits between the translator and the
accumulator of either mode (`core.text_calls.stage`): what the reader would feed
the accumulator, it feeds the stage, and the stage's `finish` runs before the
accumulator's.
A whole body that is UTF-8 text but not JSON (a plain-text or HTML 200) is
passed through as the answer (SPEC R2, R23); cut JSON or binary is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from toolrelay.core.events import Event
from toolrelay.core.formats.chat_completions.parse import (
    ChatCompletionsDecoder,
    completion_to_deltas,
    error_from_payload,
)
from toolrelay.core.formats.content import BodyFormat, detect_format
from toolrelay.core.formats.ollama.parse import OllamaDecoder
from toolrelay.core.formats.responses.parse import EVENT_TYPES, response_object_to_output
from toolrelay.core.items import Item
from toolrelay.core.stream.accumulator import Clock, ResponseFacts
from toolrelay.core.stream.delta_accumulator import DeltaAccumulator
from toolrelay.core.stream.deltas import (
    Delta,
    DeltaSink,
    ErrorDelta,
    FinishDelta,
    TextDelta,
)
from toolrelay.core.stream.event_accumulator import EventAccumulator
from toolrelay.core.stream.framing import NDJSONDecoder, RawFrame, SSEDecoder
from toolrelay.core.stream.think_tags import TagConfig
from toolrelay.core.text_calls.stage import TextCallDeltas, TextCallEvents
from toolrelay.core.turn.usage import normalise_usage

_SNIPPET = 200
_loads: Callable[[Any], Any] = orjson.loads
"""Any frame: a `RawFrame` raises `JSONDecodeError`, like a payload that is not JSON."""


@dataclass(frozen=True, slots=True)
class ReadResult:
    """What one model response amounted to."""

    output: list[Item]
    usage: dict[str, Any] | None
    finish_reason: str | None
    error: str | None
    response_id: str | None
    truncated: bool
    invented: str = ""
    """With `made_up_calls`: the content, not in `output`, when it was wholly calls to
    tools not offered (`core.text_calls.stage`, invariant 5)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "usage": self.usage,
            "finish_reason": self.finish_reason,
            "error": self.error,
        }


class BodyReader:
    """Feed body bytes as they arrive; `finish()` at the end (or on a dropped connection)."""

    def __init__(
        self,
        format: BodyFormat,
        *,
        tags: TagConfig | None = TagConfig(),
        clock: Clock | None = None,
        offset: int = 0,
        quiet: bool = False,
        call_ids: Iterable[str] = (),
        text_tools: Collection[str] = (),
        made_up_calls: bool = False,
    ) -> None:
        """`text_tools`: names of the offered tools whose calls written as text in the
        content become real calls (`core.text_calls.stage`); empty: none do.
        `made_up_calls`: content that is wholly calls, some to other tools, goes to the
        result's `invented`, not to its output (the caller asks again)."""
        self.format = format
        self._options: dict[str, Any] = {
            "clock": clock,
            "offset": offset,
            "quiet": quiet,
            "call_ids": call_ids,
            "facts": ResponseFacts(),
        }
        self._text_tools = text_tools
        self._made_up = made_up_calls
        self._deltas = DeltaAccumulator(tags=tags, **self._options)
        """The deltas mode's accumulator (module doc: input modes)."""
        self._events: EventAccumulator | None = None
        """The events mode's, from the first Responses event before any item."""
        self._stage: TextCallDeltas | TextCallEvents | None = None
        """The text-call stage in front of the accumulator in use, if any."""
        self._sink: DeltaSink = self._deltas
        """Where deltas go: the deltas mode's stage or accumulator (`_ResponsesOnly` later)."""
        self._event_sink: EventAccumulator | TextCallEvents | None = None
        """Where Responses events go: the events mode's stage or accumulator."""
        if text_tools:
            reasoning = tags.reasoning if tags is not None else ()
            self._stage = TextCallDeltas(
                text_tools, self._deltas, reasoning=reasoning, made_up=made_up_calls
            )
            self._sink = self._stage
        self._sse = SSEDecoder() if format == "sse" else None
        self._ndjson = NDJSONDecoder() if format == "ndjson" else None
        self._chat = ChatCompletionsDecoder()
        self._ollama = OllamaDecoder()
        self._json: list[bytes] = []
        self.frames = 0
        self._at_end = False
        self._stopped_by_caller = False
        """Payloads parsed as JSON so far (0 at the end means nothing readable came)."""
        self.stopped = False
        """True once the body said it was over, or was malformed: later bytes are ignored."""

    @property
    def acc(self) -> DeltaAccumulator | EventAccumulator:
        """The accumulator of the body's input mode: its items and what it said."""
        events = self._events
        return self._deltas if events is None else events

    def _feed(self, delta: Delta) -> list[Event]:
        out: list[Event] = []
        self._sink.feed_into(delta, out)
        return out

    def _feed_many(self, deltas: Iterable[Delta]) -> list[Event]:
        out: list[Event] = []
        feed_into = self._sink.feed_into
        for delta in deltas:
            feed_into(delta, out)
        return out

    def feed(self, data: bytes) -> list[Event]:
        if self.stopped:
            return []
        if self._sse is not None:
            out = self._frames(self._sse.feed_data(data))
            if self._sse.done:
                self.stopped = True
            return out
        if self._ndjson is not None:
            return self._lines(self._ndjson.feed(data))
        self._json.append(data)
        return []

    def stop(self) -> None:
        """The caller stops reading on purpose (a closed code block): not a truncation."""
        self.stopped = True
        self._stopped_by_caller = True

    def finish(self, *, dropped: bool = False) -> list[Event]:
        """End of body. `dropped`: the connection broke before the body ended."""
        out: list[Event] = []
        self._at_end = True
        if not self.stopped and not dropped:  # a dropped body's last frame is cut: skip it
            if self._sse is not None:
                out.extend(self._frames(self._sse.flush_data()))
            elif self._ndjson is not None:
                out.extend(self._lines(self._ndjson.flush()))
            else:
                out.extend(self._whole(b"".join(self._json)))
        truncated = dropped or not self._ended()
        if truncated and self.acc.error is None:
            out.extend(self._feed(self._cut_short(dropped)))
        if self._stage is not None:  # what the stage held goes on first
            out.extend(self._stage.finish(truncated=truncated))
        out.extend(self.acc.finish(truncated=truncated))
        self.stopped = True
        return out

    def _cut_short(self, dropped: bool) -> ErrorDelta:
        """Why a body that did not end properly ended: the server's own bare `error:`
        line when it wrote one (its JSON error's message, or the text), else a cut."""
        said = self._sse.error_line if self._sse is not None else None
        if said is not None:
            obj = self._parse(said)
            return error_from_payload(obj) if obj is not None else ErrorDelta(said)
        why = "the connection was dropped" if dropped else "the body ended early"
        return ErrorDelta(f"Model response incomplete: {why}.")

    def result(self) -> ReadResult:
        acc = self.acc
        return ReadResult(
            output=acc.output,
            usage=normalise_usage(acc.usage) if acc.usage else None,
            finish_reason=self._finish_reason(),
            error=acc.error,
            response_id=acc.response_id,
            truncated=acc.finished and not self._ended(),
            invented=self._stage.invented if self._stage is not None else "",
        )

    def _ended(self) -> bool:
        acc = self.acc
        if self._stopped_by_caller or (self._sse is not None and self._sse.done):
            return True
        return acc.finish_reason is not None or acc.status is not None or acc.error is not None

    def _finish_reason(self) -> str | None:
        acc = self.acc
        if acc.finish_reason is not None:
            return acc.finish_reason
        if acc.status == "incomplete":
            return "length"
        if acc.status == "failed" or acc.error is not None:
            return "error"
        if acc.status == "completed" or (self._sse is not None and self._sse.done):
            return "tool_calls" if acc.function_calls() else "stop"
        return None

    def _frames(self, frames: Iterable[bytes | RawFrame]) -> list[Event]:
        """Each frame's payload to its reader; an `event: error` frame comes as a
        `RawFrame` (`SSEDecoder.feed_data`), any other as its data bytes."""
        out: list[Event] = []
        sink, chat_feed, events = self._sink, self._chat.feed_into, self._event_sink
        parsed = 0  # added to `self.frames` on the way out: one attribute write per read
        for frame in frames:
            try:
                obj = _loads(frame)
            except orjson.JSONDecodeError:  # also what a RawFrame raises: off the hot path
                data = frame[0] if isinstance(frame, tuple) else frame
                obj = self._parse(data)  # invalid UTF-8, not JSON, or a RawFrame
                if obj is None:
                    if not data.strip():
                        continue
                    self.frames += parsed
                    return out + self._malformed(data.decode("utf-8", "replace"))
                if isinstance(frame, tuple):  # `event: error`: the payload is an error
                    parsed += 1
                    sink.feed_into(error_from_payload(obj), out)
                    continue
            if obj.__class__ is not dict:  # a JSON value that is not an object
                data = frame[0] if isinstance(frame, tuple) else frame
                self.frames += parsed
                return out + self._malformed(data.decode("utf-8", "replace"))
            parsed += 1
            kind = obj.get("type")
            if kind is None:  # a Chat Completions chunk (the hot path of its stream)
                chat_feed(obj, sink, out)
            elif kind.__class__ is str and (kind in EVENT_TYPES or kind.startswith("response.")):
                if events is not None:  # the hot path of a Responses stream
                    events.feed_event_into(obj, kind, out, True)  # owned: a fresh parse
                    continue
                out += self._event(obj, owned=True)
                sink, events = self._sink, self._event_sink
            else:
                chat_feed(obj, sink, out)
        self.frames += parsed
        return out

    def _lines(self, lines: list[bytes]) -> list[Event]:
        out: list[Event] = []
        for line in lines:
            obj = self._parse(line)
            if obj is None:
                return out + self._malformed(line.decode("utf-8", "replace"))
            self.frames += 1
            out.extend(self._feed_many(self._ollama.feed(obj)))
        return out

    def _whole(self, body: bytes) -> list[Event]:
        if not body.strip():
            return self._feed(ErrorDelta("The model server sent an empty body."))
        obj = self._parse(body)
        if obj is None:
            text = _plain_text(body)
            if text is not None:
                return self._passthrough(text)
            return self._malformed(body.decode("utf-8", "replace"))
        self.frames += 1
        if "choices" in obj:
            return self._feed_many(completion_to_deltas(obj))
        if "message" in obj:
            return self._feed_many(self._ollama.feed(obj))
        if obj.get("object") == "response" or isinstance(obj.get("output"), list):
            return self._response_object(obj)
        return self._feed(error_from_payload(obj))

    def _passthrough(self, text: str) -> list[Event]:
        """A body in no known format is the answer, as it is (SPEC R2, R23)."""
        self.frames += 1
        return self._feed_many([TextDelta(text), FinishDelta("stop")])

    def _response_object(self, obj: dict[str, Any]) -> list[Event]:
        output, _meta = response_object_to_output(obj)
        out: list[Event] = []
        for i, item in enumerate(output):
            out += self._event(
                {"type": "response.output_item.added", "output_index": i, "item": item}
            )
            out += self._event(
                {"type": "response.output_item.done", "output_index": i, "item": item}
            )
        return out + self._event({"type": "response.completed", "response": obj})

    def _event(self, obj: dict[str, Any], *, owned: bool = False) -> list[Event]:
        """A Responses API event: the first one before any item starts the events mode."""
        events = self._event_sink
        if events is None:
            stage = self._stage
            if self._deltas.output or (isinstance(stage, TextCallDeltas) and stage.holding):
                # deltas built items (or hold content): this body speaks Chat Completions
                return self._feed(error_from_payload(obj)) if obj.get("type") == "error" else []
            events = self._events = EventAccumulator(**self._options)
            if self._text_tools:
                events = self._stage = TextCallEvents(
                    self._text_tools, events, made_up=self._made_up
                )
            self._event_sink = events
            self._sink = _ResponsesOnly(self._events)
        return events.feed_event(obj, owned=owned)

    def _parse(self, data: str | bytes) -> dict[str, Any] | None:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            if data.__class__ is not bytes:
                return None
            try:  # WHATWG: invalid UTF-8 is replaced, not fatal
                obj = orjson.loads(data.decode("utf-8", "replace"))
            except orjson.JSONDecodeError:
                return None
        return obj if isinstance(obj, dict) else None

    def _malformed(self, data: str) -> list[Event]:
        self.stopped = True
        if self._at_end and self._json == []:
            return self._feed(
                ErrorDelta("Model response incomplete: the body ended inside a chunk.")
            )
        snippet = data[:_SNIPPET] + ("…" if len(data) > _SNIPPET else "")
        return self._feed(ErrorDelta(f"Malformed chunk from the model server: {snippet!r}"))


class _ResponsesOnly:
    """The delta sink of a body that speaks the Responses API: a stray chunk's text,
    reasoning and arguments build nothing (its items are the events'), what a delta
    says about the response counts (module doc: input modes)."""

    __slots__ = ("_acc",)

    def __init__(self, acc: EventAccumulator) -> None:
        self._acc = acc

    def feed_into(self, delta: Delta, out: list[Event]) -> None:
        self._acc.feed_into(delta, out)  # usage, finish reason, errors, the id: the rest is not

    def text(self, text: str, out: list[Event]) -> None:
        return None

    def reasoning(self, text: str, out: list[Event]) -> None:
        return None

    def arguments(self, slot: int, fragment: str, out: list[Event]) -> None:
        return None


def _plain_text(body: bytes) -> str | None:
    """The body as text when it is UTF-8 and does not look like (cut) JSON; else None."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    head = text.lstrip("\ufeff \t\r\n")[:1]
    if head in ("{", "[") or any(c < " " and c not in "\t\r\n" for c in text[:512]):
        return None
    return text


def read_body(
    body: bytes,
    format: BodyFormat | None = None,
    *,
    tags: TagConfig | None = TagConfig(),
    clock: Clock | None = None,
    call_ids: Iterable[str] = (),
    text_tools: Collection[str] = (),
) -> tuple[ReadResult, list[Event]]:
    """Read a complete recorded body; returns the result and every event in order."""
    reader = BodyReader(
        format or detect_format(body),
        tags=tags,
        clock=clock,
        call_ids=call_ids,
        text_tools=text_tools,
    )
    events = reader.feed(body)
    events.extend(reader.finish())
    return reader.result(), events
