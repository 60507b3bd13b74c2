"""Upstream faults through the running server: refused, HTTP 500, dropped, malformed (SPEC R22).

Each fault must end that one response with a clear error (502, an SSE error
line, or a saved `failed` turn with its partial text) and leave the server
serving the next request normally.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import orjson
import pytest

from tests.sdk_clients import openai_client
from tests.server.conftest import ADMIN_KEY, Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.adapters.models.http import DEFAULT_RETRY
from toolrelay.config.settings import ModelRoute
from toolrelay.testing.fake_server import FakeModelServer, RawReply, SSEReply
from toolrelay.testing.wire import chat_chunks

CHAT = "/v1/chat/completions"
OVERLOADED = "The engine is overloaded"
LOST = "Connection to the model server was lost mid-response: "
ASK = [{"role": "user", "content": "tell me a story"}]


def closed_port() -> int:
    """A port nobody listens on: bound once to learn a free number, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def faulty(tmp_path: Path, upstream: FakeModelServer) -> Iterator[Running]:
    """The usual routes plus `dead`, whose base_url points at a closed port."""
    base = make_settings(tmp_path, upstream).models
    dead = ModelRoute(name="dead", base_url=f"http://127.0.0.1:{closed_port()}", model="m")
    settings = make_settings(tmp_path, upstream, models=[*base, dead])
    with ServerThread(settings) as base_url:
        yield Running(base_url, upstream, settings)


def sdk(running: Running) -> openai.OpenAI:
    return openai_client(
        base_url=running.base_url + "/v1", api_key=ADMIN_KEY, max_retries=0, timeout=10
    )


def server_error() -> RawReply:
    """An OpenAI-style 500 that asks for an immediate retry (keeps the test fast)."""
    body = {"error": {"message": OVERLOADED, "type": "server_error", "code": None}}
    return RawReply(
        500, orjson.dumps(body), {"content-type": "application/json", "retry-after-ms": "0"}
    )


def story(**pacing: Any) -> SSEReply:
    return SSEReply(chat_chunks(text=["Once ", "upon ", "a ", "time."]), **pacing)


def sse_payloads(response: httpx2.Response) -> list[Any]:
    """Every `data:` payload of a streamed reply in order, `[DONE]` kept as the string."""
    assert response.headers["content-type"].startswith("text/event-stream")
    out: list[Any] = []
    for block in response.text.split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                data = line.removeprefix("data: ")
                out.append(data if data == "[DONE]" else orjson.loads(data))
    return out


def streamed_text(payloads: list[Any]) -> str:
    return "".join(
        p["choices"][0]["delta"].get("content") or ""
        for p in payloads
        if isinstance(p, dict) and p.get("choices")
    )


def assert_still_serving(running: Running, client: httpx2.Client) -> None:
    """The very next request, streamed and not, is answered normally."""
    running.upstream.route(CHAT, SSEReply(chat_chunks(text=["All ", "good."])))
    plain = client.post(CHAT, json={"model": "fake", "messages": ASK})
    assert plain.status_code == 200, plain.text
    assert plain.json()["choices"][0]["message"]["content"] == "All good."
    assert plain.json()["choices"][0]["finish_reason"] == "stop"
    running.upstream.route(CHAT, SSEReply(chat_chunks(text=["Still ", "fine."])))
    streamed = client.post(CHAT, json={"model": "fake", "messages": ASK, "stream": True})
    payloads = sse_payloads(streamed)
    assert streamed_text(payloads) == "Still fine." and payloads[-1] == "[DONE]"
    assert not any(isinstance(p, dict) and "error" in p for p in payloads)


def assert_error_then_done(payloads: list[Any], message: str) -> None:
    """The SSE error line (OpenAI's shape) comes last, followed only by `[DONE]`."""
    assert payloads[-1] == "[DONE]"
    error = payloads[-2]["error"]
    assert error["type"] == "upstream_error"
    assert error["message"].startswith(message), error
    assert not any(isinstance(p, dict) and "error" in p for p in payloads[:-2])
    finishes = [p["choices"][0]["finish_reason"] for p in payloads[:-2] if isinstance(p, dict)]
    assert set(finishes) == {None}  # no `stop` chunk pretends the answer was whole


