"""Issue 7 item 12 (front door): body limits and timeouts, keep-alives, no internal URLs.

- a chunked body over `max_body_bytes` is a 413, as with Content-Length;
- a body shorter than its Content-Length does not hold the connection forever;
- errors do not show API users the upstream's internal URL;
- a streamed answer sends SSE comments while server-side tools run.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.server.conftest import ADMIN_KEY, TOOLS, Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from tests.server.test_faults import closed_port
from toolrelay.config.settings import ModelRoute
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

CHAT = "/v1/chat/completions"
LIMIT = 2000


@pytest.fixture
def strict(tmp_path: Path) -> Iterator[Running]:
    """A small body limit, a short body timeout, fast keep-alives and a dead route."""
    with FakeModelServer() as upstream:
        base = make_settings(tmp_path, upstream).models
        dead = ModelRoute(name="dead", base_url=f"http://127.0.0.1:{closed_port()}", model="m")
        settings = make_settings(
            tmp_path,
            upstream,
            models=[*base, dead],
            max_body_bytes=LIMIT,
            body_timeout_s=0.5,
            keepalive_s=0.2,
            tools=[str(TOOLS), str(Path(__file__).parent / "slow_tools.py")],
        )
        with ServerThread(settings) as base_url:
            yield Running(base_url, upstream, settings)


def test_a_chunked_body_over_the_limit_is_a_413(strict: Running) -> None:
    def pieces() -> Iterator[bytes]:
        yield b'{"model":"fake","messages":[{"role":"user","content":"'
        for _ in range(LIMIT // 100 + 5):
            yield b"x" * 100
        yield b'"}]}'

    with strict.client() as client:
        response = client.post(CHAT, content=pieces(), headers={"content-type": "application/json"})
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "body_too_large"


def _raw(base_url: str, request: bytes) -> bytes:
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        reply = b""
        while chunk := sock.recv(65536):  # the server must answer and close by itself
            reply += chunk
    return reply


def test_a_body_shorter_than_its_length_times_out(strict: Running) -> None:
    head = (
        f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_KEY}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    ).encode()
    reply = _raw(strict.base_url, head + b'{"model":')
    status = int(reply.split(b" ", 2)[1])
    assert status == 408, reply[:300]
    body = reply.partition(b"\r\n\r\n")[2]
    assert orjson.loads(body)["error"]["code"] == "body_timeout"


def _no_internal_url(message: str, port: int) -> None:
    assert "127.0.0.1" not in message and str(port) not in message, message
    assert message.startswith("Cannot connect to the model server")


def test_errors_do_not_show_the_upstream_url(strict: Running) -> None:
    port = int(next(r for r in strict.settings.models if r.name == "dead").base_url.split(":")[-1])
    ask = {"model": "dead", "messages": [{"role": "user", "content": "hi"}]}
    with strict.client() as client:
        plain = client.post(CHAT, json=ask)
        assert plain.status_code == 502
        _no_internal_url(plain.json()["error"]["message"], port)
        streamed = client.post(CHAT, json={**ask, "stream": True})
        lines = [x for x in streamed.text.split("\n\n") if x]
        _no_internal_url(orjson.loads(lines[-2].removeprefix("data: "))["error"]["message"], port)
        chat_id = new_chat(client, model="dead")
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "hi"})
        events = [e for _, e in read_events(client, chat_id)]
        _no_internal_url(wait_saved(client, chat_id, "failed")["error"], port)
    errors = [e["data"]["error"]["content"] for e in events if e["type"] == "chat:message:error"]
    assert errors
    for message in errors:
        _no_internal_url(message, port)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CHAT, {"model": "fake", "messages": [{"role": "user", "content": "wait"}]}),
        ("/v1/responses", {"model": "fake", "input": "wait"}),
    ],
)
def test_streams_send_keepalives_while_tools_run(
    strict: Running, tmp_path: Path, path: str, body: dict[str, object]
) -> None:
    flag = tmp_path / "release"
    call = ToolCallSpec("wait_for_file", {"path": str(flag)})
    strict.upstream.script(
        SSEReply(chat_chunks(tool_calls=[call])), SSEReply(chat_chunks(text="done"))
    )
    comments = 0
    with strict.client() as client, client.stream("POST", path, json={**body, "stream": True}) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith(":"):
                comments += 1
                flag.touch()  # the tool is running and the client still hears from us: release it
    assert comments >= 1
    assert flag.exists()
    assert len(strict.upstream.requests) == 2  # the tool ran, then the model answered
