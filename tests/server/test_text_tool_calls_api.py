"""Tool calls written as text through `/v1/chat/completions` and `/v1/responses` (issue 14).

The route named `local` recognises them by default; any other route leaves
them as text unless its config says `text_tool_calls = true`, whatever API
the client speaks and whatever API the upstream speaks (an `openai-responses`
route too; only a `stateful` one cannot, and is refused).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
)

from tests.sdk_clients import openai_client
from tests.server.conftest import ADMIN_KEY, Running, ServerThread, make_settings
from toolrelay.config.settings import ModelRoute
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks, responses_events

CHAT = "/v1/chat/completions"
CALL = '```json\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n```'


@pytest.fixture
def running(tmp_path: Path, upstream: FakeModelServer) -> Iterator[Running]:
    routes = [
        # the step that picks tools first (engine.tool_select) has its own test below
        ModelRoute(name="local", base_url=upstream.base_url, model="qwen", tool_choice_step=False),
        ModelRoute(
            name="picky",
            base_url=upstream.base_url,
            model="qwen",
            text_tool_calls=True,
            tool_choice_step=True,
        ),
        ModelRoute(name="plain", base_url=upstream.base_url, model="qwen"),
        ModelRoute(
            name="small-responses",
            kind="openai-responses",
            base_url=upstream.base_url,
            model="qwen",
            text_tool_calls=True,
        ),
    ]
    settings = make_settings(tmp_path, upstream, models=routes)
    with ServerThread(settings) as base_url:
        yield Running(base_url, upstream, settings)


def sdk(running: Running) -> openai.OpenAI:
    return openai_client(
        base_url=running.base_url + "/v1", api_key=ADMIN_KEY, max_retries=0, timeout=10
    )


def written_call() -> SSEReply:
    return SSEReply(chat_chunks(text=[CALL[i : i + 5] for i in range(0, len(CALL), 5)]))


RESULT = "Result of add: 5\nUsing this result, answer in one or two sentences: 2+3?"
"""The result as a text-call route sends it back (`engine.text_call_rounds`)."""


def answer() -> SSEReply:
    return SSEReply(chat_chunks(text=["The sum ", "is 5."]))


def test_local_route_runs_a_call_written_as_text(running: Running) -> None:
    running.upstream.route(CHAT, written_call(), answer())
    done = sdk(running).chat.completions.create(
        model="local", messages=[{"role": "user", "content": "2+3?"}]
    )
    assert done.choices[0].message.content == "The sum is 5."
    assert done.choices[0].finish_reason == "stop"
    second = running.upstream.requests[1].json["messages"]
    assert second[-1] == {  # the result as text (engine.text_call_rounds)
        "role": "user",
        "content": RESULT,
    }


def test_a_route_with_the_tool_choice_step_offers_only_the_chosen_tool(
    running: Running,
) -> None:
    """The route's `tool_choice_step` reaches the loop: the model is asked first, without
    tools, and the turn is offered only the tool it named."""
    picked = SSEReply(chat_chunks(text=["add"]))
    running.upstream.route(CHAT, picked, written_call(), answer())
    done = sdk(running).chat.completions.create(
        model="picky", messages=[{"role": "user", "content": "2+3?"}]
    )
    assert done.choices[0].message.content == "The sum is 5."
    select, first, _ = (r.json for r in running.upstream.requests)
    assert not select.get("tools") and "add" in select["messages"][0]["content"]
    assert [t["function"]["name"] for t in first["tools"]] == ["add"]


def test_local_route_streams_only_the_answer(running: Running) -> None:
    running.upstream.route(CHAT, written_call(), answer())
    stream = sdk(running).chat.completions.create(
        model="local", messages=[{"role": "user", "content": "2+3?"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "The sum is 5."
    assert len(running.upstream.requests) == 2


def test_other_routes_leave_the_text_alone(running: Running) -> None:
    running.upstream.route(CHAT, written_call())
    done = sdk(running).chat.completions.create(
        model="plain", messages=[{"role": "user", "content": "2+3?"}]
    )
    assert done.choices[0].message.content == CALL
    assert len(running.upstream.requests) == 1


def test_a_call_to_a_client_tool_written_as_text_goes_back_as_tool_calls(
    running: Running,
) -> None:
    """The client's own tool: the recovered call ends the response as a native one would."""
    text = '{"name": "get_location", "arguments": {}}'
    running.upstream.route(CHAT, SSEReply(chat_chunks(text=[text[:7], text[7:]])))
    tools: list[ChatCompletionFunctionToolParam] = [
        {
            "type": "function",
            "function": {"name": "get_location", "parameters": {"type": "object"}},
        }
    ]
    done = sdk(running).chat.completions.create(
        model="local", messages=[{"role": "user", "content": "where am I?"}], tools=tools
    )
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert (call.function.name, call.function.arguments) == ("get_location", "{}")
    assert call.id.startswith("call_")
    offered = {t["function"]["name"] for t in running.upstream.requests[0].json["tools"]}
    assert offered == {"add", "shout", "get_location", "get_time", "calculator"}


def test_tool_choice_none_leaves_a_call_written_as_text_alone(running: Running) -> None:
    running.upstream.route(CHAT, written_call())
    done = sdk(running).chat.completions.create(
        model="local", messages=[{"role": "user", "content": "2+3?"}], tool_choice="none"
    )
    assert done.choices[0].message.content == CALL
    assert running.upstream.requests[0].json["tool_choice"] == "none"
    assert len(running.upstream.requests) == 1


def test_v1_responses_on_a_chat_route_runs_a_call_written_as_text(running: Running) -> None:
    running.upstream.route(CHAT, written_call(), answer())
    stream = sdk(running).responses.create(model="local", input="2+3?", stream=True)
    events = list(stream)
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "The sum is 5."  # the call's JSON never showed as text
    done = events[-1]
    assert done.type == "response.completed"
    calls = [i for i in done.response.output if i.type == "function_call"]
    assert [(c.name, c.arguments) for c in calls] == [("add", '{"a":2,"b":3}')]
    second = running.upstream.requests[1].json["messages"]
    assert second[-1] == {"role": "user", "content": RESULT}  # engine.text_call_rounds


def responses_call() -> SSEReply:
    pieces = [CALL[i : i + 6] for i in range(0, len(CALL), 6)]
    return SSEReply(responses_events(text=pieces), done=False)


def test_an_openai_responses_route_runs_a_call_written_as_text(running: Running) -> None:
    answer_events = responses_events(text=["The sum ", "is 5."])
    running.upstream.route("/v1/responses", responses_call(), SSEReply(answer_events, done=False))
    stream = sdk(running).chat.completions.create(
        model="small-responses", messages=[{"role": "user", "content": "2+3?"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "The sum is 5."
    second = running.upstream.requests[1].json["input"]
    assert not [i for i in second if str(i.get("type", "")).startswith("function_call")]
    assert second[-1] == {"role": "user", "content": RESULT}


def test_a_stateful_route_with_text_tool_calls_is_refused() -> None:
    with pytest.raises(ValueError, match="text_tool_calls cannot work with stateful"):
        ModelRoute(
            name="r",
            kind="openai-responses",
            base_url="http://127.0.0.1:1",
            model="m",
            stateful=True,
            text_tool_calls=True,
        )
