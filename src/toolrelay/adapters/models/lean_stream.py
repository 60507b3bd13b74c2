"""Plain-TCP upstream connections read straight from asyncio's transport, not through anyio.

httpcore reads a response through anyio's socket stream, and every read pays for
layers a streamed answer never uses: `map_exceptions` (a generator context
manager) and `anyio.fail_after` (a cancel scope, even with no timeout set) around
`SocketStream.receive`, which resumes the transport's reading before it waits and
pauses it again after (two `epoll_ctl` calls per read on uvloop), and yields to
the loop once more when data was already there. Profiled with 50-chat waves,
that read path was about a sixth of the server's CPU, more than parsing.

`LeanBackend` connects as httpcore's own backend does (anyio: happy eyeballs,
socket options, its error mapping), then takes the asyncio transport over with a
small protocol of its own: reading stays on (paused only while more than
`HIGH_WATER` bytes wait unread), a read returns what is buffered (joined, up to
the size asked) or waits on one future, and errors are mapped only when they
happen. A timeout, when httpcore passes one, costs one `asyncio.timeout`. What the
caller sees is the same: data first, then `b""` at the end of the stream or
`ReadError` when the connection broke; `WriteError` for a write on a broken one.

TLS is left to anyio: a stream asked to `start_tls` (before any byte has moved)
gives the transport back to anyio's protocol and returns anyio's TLS stream, so
`https://` upstreams behave exactly as before. So do Unix sockets and trio.
"""

# ruff: noqa: ASYNC109  # httpcore's stream and backend interface takes `timeout` arguments

from __future__ import annotations

import asyncio
import select
import ssl
from collections import deque
from collections.abc import Iterable
from typing import Any, Final

import httpcore

__all__ = ["HIGH_WATER", "LeanBackend", "LeanStream"]

HIGH_WATER: Final = 256 * 1024
"""Unread bytes at which the transport stops reading until the reader catches up."""
LOW_WATER: Final = 64 * 1024


_TRANSPORT: Final = ("set_protocol", "pause_reading", "resume_reading", "write", "abort")