# -- connection refused -------------------------------------------------------------------


def test_refused_non_stream_is_502_then_serving(faulty: Running) -> None:
    with faulty.client() as client:
        response = client.post(CHAT, json={"model": "dead", "messages": ASK})
        assert response.status_code == 502
        error = response.json()["error"]
        assert error["type"] == "upstream_error"
        assert error["message"].startswith("Cannot connect to the model server: ")
        assert faulty.upstream.requests == []
        assert_still_serving(faulty, client)


def test_refused_stream_sends_error_line_then_done(faulty: Running) -> None:
    with faulty.client() as client:
        response = client.post(CHAT, json={"model": "dead", "messages": ASK, "stream": True})
        assert response.status_code == 200
        payloads = sse_payloads(response)
        assert streamed_text(payloads) == ""
        assert_error_then_done(payloads, "Cannot connect to the model server: ")
        assert_still_serving(faulty, client)


def test_refused_in_the_chat_api_saves_a_failed_turn(faulty: Running) -> None:
    with faulty.client() as client:
        chat_id = new_chat(client, model="dead")
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "hello?"})
        events = read_events(client, chat_id, last=0)  # from the start, however soon it ended
        saved = wait_saved(client, chat_id, status="failed")
        assert saved["content"] == "" and saved["output"] == []
        assert saved["error"].startswith("Cannot connect to the model server: ")
        final = events[-1][1]
        assert final["type"] == "chat:completion" and final["data"]["status"] == "failed"
        assert final["data"]["error"]["content"] == saved["error"]
        # the same chat takes the next message on a working route
        faulty.upstream.route(CHAT, SSEReply(chat_chunks(text="Here now.")))
        again = client.post(
            f"/api/chats/{chat_id}/messages", json={"content": "hello?", "model": "fake"}
        )
        assert again.status_code == 202
        assert wait_saved(client, chat_id)["content"] == "Here now."


# -- HTTP 500 -----------------------------------------------------------------------------


def test_upstream_500_non_stream_is_502_with_its_message(running: Running) -> None:
    running.upstream.route(CHAT, *[server_error() for _ in range(DEFAULT_RETRY.attempts)])
    with pytest.raises(openai.APIStatusError) as info:
        sdk(running).chat.completions.create(model="fake", messages=ASK)  # type: ignore[arg-type]
    assert info.value.status_code == 502
    body = info.value.body
    assert isinstance(body, dict)
    message, _, request_id = body["message"].partition(" (request id ")
    assert message == f"Model server returned 500: {OVERLOADED}"
    assert request_id == f"{info.value.response.headers['x-request-id']})"  # as the log says
    assert len(running.upstream.requests) == DEFAULT_RETRY.attempts  # retried, then gave up
    with running.client() as client:
        assert_still_serving(running, client)


def test_upstream_500_stream_is_an_error_line_then_done(running: Running) -> None:
    running.upstream.route(CHAT, *[server_error() for _ in range(DEFAULT_RETRY.attempts)])
    with running.client() as client:
        response = client.post(CHAT, json={"model": "fake", "messages": ASK, "stream": True})
        assert response.status_code == 200
        payloads = sse_payloads(response)
        assert_error_then_done(payloads, f"Model server returned 500: {OVERLOADED}")
        request_id = response.headers["x-request-id"]  # the log's lines carry it too
        expected = f"Model server returned 500: {OVERLOADED} (request id {request_id})"
        assert payloads[-2]["error"]["message"] == expected
        assert_still_serving(running, client)


def test_upstream_500_stream_raises_in_the_sdk(running: Running) -> None:
    running.upstream.route(CHAT, *[server_error() for _ in range(DEFAULT_RETRY.attempts)])
    stream = sdk(running).chat.completions.create(
        model="fake",
        messages=ASK,  # type: ignore[arg-type]
        stream=True,
    )
    with pytest.raises(openai.APIError) as info:
        for _ in stream:
            pass
    assert OVERLOADED in info.value.message


