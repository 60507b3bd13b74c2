"""The model clients' connections, over real sockets: reused, bounded, never leaked.

A real server counts the connections it accepts, so reuse is seen from the outside:
sequential calls and a whole tool turn go over one connection; a burst larger than the
pool waits for connections instead of failing; a failed call gives its connection back.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.patience import HANG
from toolrelay import Relay, tool
from toolrelay.adapters.models import OpenAIChat, Retry, Timeouts
from toolrelay.adapters.models.http import HTTPOptions
from toolrelay.engine.interfaces import ModelRequest
from toolrelay.errors import ProviderError
from toolrelay.testing import JSONReply, SSEReply, ToolCallSpec
from toolrelay.testing.fake_server import FakeModelServer
from toolrelay.testing.wire import chat_chunks

from .conftest import read_all

REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}])
ANSWER = b'data: {"a":1}\n\ndata: [DONE]\n\n'


@tool
async def echo(text: str) -> str:
    """Say it back."""
    return text


@pytest.mark.anyio
async def test_sequential_calls_reuse_one_connection() -> None:
    with FakeModelServer() as server:
        server.set_default(SSEReply([{"a": 1}]))
        client = OpenAIChat(base_url=server.base_url, model="m")
        for _ in range(5):
            assert await read_all(await client.open(REQUEST)) == ANSWER
        assert len(server.requests) == 5
        assert server.accepted == 1
        await client.aclose()
        assert await asyncio.to_thread(server.wait_for_connections, 0)


@pytest.mark.anyio
async def test_a_tool_turn_makes_its_model_calls_on_one_connection() -> None:
    with FakeModelServer() as server:
        server.script(
            SSEReply(chat_chunks(tool_calls=[ToolCallSpec("echo", {"text": "a"}, id="c1")])),
            SSEReply(chat_chunks(tool_calls=[ToolCallSpec("echo", {"text": "b"}, id="c2")])),
            SSEReply(chat_chunks(text=["done"])),
        )
        relay = Relay(OpenAIChat(base_url=server.base_url, model="m"), [echo])
        result = await relay.run("go")
        await relay.aclose()
        assert result.text == "done"
        assert len(server.requests) == 3
        assert server.accepted == 1


@pytest.mark.anyio
async def test_a_burst_of_500_on_20_connections_is_answered_whole() -> None:
    """Calls past the pool wait for a connection (within the connect timeout) and none
    fails; the server never sees more than the pool's connections."""
    with FakeModelServer() as server:
        server.set_default(SSEReply([{"a": 1}]))
        http = HTTPOptions(
            max_connections=20, retry=Retry(attempts=1), timeouts=Timeouts(connect=HANG)
        )
        client = OpenAIChat(base_url=server.base_url, model="m", http=http)

        async def call() -> bytes:
            return await read_all(await client.open(REQUEST))

        async with asyncio.timeout(HANG):
            bodies = await asyncio.gather(*(call() for _ in range(500)))
        await client.aclose()
    assert bodies == [ANSWER] * 500
    assert len(server.requests) == 500
    assert server.accepted <= 20


@pytest.mark.anyio
async def test_a_failed_call_gives_its_connection_back() -> None:
    """On a one-connection pool, a call after failed ones still gets the connection."""
    with FakeModelServer() as server:
        server.script(*[JSONReply({"error": {"message": "no"}}, status=503)] * 5)
        server.set_default(SSEReply([{"a": 1}]))
        http = HTTPOptions(
            max_connections=1, retry=Retry(attempts=1), timeouts=Timeouts(connect=HANG)
        )
        client = OpenAIChat(base_url=server.base_url, model="m", http=http)
        for _ in range(5):
            with pytest.raises(ProviderError, match="no"):
                await client.open(REQUEST)
        async with asyncio.timeout(HANG):
            assert await read_all(await client.open(REQUEST)) == ANSWER
        await client.aclose()
        assert server.accepted == 1


@pytest.mark.anyio
async def test_waiting_for_a_free_connection_is_bounded_by_the_connect_timeout() -> None:
    """The pool's one connection is held by a stalled stream: the next call waits for it
    no longer than `connect`, and says so."""
    with FakeModelServer() as server:
        server.script(SSEReply([{"a": 1}, {"a": 2}], stall_after=1))
        http = HTTPOptions(
            max_connections=1, retry=Retry(attempts=1), timeouts=Timeouts(connect=0.2)
        )
        client = OpenAIChat(base_url=server.base_url, model="m", http=http)
        held = await client.open(REQUEST)
        with pytest.raises(ProviderError) as info:
            async with asyncio.timeout(HANG):
                await client.open(REQUEST)
        assert (
            info.value.message == "Cannot connect to the model server: no connection within 0.2 s"
        )
        await held.aclose()
        await client.aclose()