class _Protocol(asyncio.Protocol):
    """What the transport delivers, kept until the stream reads it."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.eof = False
        self.error: BaseException | None = None
        self.reader: asyncio.Future[None] | None = None
        self.writer: asyncio.Future[None] | None = None
        self.write_paused = False
        self.read_paused = False

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        if self.size > HIGH_WATER and not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()
        self._wake_reader()

    def eof_received(self) -> bool | None:
        self.eof = True
        self._wake_reader()
        return None  # the transport closes itself: a client has nothing left to say

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        if exc is not None and self.error is None:
            self.error = exc
        self._wake_reader()
        self._wake_writer()

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._wake_writer()

    def _wake_reader(self) -> None:
        waiter, self.reader = self.reader, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_writer(self) -> None:
        waiter, self.writer = self.writer, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class LeanStream(httpcore.AsyncNetworkStream):
    """One plain-TCP connection, read and written through `_Protocol` (module doc)."""

    def __init__(self, transport: Any, anyio_stream: Any, anyio_protocol: Any) -> None:
        self._transport = transport
        self._protocol = _Protocol(transport)
        self._anyio_stream = anyio_stream
        self._anyio_protocol = anyio_protocol
        self._closed = False

    @classmethod
    def take_over(cls, stream: httpcore.AsyncNetworkStream) -> httpcore.AsyncNetworkStream:
        """`stream` (httpcore's anyio stream on asyncio) as a `LeanStream`; any other
        stream as it is."""
        inner = getattr(stream, "_stream", None)
        transport: Any = getattr(inner, "_transport", None)
        protocol = getattr(inner, "_protocol", None)
        queue = getattr(protocol, "read_queue", None)
        if not isinstance(queue, deque) or not all(  # uvloop's are no `asyncio.Transport`
            hasattr(transport, name) for name in _TRANSPORT
        ):
            return stream
        if getattr(protocol, "exception", None) is not None or transport.is_closing():
            return stream  # broken already: anyio reports it as it would have
        lean = cls(transport, stream, protocol)
        mine = lean._protocol
        mine.chunks.extend(queue)  # nothing is expected before the request, nor lost
        mine.size = sum(map(len, queue))
        queue.clear()
        mine.eof = bool(getattr(protocol, "is_at_eof", False))
        transport.set_protocol(mine)
        transport.resume_reading()  # anyio keeps reading paused between its receives
        return lean

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        if not protocol.chunks and not protocol.eof and not self._closed:
            waiter = protocol.reader = asyncio.get_running_loop().create_future()
            if timeout is None:
                await waiter
            else:
                try:
                    async with asyncio.timeout(timeout):
                        await waiter
                except TimeoutError:
                    raise httpcore.ReadTimeout("timed out reading") from None
        if protocol.chunks:
            return self._take(max_bytes)
        if self._closed:
            raise httpcore.ReadError("the connection is closed")
        if protocol.error is not None:
            raise httpcore.ReadError(str(protocol.error)) from protocol.error
        return b""

    def _take(self, max_bytes: int) -> bytes:
        protocol = self._protocol
        chunks = protocol.chunks
        data = chunks.popleft()
        if chunks and len(data) < max_bytes:  # several arrived while the reader was busy
            parts = [data]
            size = len(data)
            while chunks and size < max_bytes:
                part = chunks.popleft()
                parts.append(part)
                size += len(part)
            data = b"".join(parts)
        if len(data) > max_bytes:
            chunks.appendleft(data[max_bytes:])
            data = data[:max_bytes]
        protocol.size -= len(data)
        if protocol.read_paused and protocol.size < LOW_WATER:
            protocol.read_paused = False
            self._transport.resume_reading()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        protocol = self._protocol
        if self._closed or protocol.error is not None or self._transport.is_closing():
            raise httpcore.WriteError(str(protocol.error or "the connection is closed"))
        try:
            self._transport.write(buffer)
        except RuntimeError as exc:  # uvloop, on a transport closed meanwhile
            raise httpcore.WriteError(str(exc)) from exc
        if not protocol.write_paused:
            return
        waiter = protocol.writer = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(timeout):
                await waiter
        except TimeoutError:
            raise httpcore.WriteTimeout("timed out writing") from None
        if self._closed or protocol.error is not None:
            raise httpcore.WriteError(str(protocol.error or "the connection is closed"))

    async def aclose(self) -> None:
        """As anyio closes one: at once, unsent data dropped, then one turn of the loop (the
        transport closes its socket in it)."""
        self._closed = True
        self._transport.abort()
        self._protocol._wake_reader()
        self._protocol._wake_writer()
        await asyncio.sleep(0)

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """anyio's TLS stream, on the transport handed back (no byte has moved yet)."""
        protocol = self._protocol
        if self._closed or protocol.chunks or protocol.eof:
            await self.aclose()
            raise httpcore.ConnectError(str(protocol.error or "the server spoke before TLS"))
        self._transport.set_protocol(self._anyio_protocol)
        self._transport.pause_reading()
        tls: httpcore.AsyncNetworkStream = await self._anyio_stream.start_tls(
            ssl_context, server_hostname, timeout
        )
        return tls

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # idle and readable: the server closed it (httpcore's test)
            protocol = self._protocol
            if protocol.chunks or protocol.eof or self._closed:
                return True
            return _readable(self._transport.get_extra_info("socket"))
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        return None


def _readable(sock: Any) -> bool:
    """Bytes (or the end) wait on the socket that the loop has not read yet."""
    fileno = sock.fileno() if sock is not None else -1
    if fileno < 0:
        return True
    poll = select.poll()
    poll.register(fileno, select.POLLIN)
    return bool(poll.poll(0))


class LeanBackend(httpcore.AsyncNetworkBackend):
    """A pool's own backend, its plain-TCP streams on asyncio taken over by `LeanStream`."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_tcp(
            host,
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )
        return LeanStream.take_over(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return await self._backend.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)
