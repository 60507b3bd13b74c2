"""Issue 8 through the real server: stateful Responses routes, client-tool results, event calls."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import LOCATION_TOOL, new_chat, wait_saved
from toolrelay.config.settings import LimitsConfig, ModelRoute
from toolrelay.core.tools.results import UI_SHOWN_TEXT
from toolrelay.events import ChatStreamReader
from toolrelay.testing.fake_server import BodyReply, FakeModelServer, SSEReply
from toolrelay.testing.wire import (
    ToolCallSpec,
    chat_chunks,
    render_responses_sse,
    responses_events,
)

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


# --------------------------------------------------------------------------- client-tool results

CHAT = "/v1/chat/completions"
MAP_HTML = "<div id='map'>Berlin</div>"
INLINE_HTML = {"Content-Type": "text/html", "Content-Disposition": "inline"}


def answering(client: httpx2.Client, chat_id: str, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """Read the chat's events to the end; answer each `execute:tool` with `answer` (plus its id)."""
    seen: list[dict[str, Any]] = []
    decoder = ChatStreamReader()
    with client.stream("GET", f"/api/chats/{chat_id}/events") as response:
        for chunk in response.iter_bytes():
            for _frame_id, whole in decoder.feed(chunk):
                event = whole.to_dict()
                seen.append(event)
                if event["type"] == "execute:tool":
                    body = {"id": event["data"]["id"], **answer}
                    posted = client.post(f"/api/chats/{chat_id}/tool-results", json=body)
                    assert posted.status_code == 202, posted.text
    return seen


@pytest.mark.parametrize(
    "answer",
    [
        {"result": [MAP_HTML, INLINE_HTML]},  # a direct tool's `[data, headers]`
        {"result": MAP_HTML, "headers": INLINE_HTML},
    ],
    ids=["data-headers-list", "headers-field"],
)
def test_a_client_tools_inline_html_becomes_an_embed(
    running: Running, answer: dict[str, Any]
) -> None:
    running.upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("get_location", {}, id="call_g")])),
        SSEReply(chat_chunks(text="Shown.")),
    )
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        client.post(
            f"/api/chats/{chat_id}/messages", json={"content": "where?", "tools": LOCATION_TOOL}
        )
        answering(client, chat_id, answer)
        saved = wait_saved(client, chat_id)
    output = next(i for i in saved["output"] if i["type"] == "function_call_output")
    assert output["embeds"] == [MAP_HTML]
    assert output["output"] == UI_SHOWN_TEXT
    sent = running.upstream.requests[1].json["messages"][-1]
    assert sent == {"role": "tool", "tool_call_id": "call_g", "content": UI_SHOWN_TEXT}


# --------------------------------------------------------------------------- __event_call__


def test_an_event_call_is_answered_through_the_tool_results_endpoint(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    tools = Path(__file__).parent / "event_call_tools.py"
    hang_guard = LimitsConfig(client_tool_timeout=20)
    settings = make_settings(tmp_path, upstream, tools=[str(tools)], limits=hang_guard)
    upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("ask_name", {}, id="call_n")])),
        SSEReply(chat_chunks(text="Greeted.")),
    )
    with ServerThread(settings) as base_url, Running(base_url, upstream, settings).client() as c:
        chat_id = new_chat(c, model="fake")
        c.post(f"/api/chats/{chat_id}/messages", json={"content": "greet me"})
        seen: list[dict[str, Any]] = []
        decoder = ChatStreamReader()
        with c.stream("GET", f"/api/chats/{chat_id}/events") as response:
            for chunk in response.iter_bytes():
                for _frame_id, whole in decoder.feed(chunk):
                    event = whole.to_dict()
                    seen.append(event)
                    if event["type"] == "input":
                        answer = {"id": event["data"]["id"], "result": "Ada"}
                        assert c.post(f"/api/chats/{chat_id}/tool-results", json=answer).is_success
        saved = wait_saved(c, chat_id)
    assert any(e["type"] == "input" for e in seen)
    output = next(i for i in saved["output"] if i["type"] == "function_call_output")
    assert output["output"] == "Hello, Ada!"


# --------------------------------------------------------------------------- passthrough (R2, R23)


@pytest.mark.parametrize("content_type", ["text/plain; charset=utf-8", "text/html"])
def test_a_plain_text_200_body_is_passed_through_as_the_answer(
    running: Running, content_type: str
) -> None:
    running.upstream.route(CHAT, BodyReply(b"Served as plain text.", content_type=content_type))
    with running.client() as http:
        answer = http.post(
            CHAT, json={"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
        )
    assert answer.status_code == 200, answer.text
    choice = answer.json()["choices"][0]
    assert choice["message"]["content"] == "Served as plain text."
    assert choice["finish_reason"] == "stop"
