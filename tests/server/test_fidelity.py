"""Issue 8 through the real server: stateful Responses routes, client-tool results, event calls."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import Running, ServerThread, make_settings
from toolrelay.server.settings import ModelRoute
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import ToolCallSpec, render_responses_sse, responses_events

RESPONSES = "/v1/responses"


def responses_reply(**kwargs: object) -> SSEReply:
    return SSEReply(
        [render_responses_sse([e]) for e in responses_events(**kwargs)],  # type: ignore[arg-type]
        done=False,
    )


@pytest.fixture
def stateful(tmp_path: Path, upstream: FakeModelServer) -> Iterator[Running]:
    route = ModelRoute(
        name="kept",
        kind="openai-responses",
        base_url=upstream.base_url,
        model="fake-model",
        stateful=True,
    )
    settings = make_settings(tmp_path, upstream, models=[route])
    with ServerThread(settings) as base_url:
        yield Running(base_url, upstream, settings)


def test_a_stateful_route_continues_with_previous_response_id(stateful: Running) -> None:
    stateful.upstream.route(
        RESPONSES,
        responses_reply(
            function_calls=[ToolCallSpec("add", {"a": 2, "b": 3}, id="call_a")],
            response_id="resp_1",
        ),
        responses_reply(text="5", response_id="resp_2"),
    )
    with stateful.client() as http:
        answer = http.post(
            "/v1/chat/completions",
            json={"model": "kept", "messages": [{"role": "user", "content": "2+3?"}]},
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "5"
    first, second = (r.json for r in stateful.upstream.requests)
    assert first["store"] is True and "previous_response_id" not in first
    assert second["previous_response_id"] == "resp_1"
    assert all(i.get("role") != "user" for i in second["input"])  # the history is not resent
    assert [i["type"] for i in second["input"]] == ["function_call_output"]
