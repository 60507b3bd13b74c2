"""Incremental body decoders: bytes in, frames out (SPEC R2).

`SSEDecoder` follows the WHATWG event-stream rules: UTF-8 with a leading BOM
dropped, lines ending in CRLF, LF or CR, `data:` lines joined with `\\n`,
`event:`, `id:` (no NUL) and `retry:` (digits only) fields, `:` comments, a
blank line dispatching the event. Lines and UTF-8 characters may be split
anywhere across `feed()` calls: we work on bytes and decode whole lines only.
Two deliberate extensions for model streams: `data: [DONE]` ends the response
(later bytes are ignored), and an event still pending at `flush()` is
dispatched rather than dropped, so a body that ends without its final blank
line loses nothing. A bare `error: …` line (llama.cpp and other self-hosted
servers end a failed stream with one) is kept as `error_line` for the reader.

`NDJSONDecoder` yields one non-blank line (bytes, CR stripped) per object.
Neither decoder parses JSON: callers do, with orjson, on the hot path.
`SSEDecoder.feed_data` gives payloads alone (what `BodyReader` dispatches on)
and cuts a read of common events into them without a per-event Python step.
Substring tests use `find`, not `in`: `bytes.__contains__` first tries its
argument as an int, raising and clearing a TypeError (about 1,800 CPU
instructions, as much as the rest of a chunk's framing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

_BOM = b"\xef\xbb\xbf"
DONE = "[DONE]"


@dataclass(frozen=True, slots=True)
class SSEFrame:
    """One dispatched server-sent event."""

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None


RawFrame = tuple[bytes, bytes | None, str | None, int | None]
"""A dispatched event before decoding: data bytes, `event:` type bytes, last event id, retry."""


class SSEDecoder:
    """Feed bytes, get `SSEFrame`s; `done` turns true at `data: [DONE]`.

    The common event (one `data: ` line) takes a fast path: the buffer is
    cut at blank lines and such a block becomes a frame without a per-line
    loop. Anything else goes through the full field parser, block by block,
    so no parser state ever spans two `feed()` calls — only unparsed bytes do.
    """

    __slots__ = (
        "_buf",
        "_clear",
        "_data",
        "_event",
        "_retry",
        "_started",
        "done",
        "error_line",
        "last_event_id",
    )

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._event: bytes | None = None
        self._retry: int | None = None
        self._started = False
        self.done = False
        self.last_event_id: str | None = None
        self.error_line: str | None = None
        """The value of the last bare `error:` line (no `data:`), which self-hosted
        servers write as their last words; not an SSE field, so nothing is dispatched."""
        self._clear = False
        """Started, not done, nothing held: a read may be one whole event (`feed_raw`)."""

    def feed(self, chunk: bytes) -> list[SSEFrame]:
        return [_decoded(raw) for raw in self.feed_raw(chunk)]

    def flush(self) -> list[SSEFrame]:
        """End of body: the last line and any pending event are dispatched."""
        return [_decoded(raw) for raw in self.flush_raw()]

    def feed_raw(self, chunk: bytes) -> list[RawFrame]:
        """Like `feed`, without decoding: orjson reads the bytes directly.

        A streamed response mostly arrives one whole event per read: such a read
        (nothing held, one `data: ` line, or `event:` then `data:`, then the blank
        line, no CR) becomes its frame with a few byte comparisons and no split.
        """
        if not self._clear or not chunk:
            return self._feed_any(chunk)
        end = len(chunk) - 2
        if chunk[end:] == b"\n\n" and chunk.find(b"\r") < 0:
            if chunk[:6] == b"data: ":
                if chunk.find(b"\n", 6) == end:
                    data = chunk[6:end]
                    if data == b"[DONE]":
                        return self._stop([])
                    return [(data, None, self.last_event_id, None)]
            elif chunk[:7] == b"event: ":
                nl = chunk.find(b"\n")
                if chunk[nl + 1 : nl + 7] == b"data: " and chunk.find(b"\n", nl + 1) == end:
                    data = chunk[nl + 7 : end]
                    if data == b"[DONE]":
                        return self._stop([])
                    return [(data, chunk[7:nl], self.last_event_id, None)]
        return self._feed_any(chunk)

    def feed_data(self, chunk: bytes) -> Sequence[bytes | RawFrame]:
        """Like `feed_raw`, for callers that dispatch on the payload: a frame comes
        as its data bytes alone (its `event:` type, id and retry dropped), except
        an `event: error` frame, which comes as its `RawFrame`.

        The common read, whole `data: ` events or whole `event: ` + `data: ` events
        (the Chat Completions and Responses shapes; no CR, comment, id or retry),
        is cut into payloads by a few C-level splits and counts for the whole read:
        no per-event slicing, tuple or check in Python (`_payloads`).

        The commonest read of all comes first: nothing held, and the read is one
        whole event, `data: <payload>\n\n`, perhaps after one `event: <type>\n`
        line (not `error`), with no CR and a payload other than `[DONE]`. Three
        `partition`s check it: `data: ` is found at the start or right after the
        type line (`_type_line`), so it starts a line; the payload runs to the
        first LF after it, and one byte follows, an LF (the blank line).
        `partition` takes its argument as it is, where a `find`, `rfind` or
        `count` spends about 1,000 instructions parsing its arguments.
        """
        if self._clear:
            head, sep, rest = chunk.partition(b"data: ")
            if sep:
                data, _, end = rest.partition(b"\n")
                if (
                    end == b"\n"
                    and not data.partition(b"\r")[1]
                    and data != b"[DONE]"
                    and (not head or _type_line(head))
                ):
                    return (data,)
        if self._started and not self.done and chunk:
            buf = self._buf + chunk if self._buf else chunk
            cut = buf.rfind(b"\n\n")
            if cut < 0:
                if buf.find(b"\r") < 0:
                    self._buf, self._clear = buf, False
                    return []
            elif buf.find(b"\r") < 0:
                payloads = _payloads(buf[:cut])
                if payloads is not None:
                    self._buf = buf[cut + 2 :]
                    self._clear = not self._buf
                    return payloads
        return _data_frames(self.feed_raw(chunk))

    def flush_data(self) -> list[bytes | RawFrame]:
        """`flush_raw` in the shape of `feed_data`."""
        return _data_frames(self.flush_raw())

    def _feed_any(self, chunk: bytes) -> list[RawFrame]:
        """Any read: held bytes joined, the BOM dropped, line ends normalised, cut at
        blank lines; each complete block is parsed and the rest is held."""
        if self.done or not chunk:
            return []
        buf = self._buf + chunk if self._buf else chunk
        if not self._started:
            if len(buf) < 3 and _BOM.startswith(buf):
                self._buf = buf
                return []
            self._started = True
            if buf.startswith(_BOM):
                buf = buf[3:]
        if buf.find(b"\r") >= 0:
            held = b""
            if buf.endswith(b"\r"):  # may be the first half of a CRLF
                buf, held = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            blocks = buf.split(b"\n\n")
            self._buf = blocks.pop() + held
        else:
            blocks = buf.split(b"\n\n")
            self._buf = blocks.pop()
        frames = self._blocks(blocks) if blocks else []
        self._clear = not self._buf and not self.done
        return frames

    def flush_raw(self) -> list[RawFrame]:
        if self.done:
            return []
        rest, self._buf = self._buf.rstrip(b"\r\n"), b""
        return self._blocks([rest]) if rest else []

    def _blocks(self, blocks: list[bytes]) -> list[RawFrame]:
        frames: list[RawFrame] = []
        for block in blocks:
            if block[:6] == b"data: " and block.find(b"\n") < 0:
                data = block[6:]
                if data == b"[DONE]":
                    return self._stop(frames)
                frames.append((data, None, self.last_event_id, None))
            elif (
                block[:7] == b"event: "
                and block[(nl := block.find(b"\n")) + 1 : nl + 7] == b"data: "
                and block.find(b"\n", nl + 1) < 0
            ):  # the Responses API shape: `event: <type>` then one `data: ` line
                data = block[nl + 7 :]
                if data == b"[DONE]":
                    return self._stop(frames)
                frames.append((data, block[7:nl], self.last_event_id, None))
            elif block:
                frame = self._block(block)
                if frame is not None:
                    if frame[0] == b"[DONE]":
                        return self._stop(frames)
                    frames.append(frame)
        return frames

    def _stop(self, frames: list[RawFrame]) -> list[RawFrame]:
        self.done = True
        self._clear = False
        self._buf = b""
        return frames

    def _block(self, block: bytes) -> RawFrame | None:
        """One event's lines through the full WHATWG field rules; dispatch at its end."""
        data = self._data
        for line in block.split(b"\n"):
            if not line:
                continue  # a blank line inside a block: nothing pending to dispatch
            if line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value[:1] == b" " else value)
            elif line[0] != 0x3A:  # ":" starts a comment
                self._field(line)
        event, self._event = self._event, None
        retry, self._retry = self._retry, None
        if not data:
            return None
        raw = data[0] if len(data) == 1 else b"\n".join(data)
        data.clear()
        return raw, event, self.last_event_id, retry

    def _field(self, line: bytes) -> None:
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"event":
            self._event = value
        elif name == b"data":  # "data" with no colon: an empty data line
            self._data.append(value)
        elif name == b"id":
            if b"\0" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)
        elif name == b"error" and value.strip():
            self.error_line = value.strip().decode("utf-8", "replace")


