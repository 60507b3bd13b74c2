"""One timer per model call (`adapters.models.upstream_body.Watchdog`): it still ends every wait that
should end, and only those."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from tests.http_tracking import TrackingTransport
from tests.patience import HANG
from tests.timers import timers_asked
from toolrelay.adapters.http import Request
from toolrelay.adapters.models import OpenAIChat, Retry, Timeouts
from toolrelay.adapters.models.http import HTTPOptions
from toolrelay.engine.interfaces import ModelRequest
from toolrelay.errors import ProviderError
from toolrelay.testing import MockResponse, SSEReply
from toolrelay.testing.fake_server import FakeModelServer

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}])


def chat(
    server: FakeModelServer, tracker: TrackingTransport | None = None, **timeouts: Any
) -> OpenAIChat:
    http = HTTPOptions(retry=Retry(attempts=1), timeouts=Timeouts(**timeouts), transport=tracker)
    return OpenAIChat(base_url=server.base_url, model="m", http=http)


def counted_timers() -> AbstractContextManager[list[float]]:
    """The deadlines of the timers our code asks the running loop for: its own and
    `asyncio.timeout`'s (not those aiohttp asks for, its connect timeout's included)."""
    return timers_asked(
        lambda _, owner: (
            (owner is asyncio.Timeout or owner.__module__.startswith("toolrelay."))
            and not called_from("aiohttp")
        )
    )


def called_from(package: str) -> bool:
    """Whether a function of `package` is on the current call stack."""
    frame = inspect.currentframe()
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(package + "."):
            return True
        frame = frame.f_back
    return False


async def test_a_model_call_read_to_its_end_uses_one_timer(server: FakeModelServer) -> None:
    server.script(SSEReply([{"i": i} for i in range(5)]))
    client = chat(server)
    with counted_timers() as timers:
        stream = await client.open(REQUEST)
        chunks = [chunk async for chunk in stream]
    assert b"".join(chunks).count(b"data: ") == 6  # five events and [DONE]
    assert len(timers) == 1  # first byte, idle and total on one timer, never moved
    await client.aclose()


async def test_draining_the_end_moves_the_timer_once(server: FakeModelServer) -> None:
    server.script(SSEReply([{"i": 0}]))
    client = chat(server)
    stream = await client.open(REQUEST)
    with counted_timers() as timers:
        await stream.drain(0.25)
    assert len(timers) == 1  # the grace is nearer than the idle timeout: moved forward
    assert [c async for c in stream] == []
    await client.aclose()


async def test_an_outside_cancel_while_opening_stays_a_cancel(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    server.script(SSEReply([{"a": 1}], ttfb_delay=3600))
    client = chat(server, tracker, first_byte=HANG)
    opening = asyncio.create_task(client.open(REQUEST))
    # connected: the request is being sent or waits for headers the server holds back
    assert await asyncio.to_thread(server.wait_for_connections, 1)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    assert opening.cancelling() == 1  # the one outside cancel, none of ours left over
    assert tracker.open_bodies == 0
    await client.aclose()


async def test_the_total_passing_between_reads_is_raised_at_the_next_read(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    second, never = threading.Event(), threading.Event()
    server.script(SSEReply([{"i": i} for i in range(3)], holds={1: second, 2: never}))
    client = chat(server, tracker, idle=HANG, total=2)
    loop = asyncio.get_running_loop()
    stream = await client.open(REQUEST)
    ends = loop.time() + 2  # later than the total's deadline, counted from the request
    await anext(stream)
    second.set()
    await anext(stream)  # a real read: the watchdog is armed
    await asyncio.sleep(ends - loop.time() + 0.05)  # the consumer is busy past the total
    assert loop.time() > ends
    with pytest.raises(ProviderError) as info:
        await anext(stream)
    assert info.value.message == "Model server timed out: no complete response within 2 s"
    assert tracker.open_bodies == 0
    assert [c async for c in stream] == []
    await client.aclose()


async def test_an_idle_timeout_of_zero_still_ends_a_stalled_read(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    server.script(SSEReply([{"i": i} for i in range(3)], stall_after=1, stall_for=3600))
    client = chat(server, tracker, idle=0)
    stream = await client.open(REQUEST)
    await anext(stream)
    with pytest.raises(ProviderError) as info:
        async with asyncio.timeout(HANG):
            await anext(stream)
    assert info.value.message == "Model server timed out: no data for 0 s"
    assert tracker.open_bodies == 0
    await client.aclose()


class _Stubborn:
    """A transport that waits forever for the headers (or, `reading`, for the body after a
    first chunk), and swallows the first cancel of that wait: catches it and waits on.
    `uncancel`: takes the cancel back as it does (as anyio's cancel scopes do), else leaves
    it counted."""

    def __init__(self, *, reading: bool, uncancel: bool) -> None:
        self.reading = reading
        self.uncancel = uncancel
        self.swallowed = 0

    async def _wait_forever(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.swallowed += 1
            task = asyncio.current_task()
            if self.uncancel and task is not None:
                task.uncancel()
        await asyncio.Event().wait()  # the second cancel ends this one

    async def _body(self) -> AsyncIterator[bytes]:
        yield b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n'
        await self._wait_forever()

    async def send(self, request: Request) -> MockResponse:
        if not self.reading:
            await self._wait_forever()
        return MockResponse(200, {"content-type": "text/event-stream"}, self._body())

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("uncancel", [True, False], ids=["taken-back", "left-counted"])
@pytest.mark.parametrize("reading", [False, True], ids=["opening", "reading"])
async def test_a_wait_that_swallows_the_timeouts_cancel_is_still_ended(
    reading: bool, uncancel: bool
) -> None:
    stubborn = _Stubborn(reading=reading, uncancel=uncancel)
    http = HTTPOptions(
        retry=Retry(attempts=1), timeouts=Timeouts(first_byte=0.05, idle=0.05), transport=stubborn
    )
    client = OpenAIChat(base_url="http://127.0.0.1:9", model="m", http=http)

    async def call() -> None:
        stream = await client.open(REQUEST)
        async for _ in stream:
            pass

    task = asyncio.create_task(call())
    await asyncio.wait({task}, timeout=HANG)  # not `asyncio.timeout`: its cancel would end it
    assert task.done(), "the stubborn wait outlived the timeout"
    task.cancel()  # else the wait would outlive the test
    with pytest.raises(ProviderError) as info:
        await task
    assert info.value.message.startswith("Model server timed out")  # a timeout, not a cancel
    assert stubborn.swallowed == 1  # the first cancel was swallowed; a second one ended it
    assert task.cancelling() == 0  # every cancel of the watchdog's taken back
    await client.aclose()
