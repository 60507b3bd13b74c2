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
from tests.server.test_chats_api import new_chat, wait_saved
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


@pytest.mark.parametrize(
    "value",
    ["\u0661", "9" * 4300, str(2**64), "-1", "1.5"],
    ids=["arabic-1", "4300", "2^64", "neg", "float"],
)
def test_last_event_id_out_of_range_is_a_400(served: Running, value: str) -> None:
    host, port = served.base_url.removeprefix("http://").split(":")
    with served.client() as client:
        chat_id = new_chat(client, model="fake")
    # httpx refuses non-ASCII header values; a raw socket sends the UTF-8 bytes as clients can
    request = (
        (
            f"GET /api/chats/{chat_id}/events HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {ADMIN_KEY}\r\nConnection: close\r\n"
        ).encode()
        + b"Last-Event-ID: "
        + value.encode()
        + b"\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    assert status == 400, reply[:300]
    assert orjson.loads(body)["error"]["param"] == "Last-Event-ID"


@pytest.mark.parametrize(
    "query",
    [f"offset={2**63}", f"limit={2**63}", "offset=1" + "0" * 4400],
    ids=["offset", "limit", "huge"],
)
def test_out_of_range_queries_are_a_400(served: Running, query: str) -> None:
    with served.client() as client:
        response = client.get(f"/api/chats?{query}")
    _assert_client_error(response.status_code, response.text)


def test_after_past_int64_is_a_400(served: Running) -> None:
    with served.client() as client:
        chat_id = new_chat(client, model="fake")
        response = client.get(f"/api/chats/{chat_id}/events?after={2**64}")
    _assert_client_error(response.status_code, response.text)


def test_nul_and_long_names_are_refused(served_db: Running) -> None:
    """PostgreSQL refuses NUL in text and names over 255 characters: a 4xx, on both backends."""
    with served_db.client() as client:
        for body in ({"title": "a\x00b"}, {"title": "x" * 1000}):
            response = client.post("/api/chats", json=body)
            _assert_client_error(response.status_code, response.text)
        for body in ({"user": "a\x00b"}, {"user": "u" * 256}, {"name": "n" * 256}):
            response = client.post("/api/admin/keys", json=body)
            _assert_client_error(response.status_code, response.text)
        for chat_id in ("a%00b", "x" * 300):
            response = client.get(f"/api/chats/{chat_id}")
            assert response.status_code == 404, response.text
        chat_id = new_chat(client, model="fake", title="fine")
        served_db.upstream.set_default(SSEReply(chat_chunks(text="ok")))
        response = client.post(f"/api/chats/{chat_id}/messages", json={"content": "a\x00b"})
        assert response.status_code == 202, response.text  # content is JSON: NUL is fine there
        assert wait_saved(client, chat_id)["content"] == "ok"
        assert client.get(f"/api/chats/{chat_id}").json()["messages"][0]["content"] == "a\x00b"