def _type_line(head: bytes) -> bool:
    """`head` is one `event: ` line, its LF included, not `error` and with no CR."""
    line, nl, after = head.partition(b"\n")
    return (
        bool(nl)
        and not after
        and line[:7] == b"event: "
        and line != b"event: error"
        and not line.partition(b"\r")[1]
    )


def _payloads(whole: bytes) -> list[bytes] | None:
    """The payloads of `whole` (complete events, without the blank line after the
    last) when every event in it is one `data: ` line, or an `event: ` line (not
    `error`) then one `data: ` line, none of them `[DONE]`; else None.

    Checked for the whole read in C: newline counts, and "all lines start with
    `p`" as `min(lines) >= p` and `max(lines) < p'` (`p` with its last byte
    raised), which holds exactly when each of them does.
    """
    if whole[:6] == b"data: ":
        parts = whole.split(b"\n\ndata: ")
        if whole.count(b"\n") != 2 * len(parts) - 2:  # a newline that starts no event
            return None
        parts[0] = parts[0][6:]
    elif whole[:7] == b"event: ":
        lines = whole.split(b"\n")  # event i: lines 3i (type), 3i + 1 (data), 3i + 2 (blank)
        types, datas = lines[0::3], lines[1::3]
        if (
            len(lines) % 3 != 2
            or lines[2::3].count(b"") != len(types) - 1
            or min(types) < b"event: "
            or max(types) >= b"event:!"
            or b"event: error" in types
            or min(datas) < b"data: "
            or max(datas) >= b"data:!"
        ):
            return None
        parts = [data[6:] for data in datas]
    else:
        return None
    return None if b"[DONE]" in parts else parts


def _data_frames(frames: list[RawFrame]) -> list[bytes | RawFrame]:
    """`feed_data`'s shape: data bytes alone, but an `event: error` frame whole."""
    return [frame if frame[1] == b"error" else frame[0] for frame in frames]


def _decoded(raw: RawFrame) -> SSEFrame:
    event = raw[1].decode("utf-8", "replace") if raw[1] is not None else None
    return SSEFrame(raw[0].decode("utf-8", "replace"), event, raw[2], raw[3])


class NDJSONDecoder:
    """Feed bytes, get complete non-blank lines (bytes, without line endings)."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        if not chunk:
            return []
        buf = self._buf + chunk if self._buf else chunk
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        return [s for line in lines if (s := line.strip())]

    def flush(self) -> list[bytes]:
        rest, self._buf = self._buf.strip(), b""
        return [rest] if rest else []
