"""The loop's rules for a text-call route (`engine.text_call_rounds`, issue 14), over a
fake model server: results go back as text, and a call repeating an answered one is not
run again; the model is asked once more, without tools."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from toolrelay import Relay, tool
from toolrelay.adapters.models import OpenAIChat
from toolrelay.core import events as ev
from toolrelay.core.items import raw_items
from toolrelay.engine.finish import RunResult
from toolrelay.testing import FakeModelServer, SSEReply
from toolrelay.testing.sinks import ListSink
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

pytestmark = pytest.mark.anyio

CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
RESULT = "14 °C, light rain (station PAR-7391)"
ANSWER = "It is 14 °C and raining lightly in Paris."
ran: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    ran.append(city)
    return RESULT


@tool
def get_time(city: str) -> str:
    """Local time in a city."""
    ran.append(city)
    return "09:41"


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    ran.clear()
    with FakeModelServer() as srv:
        yield srv


def says(text: str) -> SSEReply:
    return SSEReply(chat_chunks(text=[text[:9], text[9:]]))


async def run(server: FakeModelServer, *, text_calls: bool = True) -> tuple[RunResult, ListSink]:
    model = OpenAIChat(base_url=server.base_url, model="qwen")
    sink = ListSink()
    async with Relay(model, [get_weather, get_time], text_tool_calls=text_calls) as relay:
        result = await relay.run("What's the weather in Paris?", sink=sink)
    return result, sink


async def test_the_result_goes_back_as_a_user_message_not_as_the_call(
    server: FakeModelServer,
) -> None:
    server.script(says(CALL), says(ANSWER))
    result, _ = await run(server)
    second = server.requests[1].json
    assert second["messages"] == [
        {"role": "user", "content": "What's the weather in Paris?"},
        {
            "role": "user",
            "content": f"Result of get_weather: {RESULT}\n"
            "Using this result, answer in one or two sentences: What's the weather in Paris?",
        },
    ]
    assert [t["function"]["name"] for t in second["tools"]] == ["get_weather", "get_time"]
    assert result.text == ANSWER


async def test_a_repeated_call_is_not_run_again_and_the_next_round_has_no_tools(
    server: FakeModelServer,
) -> None:
    server.script(says(CALL), says(CALL), says(ANSWER))
    result, sink = await run(server)
    assert ran == ["Paris"]  # once
    output = raw_items(result.output)
    kinds = [i["type"] for i in output]
    assert kinds == [
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert output[3]["call_id"] == output[2]["call_id"] and output[3]["output"] == RESULT
    shown = [e.data["item"] for e in sink.of(ev.OUTPUT_ITEM_DONE)]
    assert output[3] in shown  # the client saw the repeat answered
    third = server.requests[2].json
    assert "tools" not in third
    assert [m["role"] for m in third["messages"]] == ["user", "user"]  # the result, once
    assert result.status == "completed" and result.text == ANSWER


async def test_a_repeat_with_the_result_copied_into_its_arguments_is_a_repeat(
    server: FakeModelServer,
) -> None:
    copied = '{"name": "get_weather", "arguments": {"city": "Paris", "weather": "14 °C"}}'
    server.script(says(CALL), says(copied), says(ANSWER))
    result, _ = await run(server)
    assert ran == ["Paris"] and "tools" not in server.requests[2].json
    assert result.text == ANSWER


async def test_a_new_call_after_a_result_still_runs(server: FakeModelServer) -> None:
    other = '{"name": "get_time", "arguments": {"city": "Paris"}}'
    server.script(says(CALL), says(other), says(ANSWER))
    result, _ = await run(server)
    assert ran == ["Paris", "Paris"]
    assert "tools" in server.requests[2].json
    content = server.requests[2].json["messages"][1]["content"]
    assert content.splitlines() == [
        f"Result of get_weather: {RESULT}",
        "Result of get_time: 09:41",
        "Using these results, answer in one or two sentences: What's the weather in Paris?",
    ]
    assert result.text == ANSWER


async def test_other_routes_keep_native_replay_and_run_repeats(server: FakeModelServer) -> None:
    native = chat_chunks(tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"}, "call_1")])
    again = chat_chunks(tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"}, "call_2")])
    server.script(SSEReply(native), SSEReply(again), says(ANSWER))
    await run(server, text_calls=False)
    assert ran == ["Paris", "Paris"]
    assert [m["role"] for m in server.requests[1].json["messages"]] == [
        "user",
        "assistant",
        "tool",
    ]
    assert "tools" in server.requests[2].json
