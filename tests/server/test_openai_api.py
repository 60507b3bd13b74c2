"""The official `openai` SDK against the running server (real sockets both sides)."""

from __future__ import annotations

import httpx2
import openai
import orjson
import pytest
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
)

from tests.sdk_clients import openai_client
from tests.server.conftest import ADMIN_KEY, Running
from toolrelay.testing.fake_server import RawReply, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks, ollama_lines, responses_events

CHAT = "/v1/chat/completions"


def sdk(running: Running, key: str = ADMIN_KEY) -> openai.OpenAI:
    return openai_client(base_url=running.base_url + "/v1", api_key=key, max_retries=0, timeout=10)


def call_reply(name: str, arguments: dict[str, object], call_id: str = "call_1") -> SSEReply:
    return SSEReply(
        chat_chunks(
            tool_calls=[ToolCallSpec(name, arguments, id=call_id)],
            usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        )
    )


def text_reply(text: str) -> SSEReply:
    return SSEReply(
        chat_chunks(
            text=[text[: len(text) // 2], text[len(text) // 2 :]],
            usage={"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27},
        )
    )


def test_models_lists_routes(running: Running) -> None:
    models = sdk(running).models.list()
    assert sorted(m.id for m in models.data) == ["fake", "fake-ollama", "fake-responses"]


def test_non_stream_runs_server_tools(running: Running) -> None:
    running.upstream.route(CHAT, call_reply("add", {"a": 2, "b": 3}), text_reply("The sum is 5."))
    done = sdk(running).chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "2+3?"}]
    )
    assert done.choices[0].message.content == "The sum is 5."
    assert done.choices[0].finish_reason == "stop"
    assert (
        done.usage is not None
        and done.usage.prompt_tokens == 30
        and done.usage.completion_tokens == 12
    )
    second = running.upstream.requests[1].json
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "5"}
    offered = {t["function"]["name"] for t in second["tools"]}
    assert offered == {"add", "shout", "get_time", "calculator"}  # and the built-in tools


def test_stream_runs_server_tools_and_reports_usage(running: Running) -> None:
    running.upstream.route(CHAT, call_reply("shout", {"text": "hi"}), text_reply("It says HI."))
    stream = sdk(running).chat.completions.create(
        model="fake",
        messages=[{"role": "user", "content": "shout hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "It says HI."
    finishes = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finishes == ["stop"]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 42
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)


def test_stream_extension_shows_tool_activity_only_when_asked(running: Running) -> None:
    running.upstream.route(CHAT, call_reply("add", {"a": 1, "b": 1}), text_reply("2"))
    with running.client() as client:
        body = {
            "model": "fake",
            "messages": [{"role": "user", "content": "1+1"}],
            "stream": True,
            "toolrelay_events": True,
        }
        lines = client.post(CHAT, json=body).text.split("\n\n")
    extras = [
        orjson.loads(line[6:])
        for line in lines
        if line.startswith("data: {") and '"toolrelay"' in line
    ]
    types = [e["toolrelay"]["type"] for e in extras]
    assert "response.output_item.done" in types
    outputs = [
        e["toolrelay"]["data"]["item"]
        for e in extras
        if e["toolrelay"]["data"].get("item", {}).get("type") == "function_call_output"
    ]
    assert outputs and outputs[0]["output"] == "2"


def test_reasoning_streams_as_reasoning_content(running: Running) -> None:
    running.upstream.route(CHAT, SSEReply(chat_chunks(reasoning=["think", "ing"], text="ok")))
    with running.client() as client:
        body = {"model": "fake", "messages": [{"role": "user", "content": "x"}], "stream": True}
        lines = [
            orjson.loads(x[6:])
            for x in client.post(CHAT, json=body).text.split("\n\n")
            if x.startswith("data: {")
        ]
    reasoning = "".join(
        c["choices"][0]["delta"].get("reasoning_content", "") for c in lines if c["choices"]
    )
    assert reasoning == "thinking"


def test_client_side_tools_round_trip(running: Running) -> None:
    client = sdk(running)
    tools: list[ChatCompletionFunctionToolParam] = [
        {
            "type": "function",
            "function": {
                "name": "get_location",
                "description": "Where the user is.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    running.upstream.route(
        CHAT, call_reply("get_location", {}, call_id="call_loc"), text_reply("You are in Paris.")
    )
    first = client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "where am I?"}], tools=tools
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert (call.id, call.function.name, call.function.arguments) == (
        "call_loc",
        "get_location",
        "{}",
    )
    followup: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "where am I?"},
        choice.message.model_dump(exclude_none=True),  # type: ignore[list-item]  # the SDK dumped it
        {"role": "tool", "tool_call_id": "call_loc", "content": "Paris"},
    ]
    second = client.chat.completions.create(model="fake", messages=followup, tools=tools)
    assert second.choices[0].message.content == "You are in Paris."
    sent = running.upstream.requests[1].json["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_loc", "content": "Paris"}


