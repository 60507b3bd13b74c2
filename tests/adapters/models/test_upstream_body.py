"""`UpstreamBody` over the default transport (aiohttp's, unwrapped): its errors come out as
sentences, connections go back to the pool when a body is read to its end and are dropped
when it is closed early. (The other model-client tests mostly wrap the transport to count
bodies.)"""

from __future__ import annotations

import asyncio

import pytest

from toolrelay.adapters.models import OpenAIChat, Retry
from toolrelay.adapters.models.http import HTTPOptions
from toolrelay.engine.interfaces import ModelRequest
from toolrelay.errors import ProviderError
from toolrelay.testing import SSEReply, wire
from toolrelay.testing.fake_server import FakeModelServer

from .conftest import read_all

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}])
EVENTS = [{"i": i} for i in range(5)]


def chat(server: FakeModelServer) -> OpenAIChat:
    """A client on the default transport, tried once."""
    return OpenAIChat(
        base_url=server.base_url, model="m", http=HTTPOptions(retry=Retry(attempts=1))
    )


async def test_a_dropped_connection_is_a_lost_connection(server: FakeModelServer) -> None:
    server.script(SSEReply(EVENTS, drop_after=2))
    client = chat(server)
    stream = await client.open(REQUEST)
    got: list[bytes] = []
    with pytest.raises(ProviderError) as info:
        async for chunk in stream:
            got.append(chunk)
    assert info.value.message == (
        "Connection to the model server was lost mid-response: "
        "the server closed the connection before the body's end"
    )
    assert b"".join(got) == wire.render_sse(EVENTS[:2], done=False)
    assert server.wait_for_connections(0)
    await client.aclose()


async def test_bodies_read_to_the_end_reuse_one_connection(server: FakeModelServer) -> None:
    server.set_default(SSEReply(EVENTS))
    client = chat(server)
    first = await read_all(await client.open(REQUEST))
    second = await read_all(await client.open(REQUEST))
    assert first == second == wire.render_sse(EVENTS)
    assert server.open_connections == server.accepted == 1
    await client.aclose()
    assert server.wait_for_connections(0)


async def test_a_body_closed_early_drops_its_connection(server: FakeModelServer) -> None:
    server.script(SSEReply(EVENTS, delay=0.01))
    client = chat(server)
    stream = await client.open(REQUEST)
    assert await anext(stream) == b'data: {"i":0}\n\n'
    await stream.aclose()
    assert server.wait_for_connections(0)
    assert [c async for c in stream] == []
    await client.aclose()


async def _raw_server(reply: bytes) -> tuple[asyncio.Server, str]:
    """A socket that answers any request with `reply`, as it is, and keeps the connection."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(reply)
            await writer.drain()
            await reader.read()  # until the client hangs up
        finally:
            writer.close()

    raw = await asyncio.start_server(answer, "127.0.0.1", 0)
    return raw, f"http://127.0.0.1:{raw.sockets[0].getsockname()[1]}"


async def test_a_bad_chunked_coding_is_a_lost_connection_that_says_so() -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
    raw, url = await _raw_server(head + b"\r\n6\r\ndata: \r\nzz\r\n{}\r\n")
    client = OpenAIChat(base_url=url, model="m", http=HTTPOptions(retry=Retry(attempts=1)))
    with pytest.raises(ProviderError) as info:  # in `open`: all came at once
        await read_all(await client.open(REQUEST))
    assert info.value.message == (
        "Model server request failed: bad answer: Invalid character in chunk size: b'zz'"
    )
    await client.aclose()
    raw.close()
    await raw.wait_closed()
