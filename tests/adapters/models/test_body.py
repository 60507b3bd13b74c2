"""`UpstreamBody` over httpx's default transport, whose stream it reads one layer down
(`transport_chunks`): errors still come out as httpx would name them, connections still go
back to the pool. (The other model-client tests mostly wrap the transport to count bodies,
which keeps httpx's own layer in place.)"""

from __future__ import annotations

import httpx
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
    """A client on one pool (a transport given) of httpx's default transport, unwrapped."""
    http = HTTPOptions(retry=Retry(attempts=1), transport=httpx.AsyncHTTPTransport())
    return OpenAIChat(base_url=server.base_url, model="m", http=http)


async def test_a_dropped_connection_is_a_lost_connection(server: FakeModelServer) -> None:
    server.script(SSEReply(EVENTS, drop_after=2))
    client = chat(server)
    stream = await client.open(REQUEST)
    got: list[bytes] = []
    with pytest.raises(ProviderError) as info:
        async for chunk in stream:
            got.append(chunk)
    # httpcore's RemoteProtocolError, renamed as httpx renames it
    assert info.value.message == (
        "Connection to the model server was lost mid-response: "
        "peer closed connection without sending complete message body (incomplete chunked read)"
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
    assert server.open_connections == 1
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
