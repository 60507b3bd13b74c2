"""The /v1 POSTs answered before FastAPI's routing (`server.v1_front`), errors included.

The requests that reach FastAPI's routes are counted (through FastAPI's own
`dependency_overrides`): none may, valid or not (the point is the memory a
streamed chat holds through FastAPI's request stack); every error keeps the
shape and code the API documents (`guard.admit` words them for every route,
tests/server/test_one_gate.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI, Request

from tests.patience import HANG
from tests.server.conftest import ADMIN_KEY, Running, ServerThread, make_settings
from toolrelay.server import auth, guard
from toolrelay.server import gate as gate_module
from toolrelay.server.services import Services, services
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks, responses_events

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
_VALID = b'{"model": "fake", "messages": [{"role": "user", "content": "hi"}], "stream": true}'


@pytest.fixture
def counted(tmp_path: Path, upstream: FakeModelServer) -> Iterator[tuple[Running, list[str]]]:
    """The server, and the paths of the requests that reached FastAPI's routes (each of
    which takes the services as a dependency)."""
    reached: list[str] = []

    async def counting(request: Request) -> Services:
        reached.append(request.url.path)
        return await services(request)

    settings = make_settings(tmp_path, upstream)
    server = ServerThread(settings)
    app = server.server.config.app
    assert isinstance(app, FastAPI)
    app.dependency_overrides[services] = counting
    with server as base_url:
        yield Running(base_url, upstream, settings), reached


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": "fake", "messages": [{"role": "user", "content": "hi"}], **extra}


def test_valid_requests_skip_the_router(counted: tuple[Running, list[str]]) -> None:
    running, reached = counted
    running.upstream.set_default(SSEReply(chat_chunks(text=["Hello ", "there."])))
    with running.client() as client:
        with client.stream("POST", CHAT, json=_chat(stream=True)) as response:
            body = b"".join(response.iter_bytes())
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-request-id"].startswith("req_")
        assert b"Hello " in body and body.endswith(b"data: [DONE]\n\n")
        plain = client.post(CHAT, json=_chat())
        assert plain.status_code == 200, plain.text
        assert plain.json()["choices"][0]["message"]["content"] == "Hello there."
        running.upstream.set_default(SSEReply(responses_events(text="Bonjour.")))
        answer = client.post(RESPONSES, json={"model": "fake-responses", "input": "hi"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["output"][0]["content"][0]["text"] == "Bonjour."
        assert reached == []
        assert client.get("/v1/models").status_code == 200  # FastAPI's: counted
    assert reached == ["/v1/models"]


@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        (b'{"model": "fake", "stream": true}', {}, 400, "invalid_value"),  # no messages
        (b'{"model": "fake", "stream": tru', {}, 400, "invalid_json"),
        (b"[1, 2]", {}, 400, "invalid_value"),
        (b"", {}, 400, "invalid_value"),
        (b'{"model": "fake"}', {"content-type": "text/plain"}, 400, "invalid_value"),
        (_VALID, {}, 400, "invalid_value"),  # no content type: FastAPI's strict default
    ],
)
def test_invalid_requests_are_answered_before_the_router_too(
    counted: tuple[Running, list[str]],
    body: bytes,
    headers: dict[str, str],
    status: int,
    code: str,
) -> None:
    running, reached = counted
    with running.client() as client:
        answer = client.post(CHAT, content=body, headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code
    assert reached == []


def test_errors_of_the_fast_path_keep_their_shape(counted: tuple[Running, list[str]]) -> None:
    """Auth and the handler's own errors are answered here, as FastAPI's handler would."""
    running, reached = counted
    with httpx2.Client(base_url=running.base_url, timeout=10) as anonymous:
        missing = anonymous.post(CHAT, json=_chat(stream=True))
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.headers["x-request-id"].startswith("req_")
    assert missing.json() == {
        "error": {
            "message": "Missing API key: send it as 'Authorization: Bearer <key>'.",
            "type": "invalid_request_error",
            "param": None,
            "code": "missing_api_key",
        }
    }
    with running.client(key=ADMIN_KEY) as client:
        unknown = client.post(CHAT, json={**_chat(stream=True), "model": "nope"})
        gated = client.post(CHAT, json=_chat(stream=True, store=True))
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"
    assert gated.status_code == 400
    assert gated.json()["error"]["param"] == "store"
    assert reached == []


def test_a_chat_counts_as_starting_from_the_front_door_until_its_first_token(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Streams already flowing give way to a chat from its first byte at the app on
    (`server.gate`), not only once its answer began; every way out stops counting it."""
    seen: list[int] = []
    gates: list[gate_module.Gate] = []
    real = auth.authenticate

    async def counting(*args: Any) -> Any:
        gates.append(gate_module.gate())
        seen.append(gate_module.gate().starting)
        return await real(*args)

    monkeypatch.setattr(guard, "authenticate", counting)  # what `admit` calls
    running.upstream.set_default(SSEReply(chat_chunks(text=["Hello ", "there."])))
    with running.client() as client:
        streamed = client.post(CHAT, json=_chat(stream=True))
        assert streamed.status_code == 200 and b"Hello " in streamed.content
        assert client.post(CHAT, json=_chat()).status_code == 200  # not streamed
        assert client.post(CHAT, json=_chat(model="nope")).status_code == 404  # an APIError
        assert client.post(CHAT, json={"model": "fake"}).status_code == 400  # after the caller
    with running.client(key="tr-not-a-key-0123456789") as stranger:
        assert stranger.post(CHAT, json=_chat(stream=True)).status_code == 401
    assert seen == [1, 1, 1, 1, 1]  # counted while authenticated, before any answer
    gate = gates[0]
    deadline = time.monotonic() + HANG
    while gate.starting and time.monotonic() < deadline:  # the last one leaves as it ends
        time.sleep(0.01)
    assert gate.starting == 0
