"""Pipeline outlets over real sockets: `HttpOutlet` posting to a `FakeModelServer` route.

The same fake server plays both the model (`/v1/chat/completions`) and the
pipelines server (`/pipeline/outlet`), so the whole turn is real HTTP.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.patience import HANG
from toolrelay import Relay
from toolrelay.adapters.models import OpenAIChat
from toolrelay.adapters.pipelines import HttpOutlet
from toolrelay.core import events as ev
from toolrelay.testing import FakeModelServer, JSONReply, RecordedRequest, SSEReply
from toolrelay.testing.sinks import ListSink
from toolrelay.testing.wire import chat_chunks

pytestmark = pytest.mark.anyio

OUTLET_PATH = "/pipeline/outlet"


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


@pytest.fixture
async def outlet(server: FakeModelServer) -> AsyncIterator[HttpOutlet]:
    pipeline = HttpOutlet(server.base_url + OUTLET_PATH, api_key="pipe-key", timeout=HANG)
    yield pipeline
    await pipeline.aclose()


def shouting(request: RecordedRequest) -> JSONReply:
    """A pipeline that upper-cases the assistant's answer (content only, as most do)."""
    body = copy.deepcopy(request.json["body"])
    last = body["messages"][-1]
    last["content"] = last["content"].upper()
    del last["output"]  # a pipeline written against plain messages drops what it does not know
    return JSONReply(body)


class Recorder:
    """An in-process filter that notes what it saw and tags the answer."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def outlet(self, body: dict[str, Any]) -> dict[str, Any]:
        content = body["messages"][-1]["content"]
        self.log.append(f"in-process saw {content!r}")
        body["messages"][-1]["content"] = content + " [checked]"
        return body


def model(server: FakeModelServer, text: str) -> OpenAIChat:
    server.route("/v1/chat/completions", SSEReply(chat_chunks(text=text)))
    return OpenAIChat(base_url=server.base_url, model="m")


async def test_http_outlet_rewrites_the_answer(server: FakeModelServer, outlet: HttpOutlet) -> None:
    server.route(OUTLET_PATH, shouting)
    sink = ListSink()
    relay = Relay(model(server, "hello there"), filters=[outlet])
    result = await relay.run("hi", sink=sink, user={"id": "u1", "name": "Ann"}, chat_id="c1")
    await relay.aclose()
    assert result.status == "completed"
    assert result.text == "HELLO THERE"
    assert [i["type"] for i in result.output] == ["message"]
    outlets = sink.of(ev.CHAT_OUTLET)
    assert len(outlets) == 1
    assert outlets[0].data["content"] == "HELLO THERE"
    assert outlets[0].data["output"][0]["content"][0]["text"] == "HELLO THERE"
    assert sink.events[-1].type == ev.CHAT_COMPLETION
    assert sink.events[-1].data["content"] == "HELLO THERE"
    # what the pipeline server received
    posted = next(r for r in server.requests if r.path == OUTLET_PATH)
    assert posted.headers["authorization"] == "Bearer pipe-key"
    assert posted.json["user"] == {"id": "u1", "name": "Ann"}
    assert posted.json["body"]["chat_id"] == "c1"
    messages = posted.json["body"]["messages"]
    assert messages[0] == {"role": "user", "content": "hi"}
    assert messages[1]["role"] == "assistant" and messages[1]["content"] == "hello there"
    assert messages[1]["output"][0]["type"] == "message"


async def test_pipeline_outlet_runs_before_in_process_filters(
    server: FakeModelServer, outlet: HttpOutlet
) -> None:
    log: list[str] = []

    def logged_shouting(request: RecordedRequest) -> JSONReply:
        log.append(f"pipeline saw {request.json['body']['messages'][-1]['content']!r}")
        return shouting(request)

    server.route(OUTLET_PATH, logged_shouting)
    sink = ListSink()
    # the in-process filter is listed first; pipelines still go first (SPEC R19)
    relay = Relay(model(server, "hello there"), filters=[Recorder(log), outlet])
    result = await relay.run("hi", sink=sink)
    await relay.aclose()
    assert log == ["pipeline saw 'hello there'", "in-process saw 'HELLO THERE'"]
    assert result.text == "HELLO THERE [checked]"
    assert [e.data["content"] for e in sink.of(ev.CHAT_OUTLET)] == ["HELLO THERE [checked]"]


async def test_failing_pipeline_keeps_the_answer_and_the_turn(
    server: FakeModelServer, outlet: HttpOutlet
) -> None:
    server.route(OUTLET_PATH, JSONReply({"detail": "pipeline crashed"}, status=500))
    sink = ListSink()
    relay = Relay(model(server, "hello there"), filters=[outlet])
    result = await relay.run("hi", sink=sink)
    await relay.aclose()
    assert [r.path for r in server.requests] == ["/v1/chat/completions", OUTLET_PATH]
    assert result.status == "completed" and result.error is None
    assert result.text == "hello there"
    assert sink.of(ev.CHAT_OUTLET) == []
    assert sink.of(ev.CHAT_MESSAGE_ERROR) == []
    assert sink.events[-1].type == ev.CHAT_COMPLETION
    assert sink.events[-1].data["status"] == "completed"
    assert sink.events[-1].data["content"] == "hello there"


async def test_outlet_reply_that_is_not_an_object_keeps_the_answer(
    server: FakeModelServer, outlet: HttpOutlet
) -> None:
    server.route(OUTLET_PATH, JSONReply(["not", "a", "body"]))
    relay = Relay(model(server, "hello there"), filters=[outlet])
    result = await relay.run("hi")
    await relay.aclose()
    assert result.status == "completed" and result.text == "hello there"


async def test_cancelled_turn_skips_the_pipeline(
    server: FakeModelServer, outlet: HttpOutlet
) -> None:
    server.route(
        "/v1/chat/completions",
        SSEReply(chat_chunks(text=["a ", "b ", "c"]), stall_after=2, stall_for=30),
    )
    server.route(OUTLET_PATH, shouting)
    relay = Relay(OpenAIChat(base_url=server.base_url, model="m"), filters=[outlet])
    sink = ListSink()
    task = asyncio.create_task(relay.run("hi", sink=sink))
    await sink.wait_for(ev.OUTPUT_TEXT_DELTA)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await relay.aclose()
    assert [r.path for r in server.requests] == ["/v1/chat/completions"]
    assert sink.of(ev.CHAT_OUTLET) == []