def test_client_side_tools_streamed(running: Running) -> None:
    tools: list[ChatCompletionFunctionToolParam] = [
        {
            "type": "function",
            "function": {
                "name": "get_location",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    running.upstream.route(CHAT, call_reply("get_location", {}, call_id="call_s"))
    stream = sdk(running).chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "?"}], tools=tools, stream=True
    )
    chunks = list(stream)
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert [(c.id, c.function.name if c.function else None) for c in calls] == [
        ("call_s", "get_location")
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_responses_stream_parsed_by_sdk(running: Running) -> None:
    running.upstream.route(
        "/v1/responses",
        SSEReply(
            responses_events(function_calls=[ToolCallSpec("add", {"a": 4, "b": 5}, id="call_r")]),
            done=False,
        ),
        SSEReply(responses_events(text=["Nine", "."]), done=False),
    )
    client = sdk(running)
    events = list(client.responses.create(model="fake-responses", input="4+5?", stream=True))
    types = [e.type for e in events]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    final = events[-1].response  # type: ignore[union-attr]
    kinds = [getattr(i, "type", None) for i in final.output]
    assert kinds == ["function_call", "function_call_output", "message"]
    assert final.output_text == "Nine."
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [getattr(e.item, "type", None) for e in added] == [
        "function_call",
        "function_call_output",
        "message",
    ]
    numbers = [e.sequence_number for e in events]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)


def test_responses_non_stream(running: Running) -> None:
    running.upstream.route(CHAT, text_reply("plain answer"))
    response = sdk(running).responses.create(
        model="fake", input=[{"role": "user", "content": "hi"}], instructions="be brief"
    )
    assert response.output_text == "plain answer"
    assert running.upstream.requests[0].json["messages"][0] == {
        "role": "system",
        "content": "be brief",
    }


def test_ollama_route(running: Running) -> None:
    from toolrelay.testing.fake_server import NDJSONReply

    running.upstream.route("/api/chat", NDJSONReply(ollama_lines(text=["Hal", "lo"])))
    done = sdk(running).chat.completions.create(
        model="fake-ollama", messages=[{"role": "user", "content": "hi"}]
    )
    assert done.choices[0].message.content == "Hallo"


def test_missing_and_bad_keys_are_401(running: Running) -> None:
    with pytest.raises(openai.AuthenticationError) as info:
        sdk(running, key="tr-nope").models.list()
    assert info.value.status_code == 401
    with httpx2.Client(base_url=running.base_url) as raw:
        response = raw.get("/v1/models")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "missing_api_key"


def test_unknown_model_is_404(running: Running) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        sdk(running).chat.completions.create(
            model="gpt-9", messages=[{"role": "user", "content": "x"}]
        )
    assert "gpt-9" in str(info.value) and "fake" in str(info.value)


