"""OpenAIChat: the exact request body, and that its response bytes read back as items."""

from __future__ import annotations

import orjson
import pytest

from toolrelay.adapters.models import HTTPOptions, OpenAIChat, Retry
from toolrelay.core.items import (
    Item,
    function_call_item,
    function_call_output_item,
    is_call,
    message_item,
    output_text,
    reasoning_item,
)
from toolrelay.core.stream.reader import BodyReader
from toolrelay.engine.interfaces import Message, ModelRequest
from toolrelay.testing import BodyReply, JSONReply, SSEReply, ToolCallSpec, wire
from toolrelay.testing.fake_server import FakeModelServer

from .conftest import read_all

USAGE = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
HISTORY: list[Message] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Oslo?"},
]
OUTPUT: list[Item] = [
    item
    for item in (
        message_item("Let me check.", status="completed"),
        function_call_item("call_1", "get_weather", '{"city":"Oslo"}', status="completed"),
        function_call_output_item("call_1", "12C"),
    )
]


async def read_items(client: OpenAIChat, request: ModelRequest) -> BodyReader:
    stream = await client.open(request)
    reader = BodyReader(stream.format)
    async for chunk in stream:
        reader.feed(chunk)
    reader.finish()
    return reader


@pytest.mark.anyio
async def test_streaming_body_headers_and_path_exactly(server: FakeModelServer) -> None:
    server.script(SSEReply(wire.chat_chunks(text="ok")))
    client = OpenAIChat(
        base_url=server.base_url,
        model="gpt-test",
        api_key="sk-test",
        params={"temperature": 1.0, "top_p": 0.5},
        http=HTTPOptions(headers={"X-Trace": "abc"}),
    )
    request = ModelRequest(
        messages=HISTORY, output=OUTPUT, tools=[TOOL], params={"temperature": 0.2}
    )
    await read_all(await client.open(request))
    await client.aclose()
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["x-trace"] == "abc"
    assert sent.headers["content-type"] == "application/json"
    assert sent.json == {
        "model": "gpt-test",
        "messages": [
            *HISTORY,
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "12C"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [TOOL],
        "temperature": 0.2,
        "top_p": 0.5,
    }
    assert list(sent.json)[:4] == ["model", "messages", "stream", "stream_options"]


@pytest.mark.anyio
async def test_no_tools_no_usage_and_v1_base_url(server: FakeModelServer) -> None:
    server.script(SSEReply(wire.chat_chunks(text="ok")))
    client = OpenAIChat(base_url=server.base_url + "/v1/", model="m", include_usage=False)
    await read_all(await client.open(ModelRequest(messages=HISTORY[1:])))
    await client.aclose()
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].json == {"model": "m", "messages": HISTORY[1:], "stream": True}
    assert "authorization" not in server.requests[0].headers


@pytest.mark.anyio
async def test_reasoning_replay_as_reasoning_content(server: FakeModelServer) -> None:
    server.script(SSEReply(wire.chat_chunks(text="ok")))
    client = OpenAIChat(base_url=server.base_url, model="m", reasoning_replay="reasoning_content")
    reasoning: Item = reasoning_item("Need the weather tool.", status="completed")
    output = [reasoning, *OUTPUT[1:]]
    await read_all(await client.open(ModelRequest(messages=HISTORY, output=output)))
    await client.aclose()
    assistant = server.requests[0].json["messages"][2]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
            }
        ],
        "reasoning_content": "Need the weather tool.",
    }


@pytest.mark.anyio
async def test_sse_bytes_read_back_as_items(server: FakeModelServer) -> None:
    chunks = wire.chat_chunks(
        text=["It is", " 12C"],
        tool_calls=[ToolCallSpec("get_weather", {"city": "Bergen"}, id="call_2")],
        args_pieces=3,
        usage=USAGE,
    )
    server.script(SSEReply(chunks))
    client = OpenAIChat(base_url=server.base_url, model="m")
    reader = await read_items(client, ModelRequest(messages=HISTORY))
    await client.aclose()
    result = reader.result()
    assert reader.format == "sse"
    assert output_text(result.output) == "It is 12C"
    calls = [i for i in result.output if is_call(i)]
    assert [(c["call_id"], c["name"], orjson.loads(c["arguments"])) for c in calls] == [
        ("call_2", "get_weather", {"city": "Bergen"})
    ]
    assert result.finish_reason == "tool_calls"
    assert result.error is None
    assert result.usage is not None


@pytest.mark.anyio
async def test_an_sse_body_sent_as_text_plain_is_read_as_sse(server: FakeModelServer) -> None:
    """The content type decides when it names a framing; otherwise the first bytes do
    (one sniffer, `core.formats.content`, for live and recorded bodies alike)."""
    body = wire.render_sse(wire.chat_chunks(text=["Hel", "lo"]))
    server.script(BodyReply(body, content_type="text/plain; charset=utf-8"))
    client = OpenAIChat(base_url=server.base_url, model="m")
    reader = await read_items(client, ModelRequest(messages=HISTORY))
    await client.aclose()
    assert reader.format == "sse"
    assert (output_text(reader.result().output), reader.result().error) == ("Hello", None)


@pytest.mark.anyio
async def test_non_stream_mode_sends_stream_false_and_reads_json(server: FakeModelServer) -> None:
    server.script(JSONReply(wire.chat_completion(text="Hello", usage=USAGE)))
    client = OpenAIChat(
        base_url=server.base_url, model="m", stream=False, http=HTTPOptions(retry=Retry(attempts=1))
    )
    reader = await read_items(client, ModelRequest(messages=HISTORY))
    await client.aclose()
    assert server.requests[0].json == {"model": "m", "messages": HISTORY, "stream": False}
    assert server.requests[0].headers["accept"] == "application/json"
    assert reader.format == "json"
    assert output_text(reader.result().output) == "Hello"
    assert reader.result().finish_reason == "stop"
