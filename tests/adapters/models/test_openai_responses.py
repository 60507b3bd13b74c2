"""OpenAIResponses: stateless and stateful (R14) bodies, tool shapes, reading the stream back."""

from __future__ import annotations

import pytest

from toolrelay.adapters.models import OpenAIResponses
from toolrelay.core.formats.responses.convert import flat_tool as responses_tool
from toolrelay.core.items import (
    Item,
    function_call_item,
    function_call_output_item,
    output_text,
    raw_items,
)
from toolrelay.core.stream.reader import BodyReader
from toolrelay.engine.interfaces import Message, ModelRequest
from toolrelay.testing import BodyReply, SSEReply, ToolCallSpec, wire
from toolrelay.testing.fake_server import FakeModelServer

from .conftest import read_all

TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
    },
}
FLAT_TOOL = {
    "type": "function",
    "name": "lookup",
    "description": "Look a word up",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
}
HISTORY: list[Message] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Define cat."},
    {
        "role": "assistant",
        "content": "Looking.",
        "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c0", "content": "a small feline"},
    {"role": "assistant", "content": "A cat is a small feline."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "And this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
        ],
    },
]
HISTORY_INPUT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Define cat."},
    {"role": "assistant", "content": "Looking."},
    {"type": "function_call", "call_id": "c0", "name": "lookup", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c0", "output": "a small feline"},
    {"role": "assistant", "content": "A cat is a small feline."},
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "And this?"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAA"},
        ],
    },
]
OUTPUT: list[Item] = [
    item
    for item in (
        function_call_item("c1", "lookup", '{"word":"dog"}', status="completed"),
        function_call_output_item("c1", "a loyal canine"),
        function_call_item("c2", "lookup", '{"word":"owl"}', status="completed"),
        function_call_output_item("c2", "a night bird"),
    )
]


def call_items(call_id: str, word: str, result: str) -> list[dict[str, object]]:
    return [
        {
            "type": "function_call",
            "call_id": call_id,
            "name": "lookup",
            "arguments": f'{{"word":"{word}"}}',
        },
        {"type": "function_call_output", "call_id": call_id, "output": result},
    ]


@pytest.mark.anyio
async def test_stateless_body_resends_everything(server: FakeModelServer) -> None:
    server.script(SSEReply([], done=False))
    client = OpenAIResponses(
        base_url=server.base_url, model="gpt-r", api_key="k", params={"max_output_tokens": 50}
    )
    request = ModelRequest(messages=HISTORY, output=OUTPUT, tools=[TOOL], new_items_from=2)
    await read_all(await client.open(request))
    await client.aclose()
    assert server.requests[0].path == "/v1/responses"
    assert server.requests[0].json == {
        "model": "gpt-r",
        "input": HISTORY_INPUT
        + call_items("c1", "dog", "a loyal canine")
        + call_items("c2", "owl", "a night bird"),
        "stream": True,
        "tools": [FLAT_TOOL],
        "store": False,
        "max_output_tokens": 50,
    }


@pytest.mark.anyio
async def test_stateful_body_sends_system_and_new_items_only(server: FakeModelServer) -> None:
    server.script(SSEReply([], done=False))
    client = OpenAIResponses(base_url=server.base_url + "/v1", model="gpt-r", stateful=True)
    request = ModelRequest(
        messages=HISTORY,
        output=OUTPUT,
        previous_response_id="resp_1",
        new_items_from=2,
    )
    await read_all(await client.open(request))
    await client.aclose()
    assert server.requests[0].path == "/v1/responses"
    assert server.requests[0].json == {
        "model": "gpt-r",
        "previous_response_id": "resp_1",
        "input": [{"role": "system", "content": "Be brief."}]
        + call_items("c2", "owl", "a night bird"),
        "stream": True,
        "store": True,
    }


@pytest.mark.anyio
async def test_stateful_client_stores_the_first_response(server: FakeModelServer) -> None:
    server.script(SSEReply([], done=False))
    client = OpenAIResponses(base_url=server.base_url, model="m", stateful=True, stream=False)
    await read_all(await client.open(ModelRequest(messages=HISTORY[:2])))
    await client.aclose()
    assert server.requests[0].json == {
        "model": "m",
        "input": HISTORY_INPUT[:2],
        "stream": False,
        "store": True,
    }


def test_tool_shapes() -> None:
    assert responses_tool(TOOL) == FLAT_TOOL
    assert responses_tool({"type": "function", "function": {"name": "x"}}) == {
        "type": "function",
        "name": "x",
        "description": "",
        "parameters": {"type": "object", "properties": {}},
    }
    assert responses_tool({"type": "web_search"}) == {"type": "web_search"}
    assert responses_tool(FLAT_TOOL) == FLAT_TOOL


@pytest.mark.anyio
async def test_responses_stream_reads_back_as_items(server: FakeModelServer) -> None:
    events = wire.responses_events(
        text=["A dog ", "barks."],
        function_calls=[ToolCallSpec("lookup", {"word": "bark"}, id="c9")],
        response_id="resp_42",
    )
    server.script(BodyReply(wire.render_responses_sse(events), chunk_size=97))
    client = OpenAIResponses(base_url=server.base_url, model="m")
    stream = await client.open(ModelRequest(messages=HISTORY[:2]))
    reader = BodyReader(stream.format)
    async for chunk in stream:
        reader.feed(chunk)
    reader.finish()
    await client.aclose()
    result = reader.result()
    assert stream.format == "sse"
    assert output_text(result.output) == "A dog barks."
    assert [
        (i["call_id"], i["arguments"])
        for i in raw_items(result.output)
        if i["type"] == "function_call"
    ] == [("c9", '{"word":"bark"}')]
    assert result.response_id == "resp_42"
    assert result.error is None
