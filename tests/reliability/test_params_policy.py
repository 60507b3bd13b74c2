"""Issue 7 item 11: what a client may put in the upstream request body.

The operator's route `params` are pinned unless listed in `overridable`;
keys that would replace the conversation are a 400 naming the key; `store`
and `service_tier` (cost money or keep data upstream) and non-standard keys
(vLLM's `top_k` …) pass only where the route lists them in `allow_params`;
the other standard OpenAI parameters pass, renamed for the upstream's API.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import Running, ServerThread, make_settings
from toolrelay.config.settings import ModelRoute
from toolrelay.testing.fake_server import FakeModelServer, NDJSONReply, SSEReply
from toolrelay.testing.wire import chat_chunks, ollama_lines, responses_events

ASK = [{"role": "user", "content": "hi"}]


@pytest.fixture
def routed(tmp_path: Path) -> Iterator[Running]:
    with FakeModelServer() as upstream:
        url = upstream.base_url
        routes = [
            ModelRoute(
                name="tuned",
                base_url=url,
                model="m",
                params={"temperature": 0.1, "max_tokens": 50},
                overridable=["max_tokens"],
                allow_params=["top_k", "store"],
            ),
            ModelRoute(name="plain", base_url=url, model="m"),
            ModelRoute(
                name="resp",
                kind="openai-responses",
                base_url=url,
                model="m",
                params={"temperature": 0.2},
            ),
            ModelRoute(name="ollama", kind="ollama", base_url=url, model="m"),
        ]
        settings = make_settings(tmp_path, upstream, models=routes)
        with ServerThread(settings) as base_url:
            yield Running(base_url, upstream, settings)


def _sent(running: Running, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """Post `body`, expect success; the JSON body the upstream received."""
    upstream = running.upstream
    upstream.set_default(SSEReply(chat_chunks(text="ok")))
    upstream.route("/v1/responses", SSEReply(responses_events(text="ok")))
    before = len(upstream.requests)
    with running.client() as client:
        response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    assert len(upstream.requests) == before + 1
    sent: dict[str, Any] = upstream.requests[-1].json
    return sent


def _refused(running: Running, path: str, body: dict[str, Any], key: str) -> None:
    before = len(running.upstream.requests)
    with running.client() as client:
        response = client.post(path, json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == key and f"`{key}`" in error["message"]
    assert len(running.upstream.requests) == before  # nothing reached the upstream


def test_route_params_are_pinned_unless_overridable(routed: Running) -> None:
    extra = {"temperature": 0.9, "max_tokens": 7, "top_k": 5, "store": True, "seed": 3}
    sent = _sent(routed, "/v1/chat/completions", {"model": "tuned", "messages": ASK, **extra})
    assert sent["temperature"] == 0.1  # pinned by the operator
    assert sent["max_tokens"] == 7  # listed as overridable
    assert sent["top_k"] == 5 and sent["store"] is True  # listed in allow_params
    assert sent["seed"] == 3  # a standard parameter
    assert sent["messages"][-1] == ASK[0]


@pytest.mark.parametrize(
    "key", ["input", "instructions", "previous_response_id", "prompt", "conversation"]
)
def test_keys_that_replace_the_conversation_are_refused(routed: Running, key: str) -> None:
    body = {"model": "plain", "messages": ASK, key: "take over"}
    _refused(routed, "/v1/chat/completions", body, key)


@pytest.mark.parametrize("key", ["messages", "prompt", "conversation"])
def test_responses_keys_that_replace_the_conversation_are_refused(
    routed: Running, key: str
) -> None:
    _refused(routed, "/v1/responses", {"model": "resp", "input": "hi", key: ASK}, key)


@pytest.mark.parametrize(
    ("key", "value"),
    [("store", True), ("service_tier", "priority"), ("top_k", 5), ("chat_template_kwargs", {})],
)
def test_costly_and_non_standard_keys_need_the_route(routed: Running, key: str, value: Any) -> None:
    _refused(routed, "/v1/chat/completions", {"model": "plain", "messages": ASK, key: value}, key)
    _refused(routed, "/v1/responses", {"model": "resp", "input": "hi", key: value}, key)


def test_standard_parameters_pass(routed: Running) -> None:
    extra = {"user": "u1", "max_tokens": 9, "stop": ["x"], "tool_choice": "auto"}
    sent = _sent(routed, "/v1/chat/completions", {"model": "plain", "messages": ASK, **extra})
    assert {k: sent[k] for k in extra} == extra


def test_responses_parameters_keep_their_meaning_on_a_chat_upstream(routed: Running) -> None:
    body = {
        "model": "plain",
        "input": "hi",
        "max_output_tokens": 11,
        "reasoning": {"effort": "low"},
        "temperature": 0.5,
    }
    sent = _sent(routed, "/v1/responses", body)
    assert sent["max_tokens"] == 11 and "max_output_tokens" not in sent
    assert sent["reasoning_effort"] == "low" and "reasoning" not in sent
    assert sent["temperature"] == 0.5


def test_chat_parameters_keep_their_meaning_on_a_responses_upstream(routed: Running) -> None:
    body = {"model": "resp", "messages": ASK, "max_tokens": 12, "temperature": 0.9}
    sent = _sent(routed, "/v1/chat/completions", body)
    assert sent["max_output_tokens"] == 12 and "max_tokens" not in sent
    assert sent["temperature"] == 0.2  # pinned on that route


def test_ollama_gets_its_own_option_names(routed: Running) -> None:
    routed.upstream.route("/api/chat", NDJSONReply(ollama_lines(text="ok")))
    body = {"model": "ollama", "messages": ASK, "max_tokens": 5, "seed": 1, "user": "u1"}
    sent = _sent(routed, "/v1/chat/completions", body)
    assert sent["options"] == {"num_predict": 5, "seed": 1}  # `user` means nothing to Ollama
