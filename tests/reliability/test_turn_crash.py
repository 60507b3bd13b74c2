"""Issue 7 item 5, the loop invariant: any exception inside a turn ends it `failed`.

Whatever raises inside a turn (a bug, a body the core chokes on, a request
the encoder refuses), the turn must end with status `failed`, a
`chat:message:error` event, its final `chat:completion` event and its
partial output saved, never with an exception out of `Relay.run` or a
stream that just stops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from toolrelay.adapters.models import OpenAIChat, Retry
from toolrelay.adapters.models.http import HTTPOptions
from toolrelay.core import events as ev
from toolrelay.core.formats.content import BodyFormat
from toolrelay.engine.interfaces import Message, ModelRequest
from toolrelay.engine.relay import Relay
from toolrelay.server.client_tools import ClientTool
from toolrelay.testing import FakeModelServer, ListSink, SSEReply
from toolrelay.testing.wire import chat_chunks, render_sse

pytestmark = pytest.mark.anyio


class Saved:
    """A ChatStore that keeps what was saved."""

    def __init__(self) -> None:
        self.turns: dict[str, Mapping[str, Any]] = {}

    async def save_turn(self, chat_id: str, message_id: str, turn: Mapping[str, Any]) -> None:
        self.turns[message_id] = turn

    async def load_messages(self, chat_id: str) -> list[Message]:
        return []


class _BrokenStream:
    """Streams some text, then raises what no model client should (a bug)."""

    format: BodyFormat = "sse"

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.closed = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece
        raise RuntimeError("a bug deep inside")

    async def aclose(self) -> None:
        self.closed = True


class BrokenModel:
    def __init__(self) -> None:
        body = render_sse(chat_chunks(text=["Half ", "an ", "answer"]), done=False)
        self.stream = _BrokenStream(body.split(b"\n\n")[:-2])  # no finish chunk: cut mid-answer
        self.stream.pieces = [p + b"\n\n" for p in self.stream.pieces]

    async def open(self, request: ModelRequest) -> _BrokenStream:
        return self.stream

    async def aclose(self) -> None:
        pass


class RefusingModel:
    """`open` raises a non-provider error, as orjson does on a body nested too deep."""

    async def open(self, request: ModelRequest) -> Any:
        raise TypeError("Recursion limit reached")

    async def aclose(self) -> None:
        pass


async def test_a_crash_mid_stream_ends_the_turn_failed_with_its_partial_text() -> None:
    model, store, sink = BrokenModel(), Saved(), ListSink()
    relay = Relay(model, store=store)
    result = await relay.run("hi", sink=sink, chat_id="c1", message_id="m1")
    assert result.status == "failed"
    assert result.error and "RuntimeError" in result.error
    assert "a bug deep inside" not in result.error  # internals stay in the log
    assert result.text == "Half an answer"
    assert model.stream.closed
    saved = store.turns["m1"]
    assert saved["status"] == "failed" and saved["content"] == "Half an answer"
    assert sink.of(ev.CHAT_MESSAGE_ERROR)
    final = sink.events[-1]
    assert final.type == ev.CHAT_COMPLETION and final.data["done"] is True
    assert final.data["status"] == "failed"


async def test_a_crash_before_any_byte_ends_the_turn_failed() -> None:
    store, sink = Saved(), ListSink()
    relay = Relay(RefusingModel(), store=store)
    result = await relay.run("hi", sink=sink, chat_id="c1", message_id="m1")
    assert result.status == "failed" and result.error
    assert store.turns["m1"]["status"] == "failed"
    assert [e.type for e in sink.events][-2:] == [ev.CHAT_MESSAGE_ERROR, ev.CHAT_COMPLETION]


async def test_a_streamed_crash_ends_with_the_final_event() -> None:
    relay = Relay(BrokenModel())
    events = [e async for e in relay.stream("hi")]
    assert events[-1].type == ev.CHAT_COMPLETION
    assert events[-1].data["status"] == "failed"
    assert any(e.type == ev.CHAT_MESSAGE_ERROR for e in events)


def nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


async def test_a_tool_nested_too_deep_for_the_encoder_fails_the_turn() -> None:
    """A library caller's tool whose schema orjson cannot encode (300 levels)."""
    with FakeModelServer() as upstream:
        upstream.set_default(SSEReply(chat_chunks(text="never asked")))
        store, sink = Saved(), ListSink()
        model = OpenAIChat(
            base_url=upstream.base_url, model="m", http=HTTPOptions(retry=Retry(attempts=1))
        )
        async with Relay(model, store=store) as relay:
            deep = ClientTool("deep", "", nested(300))
            result = await relay.run(
                "hi", sink=sink, chat_id="c", message_id="m", extra_tools=[deep]
            )
        assert result.status == "failed"
        assert store.turns["m"]["status"] == "failed"
        assert sink.of(ev.CHAT_MESSAGE_ERROR)
        assert upstream.requests == []
