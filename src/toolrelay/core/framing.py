"""Incremental body decoders: bytes in, frames out (SPEC R2).

`SSEDecoder` follows the WHATWG event-stream rules: UTF-8 with a leading BOM
dropped, lines ending in CRLF, LF or CR, `data:` lines joined with `\\n`,
`event:`, `id:` (no NUL) and `retry:` (digits only) fields, `:` comments, a
blank line dispatching the event. Lines and UTF-8 characters may be split
anywhere across `feed()` calls: we work on bytes and decode whole lines only.
Two deliberate extensions for model streams: `data: [DONE]` ends the response
(later bytes are ignored), and an event still pending at `flush()` is
dispatched rather than dropped, so a body that ends without its final blank
line loses nothing.

`NDJSONDecoder` yields one non-blank line (bytes, CR stripped) per object.
Neither decoder parses JSON: callers do, with orjson, on the hot path.
"""

from __future__ import annotations

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


class SSEDecoder:
    """Feed bytes, get `SSEFrame`s; `done` turns true at `data: [DONE]`."""

    __slots__ = ("_buf", "_data", "_event", "_retry", "_started", "done", "last_event_id")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._event: str | None = None
        self._retry: int | None = None
        self._started = False
        self.done = False
        self.last_event_id: str | None = None

    def feed(self, chunk: bytes) -> list[SSEFrame]:
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
        if b"\r" in buf:
            held = b""
            if buf.endswith(b"\r"):  # may be the first half of a CRLF
                buf, held = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            lines = buf.split(b"\n")
            self._buf = lines.pop() + held
        else:
            lines = buf.split(b"\n")
            self._buf = lines.pop()
        return self._lines(lines) if lines else []

    def flush(self) -> list[SSEFrame]:
        """End of body: the last line and any pending event are dispatched."""
        if self.done:
            return []
        rest, self._buf = self._buf, b""
        lines = [rest.rstrip(b"\r")] if rest.rstrip(b"\r") else []
        lines.append(b"")
        return self._lines(lines)

    def _lines(self, lines: list[bytes]) -> list[SSEFrame]:
        frames: list[SSEFrame] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    frame = self._dispatch()
                    if frame.data == DONE:
                        self.done = True
                        self._buf = b""
                        return frames
                    frames.append(frame)
                else:
                    self._event = None
                continue
            if line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value[:1] == b" " else value)
            elif line[0] != 0x3A:  # ":" starts a comment
                self._field(line)
        return frames

    def _dispatch(self) -> SSEFrame:
        data = self._data
        raw = data[0] if len(data) == 1 else b"\n".join(data)
        frame = SSEFrame(
            raw.decode("utf-8", "replace"), self._event, self.last_event_id, self._retry
        )
        data.clear()
        self._event = None
        self._retry = None
        return frame

    def _field(self, line: bytes) -> None:
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"data":  # "data" with no colon: an empty data line
            self._data.append(value)
        elif name == b"id":
            if b"\0" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)


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
