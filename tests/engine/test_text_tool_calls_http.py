"""Tool calls written as text, end to end over real sockets (issue 14).

The fake model server replays bodies the real embedded model wrote
(tests/fixtures/text_tool_calls): with `text_tool_calls` on, the call in the
text runs as a tool, its result goes back to the model, and the answer that
follows ends the turn, streaming and not. Off (the default), or for a tool
nobody offered, the JSON is the answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from toolrelay import Relay, tool
from toolrelay.adapters.models import OpenAIChat
from toolrelay.core import events as ev
from toolrelay.core.items import raw_items
from toolrelay.testing import FakeModelServer, JSONReply, SSEReply
from toolrelay.testing.fake_server import BodyReply
from toolrelay.testing.sinks import ListSink
from toolrelay.testing.wire import chat_chunks, chat_completion

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent.parent / "fixtures" / "text_tool_calls"
ANSWER = "It is sunny in Paris, 21 degrees."
QUESTION = "What's the weather in Paris?"


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny, 21 degrees Celsius in {city}"


@tool
def get_time(timezone: str) -> str:
    """Current time in a timezone."""
    return f"12:00 in {timezone}"


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


def recorded(name: str, *, chunk_size: int = 64) -> BodyReply:
    """A recorded body, sent in small writes so it arrives in many reads."""
    body = (FIXTURES / name).read_bytes()
    kind = "application/json" if name.endswith(".json") else "text/event-stream"
    return BodyReply(body, kind, chunk_size=chunk_size)


def shown_text(sink: ListSink) -> str:
    return "".join(e.data["delta"] for e in sink.of(ev.OUTPUT_TEXT_DELTA))


@pytest.mark.parametrize(
    ("body", "stream"), [("qwen-fenced-call.sse", True), ("qwen-fenced-call.json", False)]
)
async def test_a_call_written_as_text_runs_and_the_answer_follows(
    server: FakeModelServer, body: str, stream: bool
) -> None:
    answer = (
        SSEReply(chat_chunks(text=[ANSWER[:10], ANSWER[10:]]))
        if stream
        else JSONReply(chat_completion(text=ANSWER))
    )
    server.script(recorded(body), answer)
    model = OpenAIChat(base_url=server.base_url, model="qwen", stream=stream)
    relay = Relay(model, [get_weather, get_time], text_tool_calls=True)
    sink = ListSink()
    result = await relay.run(QUESTION, sink=sink)

    assert result.status == "completed" and result.error is None
    assert [i["type"] for i in result.output] == [
        "function_call",
        "function_call_output",
        "message",
    ]
    call, output, _ = raw_items(result.output)
    assert (call["name"], call["arguments"]) == ("get_weather", '{"city":"Paris"}')
    assert call["call_id"].startswith("call_") and output["call_id"] == call["call_id"]
    assert output["output"] == "Sunny, 21 degrees Celsius in Paris"
    assert result.text == ANSWER
    assert shown_text(sink) == ANSWER  # the call's JSON never reached the client as text

    second = server.requests[1].json["messages"]  # replayed as text (engine.text_call_rounds)
    assert second[1] == {
        "role": "user",
        "content": "Result of get_weather: Sunny, 21 degrees Celsius in Paris"
        "\nUsing this result, answer in one or two sentences: What's the weather in Paris?",
    }
    await relay.aclose()


async def test_off_by_default_the_json_is_the_answer(server: FakeModelServer) -> None:
    server.script(recorded("qwen-fenced-call.sse"))
    relay = Relay(OpenAIChat(base_url=server.base_url, model="qwen"), [get_weather, get_time])
    result = await relay.run(QUESTION)
    assert [i["type"] for i in result.output] == ["message"]
    assert result.text.startswith('```json\n{\n  "name": "get_weather"')
    assert len(server.requests) == 1
    await relay.aclose()


async def test_a_made_up_tool_stays_text_and_streams(server: FakeModelServer) -> None:
    server.script(recorded("qwen-made-up-tool.sse"))
    model = OpenAIChat(base_url=server.base_url, model="qwen")
    relay = Relay(model, [get_weather, get_time], text_tool_calls=True)
    sink = ListSink()
    result = await relay.run("Say hello in one short sentence.", sink=sink)
    text = '{"name": "say_hello", "arguments": {"message": "Hello, world!"}}'
    assert result.text == text and shown_text(sink) == text
    assert [i["type"] for i in result.output] == ["message"] and len(server.requests) == 1
    await relay.aclose()


async def test_a_plain_answer_is_untouched(server: FakeModelServer) -> None:
    server.script(recorded("qwen-plain.sse"))
    model = OpenAIChat(base_url=server.base_url, model="qwen")
    relay = Relay(model, [get_weather, get_time], text_tool_calls=True)
    sink = ListSink()
    result = await relay.run("Explain what a CPU is in two sentences.", sink=sink)
    deltas = [e.data["delta"] for e in sink.of(ev.OUTPUT_TEXT_DELTA)]
    assert result.text.startswith("A CPU is") and "".join(deltas) == result.text
    await relay.aclose()
