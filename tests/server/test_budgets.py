"""Issue 29 item 5 through a running server: token and cost budgets per turn (status
`capped`, a visible message, as the iteration cap), daily budgets per user and per key
from the store (429 with a clear body), and spend on /metrics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.config.budgets import BudgetsConfig
from toolrelay.config.settings import LimitsConfig, ModelRoute
from toolrelay.testing.fake_server import FakeModelServer, RecordedRequest, Reply, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

USAGE = {"prompt_tokens": 8, "completion_tokens": 5, "total_tokens": 13}


def _tool_then_answer(request: RecordedRequest) -> Reply:
    if any(m["role"] == "tool" for m in request.json["messages"]):
        return SSEReply(chat_chunks(text="Three.", usage=USAGE))
    calls = [ToolCallSpec("add", {"a": 1, "b": 2}, id="call_add")]
    return SSEReply(chat_chunks(tool_calls=calls, usage=USAGE))


def _serve(tmp_path: Path, upstream: FakeModelServer, **extra: Any) -> Iterator[Running]:
    routes = [
        ModelRoute(name="fake", base_url=upstream.base_url, model="m"),
        ModelRoute(
            name="priced",
            base_url=upstream.base_url,
            model="m",
            prices={"input": 1_000_000.0, "output": 0.0},  # one unit per input token
        ),
    ]
    settings = make_settings(tmp_path, upstream, models=routes, **extra)
    with ServerThread(settings) as base_url:
        yield Running(base_url, upstream, settings)


@pytest.fixture
def per_turn(tmp_path: Path, upstream: FakeModelServer) -> Iterator[Running]:
    yield from _serve(tmp_path, upstream, limits=LimitsConfig(max_total_tokens=10, max_cost=5))


@pytest.fixture
def daily(tmp_path: Path, upstream: FakeModelServer) -> Iterator[Running]:
    yield from _serve(tmp_path, upstream, budgets=BudgetsConfig(user_daily_tokens=20))


def _chat_turn(running: Running, model: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with running.client() as client:
        chat_id = new_chat(client, model=model)
        posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "1+2?"})
        assert posted.status_code == 202, posted.text
        events = [e for _, e in read_events(client, chat_id, last=0)]
        saved = wait_saved(client, chat_id, status="capped")
    return events, saved


def test_a_turn_over_its_token_budget_is_capped(per_turn: Running) -> None:
    per_turn.upstream.set_default(_tool_then_answer)
    events, saved = _chat_turn(per_turn, "fake")
    message = "Token budget reached: this turn used 13 total tokens; the limit is 10."
    assert str(saved["error"]).startswith(message)
    errors = [e["data"]["error"]["content"] for e in events if e["type"] == "chat:message:error"]
    assert errors and errors[0].startswith(message)
    assert len(per_turn.upstream.requests) == 1  # no model call after the budget was reached
    call = next(i for i in saved["output"] if i["type"] == "function_call")
    assert call["status"] == "incomplete"  # the call the model asked for was not run
    assert not [i for i in saved["output"] if i["type"] == "function_call_output"]


def test_a_priced_route_costs_and_a_cost_budget_caps(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    limits = LimitsConfig(max_cost=5)
    for running in _serve(tmp_path, upstream, limits=limits):
        running.upstream.set_default(_tool_then_answer)
        events, saved = _chat_turn(running, "priced")
        assert saved["usage"]["cost"] == 8.0
        assert str(saved["error"]).startswith(
            "Cost budget reached: this turn cost 8.0000; the limit is 5.0000."
        )
        with running.client() as client:
            text = client.get("/metrics").text
        assert 'toolrelay_cost_total{route="priced"} 8.0' in text


def test_a_users_daily_budget_is_a_429_once_spent(daily: Running) -> None:
    daily.upstream.set_default(SSEReply(chat_chunks(text="ok", usage=USAGE)))
    body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
    with daily.client() as client:
        assert client.post("/v1/chat/completions", json=body).status_code == 200  # 13 used
        assert client.post("/v1/chat/completions", json=body).status_code == 200  # 26 used
        refused = client.post("/v1/chat/completions", json=body)
        assert refused.status_code == 429
        error = refused.json()["error"]
        assert error["code"] == "budget_exceeded" and error["param"] == "user"
        assert "26 of 20 tokens used today (UTC)" in error["message"]
        assert int(refused.headers["Retry-After"]) > 0
        chat_id = new_chat(client, model="fake")  # the chat API reads the same budget
        posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "hi"})
        assert posted.status_code == 429 and posted.json()["error"]["code"] == "budget_exceeded"
        assert 'toolrelay_budget_refusals_total{scope="user"} 2.0' in client.get("/metrics").text
        key = client.post("/api/admin/keys", json={"name": "bob", "user": "bob"}).json()["key"]
    with daily.client(key) as bob:  # another user: a budget of their own
        assert bob.post("/v1/chat/completions", json=body).status_code == 200


def test_a_keys_daily_budget_is_its_own(tmp_path: Path, upstream: FakeModelServer) -> None:
    upstream.set_default(SSEReply(chat_chunks(text="ok", usage=USAGE)))
    body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
    for running in _serve(tmp_path, upstream, budgets=BudgetsConfig(key_daily_tokens=10)):
        with running.client() as client:
            assert client.post("/v1/chat/completions", json=body).status_code == 200  # 13 used
            refused = client.post("/v1/chat/completions", json=body)
            assert refused.status_code == 429 and refused.json()["error"]["param"] == "key"
            assert "this API key's" in refused.json()["error"]["message"]
            other = client.post("/api/admin/keys", json={"name": "second"}).json()["key"]
        with running.client(other) as second:  # the same user, another key: its own budget
            assert second.post("/v1/chat/completions", json=body).status_code == 200
