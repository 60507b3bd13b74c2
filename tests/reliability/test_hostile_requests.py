"""Issue 7 items 9 and 12: hostile request bodies get a 4xx in OpenAI's error shape.

Lone surrogates, JSON nested deeper than any encoder downstream allows,
out-of-range numbers in headers and queries, NUL characters and names too
long for the database: each gets a 4xx saying what is wrong, never a 500,
a dropped connection or a cut stream, and the server keeps serving.
"""

from __future__ import annotations

import socket
from typing import Any

import orjson
import pytest

from tests.server.conftest import ADMIN_KEY, Running
from tests.server.test_chats_api import new_chat
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import chat_chunks

SURROGATE = b'"\\ud800"'
CHAT = "/v1/chat/completions"


def nested(levels: int, leaf: bytes = b"1") -> bytes:
    """`[[[…1…]]]` as raw JSON: no encoder here can build it (orjson stops at 254)."""
    return b"[" * levels + leaf + b"]" * levels


def nested_schema(levels: int) -> bytes:
    out = b'{"type":"object"}'
    for _ in range(levels):
        out = b'{"type":"object","properties":{"a":' + out + b"}}"
    return out


def chat_body(content: bytes = b'"hi"', *, model: bytes = b'"fake"', extra: bytes = b"") -> bytes:
    return (
        b'{"model":'
        + model
        + b',"messages":[{"role":"user","content":'
        + content
        + b"}]"
        + (b"," + extra if extra else b"")
        + b"}"
    )


BODIES: dict[str, tuple[str, bytes]] = {
    "surrogate in content": (CHAT, chat_body(SURROGATE)),
    "surrogate in streamed content": (CHAT, chat_body(SURROGATE, extra=b'"stream":true')),
    "surrogate in model": (CHAT, chat_body(model=SURROGATE)),
    "surrogate in responses input": (
        "/v1/responses",
        b'{"model":"fake-responses","input":' + SURROGATE + b"}",
    ),
    "surrogate in streamed responses input": (
        "/v1/responses",
        b'{"model":"fake-responses","stream":true,"input":' + SURROGATE + b"}",
    ),
    "deep content parts": (
        CHAT,
        chat_body(b'[{"type":"text","text":"x","extra":' + nested(300) + b"}]"),
    ),
    "deep tool parameters": (
        CHAT,
        chat_body(
            extra=b'"tools":[{"type":"function","function":{"name":"d","parameters":'
            + nested_schema(150)
            + b"}}]"
        ),
    ),
    "deep extra parameter": (CHAT, chat_body(extra=b'"metadata":' + nested(300))),
    "deep extra parameter, streamed": (
        CHAT,
        chat_body(extra=b'"stream":true,"metadata":' + nested(300)),
    ),
    "deep responses input": (
        "/v1/responses",
        b'{"model":"fake-responses","input":[{"role":"user","content":' + nested(300) + b"}]}",
    ),
}


def _assert_client_error(status: int, text: str) -> dict[str, Any]:
    assert 400 <= status < 500, (status, text)
    error = orjson.loads(text)["error"]
    assert error["message"]
    return dict(error)


@pytest.mark.parametrize("case", sorted(BODIES))
def test_hostile_bodies_get_a_4xx(served: Running, case: str) -> None:
    path, body = BODIES[case]
    served.upstream.set_default(SSEReply(chat_chunks(text="fine")))
    with served.client() as client:
        response = client.post(path, content=body, headers={"content-type": "application/json"})
        _assert_client_error(response.status_code, response.text)
        after = client.post(
            CHAT, json={"model": "fake", "messages": [{"role": "user", "content": "x"}]}
        )
    assert after.status_code == 200  # still serving


CHAT_BODIES = {
    "surrogate in a chat message": b'{"content":' + SURROGATE + b"}",
    "deep chat message": b'{"content":[{"type":"text","text":"x","extra":' + nested(300) + b"}]}",
    "deep chat tool": b'{"content":"x","tools":[{"type":"function","function":{"name":"d",'
    b'"parameters":' + nested_schema(150) + b"}}]}",
}


@pytest.mark.parametrize("case", sorted(CHAT_BODIES))
def test_hostile_chat_messages_get_a_4xx(served: Running, case: str) -> None:
    with served.client() as client:
        chat_id = new_chat(client, model="fake")
        response = client.post(
            f"/api/chats/{chat_id}/messages",
            content=CHAT_BODIES[case],
            headers={"content-type": "application/json"},
        )
        _assert_client_error(response.status_code, response.text)
        assert client.get(f"/api/chats/{chat_id}").json()["messages"] == []


def _events_raw(running: Running, chat_id: str, header: bytes) -> tuple[int, bytes]:
    """GET the chat's events with a raw header line; the status and the first bytes."""
    host, port = running.base_url.removeprefix("http://").split(":")
    # httpx refuses non-ASCII header values; a raw socket sends the UTF-8 bytes as clients can
    request = (
        (
            f"GET /api/chats/{chat_id}/events HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {ADMIN_KEY}\r\nConnection: close\r\n"
        ).encode()
        + header
        + b"\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        reply = b""
        while b"\r\n\r\n" not in reply or (b" 200 " in reply[:16] and b"data:" not in reply):
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


@pytest.mark.parametrize(
    "value", ["\u0661", "-1", "1.5", "1e3"], ids=["arabic-1", "neg", "float", "exp"]
)
def test_last_event_id_that_is_no_number_is_a_400(served: Running, value: str) -> None:
    with served.client() as client:
        chat_id = new_chat(client, model="fake")
    status, body = _events_raw(served, chat_id, b"Last-Event-ID: " + value.encode())
    assert status == 400, body[:300]
    assert orjson.loads(body)["error"]["param"] == "Last-Event-ID"


@pytest.mark.parametrize("value", ["9" * 4300, str(2**64)], ids=["4300-digits", "2^64"])
def test_last_event_id_past_any_bus_gets_a_snapshot(served: Running, value: str) -> None:
    with served.client() as client:
        chat_id = new_chat(client, model="fake")
    status, body = _events_raw(served, chat_id, b"Last-Event-ID: " + value.encode())
    assert status == 200, body[:300]
    assert b"chat:snapshot" in body


@pytest.mark.parametrize(
    "query",
    [f"offset={2**63}", f"limit={2**63}", "offset=1" + "0" * 4400],
    ids=["offset", "limit", "huge"],
)
def test_out_of_range_queries_are_a_400(served: Running, query: str) -> None:
    with served.client() as client:
        response = client.get(f"/api/chats?{query}")
    _assert_client_error(response.status_code, response.text)


def test_after_past_int64_gets_a_snapshot(served: Running) -> None:
    with served.client() as client:
        chat_id = new_chat(client, model="fake")
        url = f"/api/chats/{chat_id}/events?after={2**64}"
        with client.stream("GET", url) as response:
            assert response.status_code == 200
            first = next(response.iter_lines())
    assert first.startswith("id: ")
