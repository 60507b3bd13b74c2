"""`LeanStream`: plain-TCP upstream connections read straight from the transport.

Real sockets throughout: a small asyncio server on 127.0.0.1 says what each test
needs, the stream is made by `LeanBackend` around httpcore's own backend, as the
model clients' pools make it (on asyncio and on uvloop, which the server runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

import httpcore
import pytest
import uvloop

from toolrelay.adapters.models.http import HTTPOptions, Upstream
from toolrelay.adapters.models.lean_stream import HIGH_WATER, LeanBackend, LeanStream
from toolrelay.testing import FakeModelServer, SSEReply

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Peer:
    """A server on a real socket and the connection it accepted."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.done = asyncio.Event()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self.handler(reader, writer)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self.done.set()


@contextlib.asynccontextmanager
async def connect(handler: Handler) -> AsyncIterator[tuple[httpcore.AsyncNetworkStream, Peer]]:
    peer = Peer(handler)
    server = await asyncio.start_server(peer._serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    stream = await LeanBackend(httpcore.AnyIOBackend()).connect_tcp("127.0.0.1", port)
    try:
        yield stream, peer
    finally:
        await stream.aclose()
        server.close()
        await server.wait_closed()


async def read_to_end(stream: httpcore.AsyncNetworkStream, size: int = 65536) -> bytes:
    parts = []
    while data := await stream.read(size):
        parts.append(data)
    return b"".join(parts)


async def eventually(check: Callable[[], bool]) -> None:
    """Let the loop run until `check` holds (a test's deadline bounds it, not a clock here)."""
    while not check():  # noqa: ASYNC110  # the protocol's state has no event to wait on
        await asyncio.sleep(0.001)


async def _upstream_streams() -> list[str]:
    with FakeModelServer() as fake:
        fake.set_default(SSEReply([{"choices": [{"delta": {"content": "hi"}}]}]))
        upstream = Upstream(HTTPOptions())
        try:
            body = await upstream.post(f"{fake.base_url}/v1/chat/completions", {}, stream=True)
            assert b"".join([c async for c in body]).count(b"data:") == 2
            pool = upstream.client.client._transport._pool  # type: ignore[attr-defined]
            return [type(c._connection._network_stream).__name__ for c in pool.connections]
        finally:
            await upstream.aclose()


def test_model_clients_read_plain_tcp_through_it_on_asyncio_and_uvloop() -> None:
    assert asyncio.run(_upstream_streams()) == ["LeanStream"]
    assert uvloop.run(_upstream_streams()) == ["LeanStream"]


@pytest.mark.anyio
async def test_data_then_the_end_then_nothing_more() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readexactly(5)
        writer.write(b"echo:" + request)
        writer.close()

    async with connect(handler) as (stream, _peer):
        assert isinstance(stream, LeanStream)
        await stream.write(b"hello")
        assert await read_to_end(stream) == b"echo:hello"
        assert await stream.read(100) == b""  # the end stays the end
        assert stream.get_extra_info("is_readable")  # idle and closed by the peer: expired


@pytest.mark.anyio
async def test_chunks_that_piled_up_come_in_one_read_up_to_the_size_asked() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async with connect(handler) as (stream, _peer):
        assert isinstance(stream, LeanStream)
        for i in range(3):  # three deliveries while the reader was busy elsewhere
            stream._protocol.data_received(b"%d" % i * 10)
        assert await stream.read(25) == b"0" * 10 + b"1" * 10 + b"2" * 5
        assert await stream.read(25) == b"2" * 5
        assert stream._protocol.size == 0


@pytest.mark.anyio
async def test_reading_pauses_while_much_is_unread_and_nothing_is_lost() -> None:
    body = bytes(range(256)) * (HIGH_WATER // 256 * 4)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(body)
        await writer.drain()
        writer.close()

    async with connect(handler) as (stream, _peer):
        assert isinstance(stream, LeanStream)
        protocol = stream._protocol
        await eventually(lambda: protocol.read_paused)
        assert HIGH_WATER < protocol.size < len(body)  # the rest waits in the kernel
        assert await read_to_end(stream, 4096) == body
        assert not protocol.read_paused


@pytest.mark.anyio
async def test_a_broken_connection_gives_its_data_then_a_read_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"partial")
        await reader.read()  # until the test has read it

    async with connect(handler) as (stream, _peer):
        assert isinstance(stream, LeanStream)
        await eventually(lambda: bool(stream._protocol.chunks))
        stream._protocol.connection_lost(ConnectionResetError("reset by peer"))
        assert await stream.read(100) == b"partial"
        with pytest.raises(httpcore.ReadError, match="reset by peer"):
            await stream.read(100)
        with pytest.raises(httpcore.WriteError, match="reset by peer"):
            await stream.write(b"more")


@pytest.mark.anyio
async def test_a_closed_stream_refuses_reads_and_writes_and_a_waiting_read_ends() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async with connect(handler) as (stream, peer):
        waiting = asyncio.create_task(stream.read(100))
        await asyncio.sleep(0)
        await stream.aclose()
        with pytest.raises(httpcore.ReadError):
            await waiting
        with pytest.raises(httpcore.WriteError):
            await stream.write(b"x")
        await peer.done.wait()  # the server saw the connection go


@pytest.mark.anyio
async def test_a_read_timeout_is_httpcores() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async with connect(handler) as (stream, _peer):
        with pytest.raises(httpcore.ReadTimeout):
            await stream.read(100, timeout=0.01)
        assert not stream.get_extra_info("is_readable")  # idle, nothing came: reusable


@pytest.mark.anyio
async def test_tls_is_handed_back_to_anyio_before_any_byte_moves() -> None:
    """The server speaks first (no TLS server does): starting TLS then is refused."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"not a TLS server")
        await reader.read()

    async with connect(handler) as (stream, _peer):
        assert isinstance(stream, LeanStream)
        await eventually(lambda: bool(stream._protocol.chunks))
        with pytest.raises(httpcore.ConnectError, match="before TLS"):
            await stream.start_tls(ssl.create_default_context())


@pytest.mark.anyio
async def test_bytes_the_loop_has_not_read_yet_count_as_readable() -> None:
    """httpcore asks before reusing an idle connection; the kernel may hold the server's
    goodbye that the loop has not delivered yet."""
    sent = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(1)
        writer.write(b"bye")
        await writer.drain()
        sent.set()
        await reader.read()

    async with connect(handler) as (stream, _peer):
        assert isinstance(stream, LeanStream)
        assert not stream.get_extra_info("is_readable")
        stream._transport.pause_reading()  # the loop will not read it for us
        await stream.write(b"?")
        await sent.wait()
        await eventually(lambda: stream.get_extra_info("is_readable"))
        assert not stream._protocol.chunks  # seen on the socket, not in the buffer
