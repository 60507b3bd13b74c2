"""Ollama: native /api/chat body conversion, NDJSON reading, error messages."""

from __future__ import annotations

import orjson
import pytest

from toolrelay.adapters.models import HTTPOptions, Ollama, Retry
from toolrelay.core.formats.ollama.request import ollama_messages
from toolrelay.core.items import (
    ReasoningItem,
    function_call_item,
    function_call_output_item,
    is_call,
    output_text,
)
from toolrelay.core.stream.reader import BodyReader
from toolrelay.engine.interfaces import Message, ModelRequest
from toolrelay.errors import ProviderError
from toolrelay.testing import JSONReply, NDJSONReply, ToolCallSpec, wire
from toolrelay.testing.fake_server import FakeModelServer

from .conftest import read_all

TOOL = {
    "type": "function",
    "function": {"name": "add", "description": "Add", "parameters": {"type": "object"}},
}


def test_messages_get_object_arguments_tool_names_and_images() -> None:
    messages: list[Message] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a":1}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "add", "arguments": "{bad"}},
                {"id": "c3", "type": "function", "function": {"name": "add", "arguments": "[1]"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        {"role": "tool", "tool_call_id": "zz", "content": "?"},
    ]
    assert ollama_messages(messages) == [
        {"role": "user", "content": "Look:", "images": ["QUJD"]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": {"a": 1}},
                },
                {"id": "c2", "type": "function", "function": {"name": "add", "arguments": {}}},
                {"id": "c3", "type": "function", "function": {"name": "add", "arguments": {}}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "1", "tool_name": "add"},
        {"role": "tool", "tool_call_id": "zz", "content": "?"},
    ]


@pytest.mark.anyio
async def test_body_exactly(server: FakeModelServer) -> None:
    server.script(NDJSONReply(wire.ollama_lines(text="ok")))
    client = Ollama(
        base_url=server.base_url + "/",
        model="llama3",
        think=True,
        params={"temperature": 0.1, "keep_alive": "5m"},
    )
    request = ModelRequest(
        messages=[{"role": "user", "content": "1+2?"}],
        output=[
            function_call_item("c1", "add", '{"a":1,"b":2}', status="completed"),
            function_call_output_item("c1", "3"),
        ],
        tools=[TOOL],
        params={"num_ctx": 4096},
    )
    await read_all(await client.open(request))
    await client.aclose()
    assert server.requests[0].path == "/api/chat"
    assert server.requests[0].json == {
        "model": "llama3",
        "messages": [
            {"role": "user", "content": "1+2?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "add", "arguments": {"a": 1, "b": 2}},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "3", "tool_name": "add"},
        ],
        "stream": True,
        "tools": [TOOL],
        "think": True,
        "keep_alive": "5m",
        "options": {"temperature": 0.1, "num_ctx": 4096},
    }


@pytest.mark.anyio
async def test_ndjson_reads_back_as_items(server: FakeModelServer) -> None:
    lines = wire.ollama_lines(
        text=["Sum", " is"], tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2})]
    )
    server.script(NDJSONReply(lines))
    client = Ollama(base_url=server.base_url, model="m")
    stream = await client.open(ModelRequest(messages=[{"role": "user", "content": "1+2?"}]))
    reader = BodyReader(stream.format)
    async for chunk in stream:
        reader.feed(chunk)
    reader.finish()
    await client.aclose()
    result = reader.result()
    assert stream.format == "ndjson"
    assert output_text(result.output) == "Sum is"
    calls = [i for i in result.output if is_call(i)]
    assert [(c["name"], orjson.loads(c["arguments"])) for c in calls] == [("add", {"a": 1, "b": 2})]
    assert result.error is None


@pytest.mark.anyio
async def test_ollama_error_message(server: FakeModelServer) -> None:
    server.script(JSONReply({"error": "model 'nope' not found"}, status=404))
    client = Ollama(
        base_url=server.base_url, model="nope", http=HTTPOptions(retry=Retry(attempts=3))
    )
    with pytest.raises(ProviderError) as info:
        await client.open(ModelRequest(messages=[{"role": "user", "content": "hi"}]))
    await client.aclose()
    assert info.value.message == "Model server returned 404: model 'nope' not found"
    assert info.value.status == 404
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_non_stream_is_json(server: FakeModelServer) -> None:
    final = wire.ollama_lines(text="hello")[-1] | {
        "message": {"role": "assistant", "content": "hello"}
    }
    server.script(JSONReply(final))
    client = Ollama(base_url=server.base_url + "/api", model="m", stream=False)
    stream = await client.open(ModelRequest(messages=[{"role": "user", "content": "hi"}]))
    reader = BodyReader(stream.format)
    async for chunk in stream:
        reader.feed(chunk)
    reader.finish()
    await client.aclose()
    assert server.requests[0].path == "/api/chat"
    assert server.requests[0].json["stream"] is False
    assert stream.format == "json"
    assert output_text(reader.result().output) == "hello"


def _thinking_turn() -> ModelRequest:
    thought: ReasoningItem = {
        "type": "reasoning",
        "id": "rs_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Need the sum."}],
        "summary": [],
    }
    return ModelRequest(
        messages=[{"role": "user", "content": "1+2?"}],
        output=[
            thought,
            function_call_item("c1", "add", '{"a":1,"b":2}', status="completed"),
            function_call_output_item("c1", "3"),
        ],
    )


def test_thinking_is_replayed_by_default() -> None:
    """gpt-oss-style tool loops need the assistant message's `thinking` back."""
    body = Ollama(base_url="http://ollama.local:11434", model="gpt-oss:20b").body(_thinking_turn())
    assistant = body["messages"][1]
    assert assistant["role"] == "assistant" and assistant["thinking"] == "Need the sum."
    assert assistant["tool_calls"][0]["function"]["arguments"] == {"a": 1, "b": 2}
    assert body["messages"][2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "3",
        "tool_name": "add",
    }


def test_thinking_replay_can_be_turned_off() -> None:
    client = Ollama(base_url="http://h", model="m", reasoning_replay="none")
    assert "thinking" not in client.body(_thinking_turn())["messages"][1]
