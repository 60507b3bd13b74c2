"""Issue 7 item 1: clients that leave a streamed /v1 answer must not leak the upstream connection.

Many clients open a stream whose upstream answer stalls mid-body, read the
first bytes and hang up. Each upstream connection must then be closed at once
(counted on the fake model server's side), so a busy route never runs out of
connections.
"""

from __future__ import annotations

import socket

import orjson
import pytest

from tests.server.conftest import ADMIN_KEY, Running
from tests.server.observe.test_request_log import logged
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import chat_chunks, responses_events

CLIENTS = 24


def _open_and_leave(base_url: str, path: str, body: dict[str, object]) -> None:
    """POST a streamed request on a raw socket, read until the model's text streams, hang up."""
    host, port = base_url.removeprefix("http://").split(":")
    payload = orjson.dumps(body)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {ADMIN_KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head + payload)
        seen = b""
        while b"Once" not in seen:  # the upstream answer is streaming through
            chunk = sock.recv(4096)
            assert chunk, "the server closed before streaming"
            seen += chunk
        assert b" 200 " in seen.split(b"\r\n", 1)[0]


def _stalled_chat() -> SSEReply:
    return SSEReply(chat_chunks(text=["Once ", "upon ", "a ", "time."]), stall_after=2)


def _stalled_responses() -> SSEReply:
    return SSEReply(responses_events(text=["Once ", "upon ", "a ", "time."]), stall_after=6)


STALLED_STREAMS = pytest.mark.parametrize(
    ("path", "model", "reply"),
    [
        ("/v1/chat/completions", "fake", _stalled_chat),
        ("/v1/responses", "fake-responses", _stalled_responses),
    ],
)


def _stalled_story(served: Running, path: str, model: str, reply: object) -> dict[str, object]:
    """Make every upstream answer stall after its first words; the streamed request to send."""
    assert callable(reply)
    served.upstream.set_default(reply())
    body: dict[str, object] = {"model": model, "stream": True}
    if path.endswith("responses"):
        body["input"] = "tell me a story"
    else:
        body["messages"] = [{"role": "user", "content": "tell me a story"}]
    return body


@STALLED_STREAMS
def test_clients_that_leave_release_the_upstream(
    served: Running, path: str, model: str, reply: object
) -> None:
    upstream = served.upstream
    body = _stalled_story(served, path, model, reply)
    for _ in range(CLIENTS):
        _open_and_leave(served.base_url, path, body)
    assert len(upstream.requests) == CLIENTS
    # every upstream answer stalls forever: only our side closing can end the connections
    assert upstream.wait_for_connections(0, timeout=30), (
        f"{upstream.open_connections} of {CLIENTS} upstream connections still open"
    )


@STALLED_STREAMS
def test_a_stream_left_early_is_request_logged_as_cancelled(
    served: Running, path: str, model: str, reply: object
) -> None:
    """Issue 15: a /v1 stream the client left was cancelled and never reached the request log."""
    upstream = served.upstream
    body = _stalled_story(served, path, model, reply)
    _open_and_leave(served.base_url, path, body)
    assert upstream.wait_for_connections(0, timeout=30)
    with served.client() as client:
        [chat] = logged(client, 1)
        messages = client.get(f"/api/chats/{chat['id']}").json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    turn = messages[-1]
    assert turn["status"] == "cancelled"
    assert turn["content"].startswith("Once ")  # what had streamed before the client left
