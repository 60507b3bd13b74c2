"""The wire format between `BusHost` and `IpcBus`: length-prefixed orjson arrays.

A frame is a 4-byte big-endian length, then that many bytes of one orjson
array. Requests are `[id, op, *args]`; a reply is `[id, value]`; a stream
(a subscription or a control listener) sends `[id, tag, *fields]` until it ends.
Ids are the client's, unique per connection, so many calls and streams share
one socket.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import orjson

from toolrelay.errors import ToolrelayError

__all__ = ["MAX_FRAME", "BusUnavailable", "FrameError", "FrameReader", "FrameWriter", "frame"]

HEADER: Final = 4
MAX_FRAME: Final = 256 << 20
"""Largest frame either side accepts: a bigger length is a broken or hostile peer."""


class BusUnavailable(ToolrelayError, ConnectionError):
    """The bus host cannot be reached (not started, gone, or the bus was closed)."""


class FrameError(ValueError):
    """The peer sent bytes that are not a frame; the connection cannot be trusted further."""


def frame(message: list[Any]) -> bytes:
    """One message ready to write."""
    payload = orjson.dumps(message)
    if len(payload) > MAX_FRAME:
        raise ValueError(f"bus message of {len(payload)} bytes is over the {MAX_FRAME}-byte limit")
    return len(payload).to_bytes(HEADER, "big") + payload


class FrameReader:
    """Splits received bytes into decoded messages.

    A partial frame's chunks are kept in a list until the whole frame is in, so a
    large frame arriving in many reads is joined once, not re-copied per read.
    """

    __slots__ = ("_chunks", "_have", "_need")

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._have = 0
        self._need = HEADER

    def feed(self, data: bytes) -> list[Any]:
        """The messages completed by `data`; raises FrameError on a malformed frame."""
        if self._chunks:
            self._chunks.append(data)
            self._have += len(data)
            if self._have < self._need:
                return []
            data = b"".join(self._chunks)
            self._chunks.clear()
        view = memoryview(data)
        size_left = len(data)
        pos = 0
        messages: list[Any] = []
        need = HEADER
        while size_left - pos >= HEADER:
            size = int.from_bytes(view[pos : pos + HEADER], "big")
            if size > MAX_FRAME:
                raise FrameError(f"frame length {size} is over the {MAX_FRAME}-byte limit")
            end = pos + HEADER + size
            if end > size_left:
                need = HEADER + size
                break
            try:
                messages.append(orjson.loads(view[pos + HEADER : end]))
            except orjson.JSONDecodeError as exc:
                raise FrameError(f"frame is not JSON: {exc}") from None
            pos = end
        if pos < size_left:
            rest = bytes(view[pos:])
            self._chunks.append(rest)
            self._have = len(rest)
            self._need = need
        return messages


class FrameWriter:
    """Gathers the frames pushed during one turn of the event loop into one socket write.

    Many chats publish through one connection; under load that is one system call
    for a burst of frames instead of one per frame. Nothing waits longer: the
    flush runs right after the callbacks that pushed.
    """

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.WriteTransport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def push(self, payload: bytes) -> None:
        """Queue a frame (from `frame`) for this turn's write."""
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(payload)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))
