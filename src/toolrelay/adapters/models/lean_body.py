"""A chunked response body read straight off a `LeanStream`, past httpcore's and h11's layers.

httpcore reads a body through three async generators (the pool's stream, the
connection's stream with a trace context, `_receive_response_body`) and h11's
event machinery (`next_event`, its reader, its receive buffer, its state
transitions), several times per network read. Profiled with hundreds of
streams, that was more of the server's CPU than parsing the answer. Here one
generator reads the connection (`LeanStream.read`) and decodes the chunked
coding with `core.chunked.Dechunker`: one payload per network read, all of it.

It takes a body over only where nothing is lost by doing so: an HTTP/1.1
connection of httpcore's pool on a `LeanStream` (plain TCP), a chunked body
h11 has not started on. Bytes h11 already received past the head are taken
from its buffer first. At the body's end h11 is handed the last chunk alone,
so it reaches the end of the message as if it had read it all, and closing
the response gives the connection back to the pool exactly as before. A body
that ends badly (the server hangs up mid-body, bad coding) raises httpcore's
own errors, which the caller renames as httpx does; an unfinished body leaves
h11 unfinished, so httpcore closes the connection. Anything else (TLS, other
codings, HTTP/2) is read by httpcore as before.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, Final

import h11
import httpcore
from h11._readers import ChunkedReader
from httpcore._async.connection_pool import PoolByteStream
from httpcore._async.http11 import AsyncHTTP11Connection, HTTP11ConnectionByteStream

from toolrelay.adapters.models.lean_stream import LeanStream
from toolrelay.core.chunked import ChunkedError, Dechunker

__all__ = ["lean_body"]

READ_BYTES: Final = 65536
_LAST_CHUNK: Final = b"0\r\n\r\n"
_CUT_SHORT: Final = (
    "peer closed connection without sending complete message body (incomplete chunked read)"
)
"""h11's words (through httpcore) for the same failure: callers and logs see no difference."""


def lean_body(pool_stream: Any) -> AsyncGenerator[bytes, None] | None:
    """The body of httpcore's `pool_stream` read lean (module doc), or None where it cannot be."""
    if type(pool_stream) is not PoolByteStream:
        return None
    stream = pool_stream._stream
    if type(stream) is not HTTP11ConnectionByteStream or stream._closed:
        return None
    connection = stream._connection
    if type(connection) is not AsyncHTTP11Connection:
        return None
    network = connection._network_stream
    state = connection._h11_state
    reader = getattr(state, "_reader", None)
    if (
        type(network) is not LeanStream
        or state.their_state is not h11.SEND_BODY
        or type(reader) is not ChunkedReader
        or not _fresh(reader)
        or state._receive_buffer_closed  # h11 saw the connection close already
    ):
        return None
    received = state._receive_buffer
    ahead = bytes(received._extract(len(received))) if len(received) else b""
    return _read(network, state, ahead)


def _fresh(reader: ChunkedReader) -> bool:
    """h11's chunked reader has read nothing of the body yet."""
    return not (reader._bytes_in_chunk or reader._bytes_to_discard or reader._reading_trailer)


async def _read(
    network: LeanStream, state: h11.Connection, ahead: bytes
) -> AsyncGenerator[bytes, None]:
    chunks = Dechunker()
    data, ahead = ahead, b""  # nothing read is held while the stream waits: memory per chat
    while True:
        if data:
            try:
                payload = chunks.feed(data)
            except ChunkedError as exc:
                raise httpcore.RemoteProtocolError(f"malformed chunked encoding: {exc}") from exc
            data = b""
            if payload:
                yield payload
                payload = b""
            if chunks.done:
                break
        data = await network.read(READ_BYTES)
        if not data:
            raise httpcore.RemoteProtocolError(_CUT_SHORT)
    if not chunks.extra:  # else h11 stays mid-body: httpcore closes the connection
        state.receive_data(_LAST_CHUNK)
        state.next_event()  # h11's fresh chunked reader: the end of the message
