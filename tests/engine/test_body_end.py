"""A body that said it was over (`[DONE]`) is read to its end, so its connection is reused;
one held open after `[DONE]` costs the turn a short grace, not the idle timeout."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import httpx
import pytest

from tests.patience import HANG
from toolrelay import Relay, tool
from toolrelay.adapters.models import HTTPOptions, OpenAIChat, Retry, Timeouts
from toolrelay.testing import FakeModelServer, SSEReply, ToolCallSpec
from toolrelay.testing.wire import chat_chunks, render_sse

pytestmark = pytest.mark.anyio


@tool
async def echo(text: str) -> str:
    """Say it back."""
    return text


ROUNDS = [
    chat_chunks(tool_calls=[ToolCallSpec("echo", {"text": "a"}, id="call_1")]),
    chat_chunks(text=["done"]),
]


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


async def test_each_body_is_read_to_its_end() -> None:
    ended: list[int] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        number = len(ended)
        ended.append(0)
        body = render_sse(ROUNDS[number])

        async def stream() -> AsyncIterator[bytes]:
            for event in body.split(b"\n\n")[:-1]:
                yield event + b"\n\n"
            ended[number] = 1  # runs only when the reader asks past the last event

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream())

    model = OpenAIChat(
        base_url="http://fake", model="m", http=HTTPOptions(transport=httpx.MockTransport(handler))
    )
    result = await Relay(model, [echo]).run("go")
    assert result.text == "done"
    assert ended == [1, 1]
    await model.aclose()


class StreamRecorder(httpx.AsyncBaseTransport):
    """The default transport, noting which network stream (connection) each response used."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.streams: list[object] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        self.streams.append(response.extensions["network_stream"])
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_the_next_model_call_reuses_the_connection(server: FakeModelServer) -> None:
    server.script(*(SSEReply(chunks) for chunks in ROUNDS * 2))
    recorder = StreamRecorder()
    model = OpenAIChat(base_url=server.base_url, model="m", http=HTTPOptions(transport=recorder))
    relay = Relay(model, [echo])
    for _ in range(2):
        assert (await relay.run("go")).text == "done"
    assert len(recorder.streams) == 4
    assert all(s is recorder.streams[0] for s in recorder.streams)
    await relay.aclose()


async def test_a_body_held_open_after_done_ends_the_turn_anyway(server: FakeModelServer) -> None:
    done: list[bytes | str | Mapping[str, Any]] = [b"data: [DONE]\n\n", b"data: late\n\n"]
    events = [*chat_chunks(text=["still ", "here"]), *done]
    server.script(SSEReply(events, done=False, stall_after=len(events) - 1, stall_for=3600))
    http = HTTPOptions(retry=Retry(attempts=1), timeouts=Timeouts(idle=3600))
    model = OpenAIChat(base_url=server.base_url, model="m", http=http)
    async with asyncio.timeout(HANG):
        result = await Relay(model).run("hi")
    assert result.status == "completed"
    assert result.text == "still here"
    await model.aclose()
    assert await asyncio.to_thread(server.wait_for_connections, 0)
