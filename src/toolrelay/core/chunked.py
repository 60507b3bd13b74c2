"""HTTP/1.1 chunked transfer coding, decoded as the bytes come (RFC 9112 §7.1).

`Dechunker.feed` takes the bytes of a chunked body however they were cut
(network reads split chunks anywhere) and returns the payload they complete,
all of it joined: a streamed answer wants the data, not the chunk borders.
Chunk extensions are skipped and trailer fields dropped, as h11 does with
both for a body read as data. Strict where a wrong reading would corrupt the
payload: a chunk size is hex digits only, a chunk's data ends in CRLF (a bare
LF is taken too), and a size or trailer line longer than `MAX_LINE` bytes is
an error rather than a buffer that grows without end.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MAX_LINE", "ChunkedError", "Dechunker"]

MAX_LINE: Final = 4096
"""The longest chunk-size line (with its extensions) or trailer line taken, in bytes."""
MAX_TRAILERS: Final = 64
_HEX: Final = re.compile(rb"[0-9A-Fa-f]{1,16}")

_SIZE, _DATA, _DATA_END, _TRAILER, _DONE = range(5)


class ChunkedError(ValueError):
    """The body is not valid chunked coding."""


class Dechunker:
    """One chunked body's decoder (module doc); `done` once its last chunk and trailers are in."""

    __slots__ = ("_buffer", "_left", "_state", "_trailers")

    def __init__(self) -> None:
        self._buffer = b""
        self._left = 0
        self._state = _SIZE
        self._trailers = 0

    @property
    def done(self) -> bool:
        return self._state == _DONE

    @property
    def extra(self) -> bytes:
        """Bytes after the end of the body (a connection that sent them cannot be reused)."""
        return self._buffer if self._state == _DONE else b""

    def feed(self, data: bytes) -> bytes:
        """The payload `data` completes (b"" if none); raises `ChunkedError` on bad coding."""
        if self._state == _DATA and not self._buffer and len(data) < self._left:
            self._left -= len(data)  # the middle of a chunk: all of it is payload
            return data
        buffer = self._buffer + data if self._buffer else data
        out: list[bytes] = []
        at, end = 0, len(buffer)
        state = self._state
        while at < end and state != _DONE:
            if state == _DATA:
                take = min(self._left, end - at)
                out.append(buffer[at : at + take])
                at += take
                self._left -= take
                if not self._left:
                    state = _DATA_END
            elif state == _DATA_END:
                ended = _crlf(buffer, at, end)
                if ended < 0:
                    break  # the LF is still to come
                at, state = ended, _SIZE
            else:  # a size line, or a trailer line
                newline = buffer.find(b"\n", at, at + MAX_LINE + 1)
                if newline < 0:
                    if end - at > MAX_LINE:
                        raise ChunkedError("a chunk size or trailer line is too long")
                    break
                line = buffer[at:newline].removesuffix(b"\r")
                at = newline + 1
                state = self._size(line) if state == _SIZE else self._trailer(line)
        self._state = state
        self._buffer = buffer[at:]
        return b"".join(out) if len(out) != 1 else out[0]

    def _size(self, line: bytes) -> int:
        size = line.split(b";", 1)[0].strip(b" \t")
        if not _HEX.fullmatch(size):
            raise ChunkedError(f"bad chunk size line: {line[:40]!r}")
        self._left = int(size, 16)
        return _DATA if self._left else _TRAILER

    def _trailer(self, line: bytes) -> int:
        if not line:
            return _DONE
        self._trailers += 1
        if self._trailers > MAX_TRAILERS or b":" not in line:
            raise ChunkedError(f"bad trailer line: {line[:40]!r}")
        return _TRAILER


def _crlf(buffer: bytes, at: int, end: int) -> int:
    """Where the CRLF (or bare LF) ending a chunk's data at `at` ends; -1: not all in yet."""
    if buffer[at] == 0x0A:
        return at + 1
    if buffer[at] == 0x0D:
        if end - at < 2:
            return -1
        if buffer[at + 1] == 0x0A:
            return at + 2
    raise ChunkedError("a chunk's data is not followed by CRLF")
