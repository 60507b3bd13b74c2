"""A body that said it was over (`[DONE]`) is read to its end, so its connection is reused;
one held open after `[DONE]` costs the turn a short grace, not the idle timeout."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import pytest

from tests.patience import HANG
from toolrelay import Relay, tool
from toolrelay.adapters.http import Request
from toolrelay.adapters.models import HTTPOptions, OpenAIChat, Retry, Timeouts
from toolrelay.testing import FakeModelServer, MockResponse, MockTransport, SSEReply, ToolCallSpec
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

    async def handler(request: Request) -> MockResponse:
        number = len(ended)
        ended.append(0)
        body = render_sse(ROUNDS[number])

        async def stream() -> AsyncIterator[bytes]:
            for event in body.split(b"\n\n")[:-1]:
                yield event + b"\n\n"
            ended[number] = 1  # runs only when the reader asks past the last event

        return MockResponse(200, {"content-type": "text/event-stream"}, stream())

    model = OpenAIChat(
        base_url="http://fake", model="m", http=HTTPOptions(transport=MockTransport(handler))
    )
    result = await Relay(model, [echo]).run("go")
    assert result.text == "done"
    assert ended == [1, 1]
    await model.aclose()


async def test_the_next_model_call_reuses_the_connection(server: FakeModelServer) -> None:
    server.script(*(SSEReply(chunks) for chunks in ROUNDS * 2))
    model = OpenAIChat(base_url=server.base_url, model="m")
    relay = Relay(model, [echo])
    for _ in range(2):
        assert (await relay.run("go")).text == "done"
    assert len(server.requests) == 4
    assert server.accepted == 1  # four model calls, one connection
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
