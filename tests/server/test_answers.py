"""The same turn answered streamed and not streamed says the same thing (issue 8 item 15)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.sdk_clients import openai_client
from tests.server.conftest import ADMIN_KEY, Running, ServerThread, make_settings
from toolrelay.config.settings import LimitsConfig
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

CHAT = "/v1/chat/completions"
CAP_ERROR = "Tool-call limit reached: stopped after 1 rounds of tool calls."


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[Running]:
    """A server whose turns stop after one tool round."""
    with FakeModelServer() as upstream:
        settings = make_settings(tmp_path, upstream, limits=LimitsConfig(max_iterations=1))
        with ServerThread(settings) as base_url:
            yield Running(base_url, upstream, settings)


def _calls_add(n: int) -> SSEReply:
    spec = ToolCallSpec("add", {"a": n, "b": 1}, id=f"call_{n}")
    return SSEReply(chat_chunks(text=f"step {n}", tool_calls=[spec]))


def _chunks(text: str) -> list[dict[str, Any]]:
    """The JSON `data:` payloads of an SSE body, named frames included."""
    lines = (line for frame in text.split("\n\n") for line in frame.split("\n"))
    return [orjson.loads(line[6:]) for line in lines if line.startswith("data: {")]


def test_a_capped_turn_ends_with_length_and_the_cap_error_streamed_or_not(
    capped: Running,
) -> None:
    body = {"model": "fake", "messages": [{"role": "user", "content": "count"}]}
    capped.upstream.route(CHAT, _calls_add(1), _calls_add(2))
    with capped.client() as client:
        whole = client.post(CHAT, json=body).json()
    capped.upstream.route(CHAT, _calls_add(1), _calls_add(2))
    with capped.client() as client:
        chunks = _chunks(client.post(CHAT, json=body | {"stream": True}).text)

    assert whole["choices"][0]["finish_reason"] == "length"
    assert whole["toolrelay"] == {"status": "capped", "error": CAP_ERROR}
    finishing = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert [c["choices"][0]["finish_reason"] for c in finishing] == ["length"]
    assert finishing[0]["toolrelay"] == {"status": "capped", "error": CAP_ERROR}
    streamed = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
    )
    assert streamed == whole["choices"][0]["message"]["content"] == "step 1\n\nstep 2"


def test_the_openai_sdk_reads_a_capped_stream_without_raising(capped: Running) -> None:
    capped.upstream.route(CHAT, _calls_add(1), _calls_add(2))
    sdk = openai_client(base_url=capped.base_url + "/v1", api_key=ADMIN_KEY, max_retries=0)
    stream = sdk.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "count"}], stream=True
    )
    reasons = [c.choices[0].finish_reason for c in stream if c.choices]
    assert reasons[-1] == "length"


def test_a_capped_responses_turn_is_incomplete_streamed_or_not(capped: Running) -> None:
    body = {"model": "fake", "input": "count"}
    capped.upstream.route(CHAT, _calls_add(1), _calls_add(2))
    with capped.client() as client:
        whole = client.post("/v1/responses", json=body).json()
    capped.upstream.route(CHAT, _calls_add(1), _calls_add(2))
    with capped.client() as client:
        events = _chunks(client.post("/v1/responses", json=body | {"stream": True}).text)
    last = events[-1]
    assert last["type"] == "response.incomplete"
    for response in (whole, last["response"]):
        assert response["status"] == "incomplete"
        assert response["incomplete_details"] == {"reason": "max_tool_iterations"}
