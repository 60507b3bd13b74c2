"""A model answer past the route's `max_response_bytes` is cut: the call ends with an error
that says so, what came before it is kept, and the connection is dropped.

And memory is given back after a big answer (`adapters.models.memory`): the give-back
runs once things settle, and only after a big body.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.http_tracking import TrackingTransport
from toolrelay import Relay
from toolrelay.adapters.models import OpenAIChat, Retry
from toolrelay.adapters.models import memory as memory_module
from toolrelay.adapters.models.http import HTTPOptions
from toolrelay.core import events as ev
from toolrelay.engine.interfaces import ModelRequest
from toolrelay.errors import ProviderError
from toolrelay.testing import ListSink, SSEReply
from toolrelay.testing.fake_server import FakeModelServer
from toolrelay.testing.wire import chat_chunks

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}])
TOO_LARGE = (
    "Model server response too large: over 4 KiB, the route's max_response_bytes; "
    "the rest was not read"
)


def capped(server: FakeModelServer, tracker: TrackingTransport, cap: int | None) -> OpenAIChat:
    http = HTTPOptions(retry=Retry(attempts=1), max_response_bytes=cap, transport=tracker)
    return OpenAIChat(base_url=server.base_url, model="m", http=http)


async def test_a_body_past_the_cap_ends_with_an_error_and_what_came_is_kept(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    events = [{"i": i, "pad": "x" * 200} for i in range(100)]  # ~22 KB in all
    server.script(SSEReply(events, delay=0.001))
    client = capped(server, tracker, 4096)
    stream = await client.open(REQUEST)
    got: list[bytes] = []
    with pytest.raises(ProviderError) as info:
        async for chunk in stream:
            got.append(chunk)
    assert info.value.message == TOO_LARGE
    assert 0 < sum(len(c) for c in got) <= 4096
    assert tracker.open_bodies == 0
    assert await asyncio.to_thread(server.wait_for_connections, 0)  # not reused mid-body
    await client.aclose()


async def test_under_the_cap_and_without_one_the_whole_body_is_read(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    events = [{"i": i, "pad": "x" * 200} for i in range(100)]
    server.set_default(SSEReply(events))
    for cap in (1 << 20, None):
        client = capped(server, tracker, cap)
        body = b"".join([c async for c in await client.open(REQUEST)])
        assert body.count(b"data: ") == 101
        await client.aclose()


async def test_a_turn_cut_by_the_cap_fails_saying_why_and_keeps_its_text(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    words = [f"word{i:04d} " for i in range(2000)]  # each chunk ~120 bytes: ~240 KB
    server.script(SSEReply(chat_chunks(text=words), delay=0.0005))
    relay = Relay(capped(server, tracker, 4096))
    sink = ListSink()
    result = await relay.run("go", sink=sink)
    await relay.aclose()
    assert result.status == "failed"
    assert result.error == TOO_LARGE
    assert [e.data for e in sink.of(ev.CHAT_MESSAGE_ERROR)] == [{"error": {"content": TOO_LARGE}}]
    assert result.text  # the partial answer is kept
    assert "".join(words).startswith(result.text)
    assert len(result.text) < 4096
    assert [(i["type"], i["status"]) for i in result.output] == [("message", "incomplete")]


async def test_memory_is_given_back_once_after_a_big_body(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    gave: list[int] = []

    def give_back() -> int:
        gave.append(1)
        return 0

    monkeypatch.setattr(memory_module, "give_back", give_back)
    monkeypatch.setattr(memory_module, "BIG_BYTES", 10_000)
    monkeypatch.setattr(memory_module, "SETTLE_S", 0.0)
    small = [{"i": i} for i in range(3)]
    big = [{"i": i, "pad": "x" * 1000} for i in range(30)]
    server.script(SSEReply(small), SSEReply(big), SSEReply(big))
    client = OpenAIChat(base_url=server.base_url, model="m")
    for _ in range(3):
        [c async for c in await client.open(REQUEST)]
        await asyncio.sleep(0.05)  # a turn of the loop for the give-back (SETTLE_S = 0)
    await client.aclose()
    assert gave == [1, 1]  # after each big body, not after the small one