# -- dropped mid-stream ---------------------------------------------------------------------


def test_drop_mid_stream_saves_failed_turn_with_partial_text(running: Running) -> None:
    running.upstream.route(CHAT, story(drop_after=3))  # role chunk, "Once ", "upon ", then cut
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "tell me a story"})
        events = read_events(client, chat_id, last=0)  # from the start, however soon it ended
        saved = wait_saved(client, chat_id, status="failed")
        assert saved["content"] == "Once upon "
        assert [(i["type"], i["status"]) for i in saved["output"]] == [("message", "incomplete")]
        assert saved["error"].startswith(LOST)
        deltas = "".join(
            e["data"]["delta"] for _, e in events if e["type"] == "response.output_text.delta"
        )
        # a finished turn's deltas are dropped by the bus after its save (docs/events.md):
        # a read that starts after the end gets none, and the text from output_item.done
        assert deltas in ("Once upon ", "")
        final = events[-1][1]["data"]
        assert final["status"] == "failed"
        # the partial text went out in its item; the final event refers to it
        done = [e["data"]["item"] for _, e in events if e["type"] == "response.output_item.done"]
        assert done[-1]["content"][0]["text"] == "Once upon "
        assert final["output"][-1] == {**final["output"][-1], "id": done[-1]["id"]}
        assert final["error"]["content"] == saved["error"]
        # the chat is not stuck: the next message runs and completes
        running.upstream.route(CHAT, story())
        assert client.post(f"/api/chats/{chat_id}/messages", json={"content": "again"}).is_success
        assert wait_saved(client, chat_id)["content"] == "Once upon a time."


def test_drop_mid_stream_through_the_openai_stream(running: Running) -> None:
    running.upstream.route(CHAT, story(drop_after=3))
    with running.client() as client:
        response = client.post(CHAT, json={"model": "fake", "messages": ASK, "stream": True})
        payloads = sse_payloads(response)
        assert streamed_text(payloads) == "Once upon "
        assert_error_then_done(payloads, LOST)
        assert_still_serving(running, client)


def test_drop_mid_stream_non_stream_does_not_look_complete(running: Running) -> None:
    running.upstream.route(CHAT, story(drop_after=3))
    with running.client() as client:
        response = client.post(CHAT, json={"model": "fake", "messages": ASK})
    looks_whole = (
        response.status_code == 200 and response.json()["choices"][0]["finish_reason"] == "stop"
    )
    assert not looks_whole, response.text


# -- malformed chunk ----------------------------------------------------------------------


def _with_garbage() -> SSEReply:
    chunks = chat_chunks(text=["Before ", "after"])
    return SSEReply([chunks[0], chunks[1], "data: {not json\n\n", *chunks[2:]])


def test_malformed_chunk_in_the_openai_stream(running: Running) -> None:
    running.upstream.route(CHAT, _with_garbage())
    with running.client() as client:
        response = client.post(CHAT, json={"model": "fake", "messages": ASK, "stream": True})
        payloads = sse_payloads(response)
        assert streamed_text(payloads) == "Before "
        assert_error_then_done(payloads, "Malformed chunk from the model server: '{not json'")
        assert_still_serving(running, client)


def test_malformed_chunk_in_the_chat_api(running: Running) -> None:
    running.upstream.route(CHAT, _with_garbage())
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "go"})
        saved = wait_saved(client, chat_id, status="failed")
        assert saved["content"] == "Before "
        assert saved["error"] == "Malformed chunk from the model server: '{not json'"
        assert_still_serving(running, client)


def test_upstream_500_in_the_chat_api_saves_a_failed_turn(running: Running) -> None:
    running.upstream.route(CHAT, *[server_error() for _ in range(DEFAULT_RETRY.attempts)])
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "go"})
        saved = wait_saved(client, chat_id, status="failed")
        assert (saved["content"], saved["output"]) == ("", [])
        assert saved["error"] == f"Model server returned 500: {OVERLOADED}"
        running.upstream.route(CHAT, story())
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "go on"})
        assert wait_saved(client, chat_id)["content"] == "Once upon a time."