def test_bad_requests_get_clear_4xx(running: Running) -> None:
    with running.client() as client:
        bad_json = client.post(
            CHAT, content=b"{not json", headers={"content-type": "application/json"}
        )
        wrong_type = client.post(CHAT, json={"model": "fake", "messages": "hello"})
        bad_role = client.post(
            CHAT, json={"model": "fake", "messages": [{"role": "wizard", "content": "x"}]}
        )
        empty = client.post(CHAT, json={"model": "fake", "messages": []})
        huge = client.post(
            CHAT,
            content=b'{"model": "fake", "messages": [' + b" " * (11 * 1024 * 1024) + b"]}",
            headers={"content-type": "application/json"},
        )
    assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == "invalid_json"
    assert wrong_type.status_code == 400 and wrong_type.json()["error"]["param"] == "messages"
    assert bad_role.status_code == 400 and "messages.0.role" in bad_role.json()["error"]["message"]
    assert empty.status_code == 400
    assert huge.status_code == 413 and huge.json()["error"]["code"] == "body_too_large"
    assert running.upstream.requests == []


def test_unreachable_upstream_is_reported_per_request(running: Running) -> None:
    running.upstream.route(
        CHAT,
        RawReply(
            401,
            b'{"error": {"message": "Incorrect API key provided"}}',
            {"content-type": "application/json"},
        ),
    )
    with pytest.raises(openai.APIStatusError) as info:
        sdk(running).chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "x"}]
        )
    assert info.value.status_code == 502
    assert "Incorrect API key provided" in str(info.value)


def test_sampling_params_reach_the_upstream(running: Running) -> None:
    running.upstream.route(CHAT, call_reply("add", {"a": 1, "b": 1}), text_reply("2"))
    sdk(running).chat.completions.create(
        model="fake",
        messages=[{"role": "user", "content": "1+1"}],
        temperature=0.25,
        max_tokens=64,
        seed=7,
    )
    for request in running.upstream.requests:  # every model call of the turn
        sent = request.json
        assert (sent["temperature"], sent["max_tokens"], sent["seed"]) == (0.25, 64, 7)
        assert "toolrelay_events" not in sent


def test_n_above_one_is_refused(running: Running) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        sdk(running).chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "x"}], n=2
        )
    assert "n=1" in str(info.value)
    assert running.upstream.requests == []


def test_responses_sampling_params_are_renamed_for_a_chat_upstream(running: Running) -> None:
    running.upstream.route(CHAT, text_reply("ok"))
    sdk(running).responses.create(model="fake", input="hi", temperature=0.5, max_output_tokens=32)
    sent = running.upstream.requests[0].json
    assert (sent["temperature"], sent["max_tokens"]) == (0.5, 32)
    assert "max_output_tokens" not in sent


def test_text_before_and_after_server_tools_streams_like_the_whole_answer(running: Running) -> None:
    before = SSEReply(
        chat_chunks(text="Let me add.", tool_calls=[ToolCallSpec("add", {"a": 1, "b": 1}, id="c1")])
    )
    running.upstream.route(CHAT, before, text_reply("It is 2."))
    stream = sdk(running).chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "1+1"}], stream=True
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    before = SSEReply(
        chat_chunks(text="Let me add.", tool_calls=[ToolCallSpec("add", {"a": 1, "b": 1}, id="c2")])
    )
    running.upstream.route(CHAT, before, text_reply("It is 2."))
    whole = sdk(running).chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "1+1"}]
    )
    assert streamed == whole.choices[0].message.content == "Let me add.\n\nIt is 2."


def test_responses_stream_helper_accumulates_our_events(running: Running) -> None:
    running.upstream.route(CHAT, call_reply("add", {"a": 2, "b": 2}), text_reply("Four."))
    with sdk(running).responses.stream(model="fake", input="2+2?") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "Four."
    assert final.output_text == "Four."
    assert [getattr(i, "type", None) for i in final.output] == [
        "function_call",
        "function_call_output",
        "message",
    ]


def test_chat_stream_helper_accumulates_our_chunks(running: Running) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_location",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    running.upstream.route(
        CHAT, call_reply("add", {"a": 1, "b": 1}), call_reply("get_location", {}, call_id="call_z")
    )
    with sdk(running).chat.completions.stream(
        model="fake",
        messages=[{"role": "user", "content": "where and 1+1?"}],
        tools=tools,  # type: ignore[arg-type]
    ) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    assert [(c.id, c.function.name) for c in choice.message.tool_calls] == [
        ("call_z", "get_location")
    ]
