"""httpx2's transport interface over ours (`adapters.http.bridge`): what the MCP SDK's client
sends reaches our transport as it was sent, and what comes back reads as httpx2 would give
it: status, headers, body, redirects handed back, errors and timeouts as httpx2's types."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx2
import pytest

from tests.patience import HANG
from toolrelay.adapters.http import AiohttpTransport, BodyError, ConnectError, Request, bridge
from toolrelay.adapters.http.aio import AiohttpResponse
from toolrelay.adapters.http.bridge import SeamTransport
from toolrelay.testing import FakeModelServer, JSONReply, MockResponse, MockTransport

pytestmark = pytest.mark.anyio


def client_on(transport: MockTransport, **timeouts: float) -> httpx2.AsyncClient:
    timeout = httpx2.Timeout(HANG, **timeouts)
    return httpx2.AsyncClient(transport=SeamTransport(transport), timeout=timeout)


async def test_a_request_and_its_answer_go_through_unchanged() -> None:
    def handler(request: Request) -> MockResponse:
        headers = {"content-type": "application/json", "x-session": "abc"}
        return MockResponse(201, headers, [b'{"ok":', b"true}"], reason="Created")

    transport = MockTransport(handler)
    async with client_on(transport) as client:
        response = await client.post(
            "http://mcp.local/mcp?x=1", json={"a": 1}, headers={"x-k": "v"}
        )
    assert (response.status_code, response.reason_phrase) == (201, "Created")
    assert response.json() == {"ok": True}
    assert response.headers["x-session"] == "abc"
    [sent] = transport.requests
    assert (sent.method, sent.url, sent.body) == ("POST", "http://mcp.local/mcp?x=1", b'{"a":1}')
    assert sent.headers["x-k"] == "v"
    assert sent.follow_redirects is False  # the SDK follows them itself, within the origin


async def test_headers_of_an_encoding_the_transport_undid_are_dropped() -> None:
    """Our transport hands over the body decoded: httpx2 must not decode it again."""
    headers = {"content-encoding": "gzip", "content-length": "999", "content-type": "text/plain"}
    transport = MockTransport(lambda request: MockResponse(200, headers, b"plain text"))
    async with client_on(transport) as client:
        response = await client.get("http://mcp.local/")
    assert response.text == "plain text"
    assert "content-encoding" not in response.headers


async def test_a_redirect_is_handed_back() -> None:
    transport = MockTransport(lambda request: MockResponse(307, {"location": "http://elsewhere/"}))
    async with client_on(transport) as client:
        response = await client.post("http://mcp.local/mcp", content=b"{}")
    assert response.status_code == 307
    assert len(transport.requests) == 1


async def test_errors_are_httpx2_types() -> None:
    async def refused(request: Request) -> MockResponse:
        raise ConnectError("Connection refused")

    async with client_on(MockTransport(refused)) as client:
        with pytest.raises(httpx2.ConnectError, match="Connection refused"):
            await client.get("http://mcp.local/")

    async def cut() -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"
        raise BodyError("the server closed the connection before the body's end")

    transport = MockTransport(lambda request: MockResponse(200, {}, cut()))
    async with client_on(transport) as client:
        with pytest.raises(httpx2.ReadError, match="before the body's end"):
            await client.get("http://mcp.local/")


async def test_the_read_timeout_bounds_the_headers_and_each_chunk() -> None:
    async def silent(request: Request) -> MockResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async with client_on(MockTransport(silent), read=0.1) as client:
        with pytest.raises(httpx2.ReadTimeout):
            await client.get("http://mcp.local/")

    async def stalls() -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"
        await asyncio.Event().wait()

    transport = MockTransport(lambda request: MockResponse(200, {}, stalls()))
    async with (
        client_on(transport, read=0.1) as client,
        client.stream("GET", "http://mcp.local/") as response,
    ):
        chunks = response.aiter_raw()
        assert await anext(chunks) == b"data: 1\n\n"
        with pytest.raises(httpx2.ReadTimeout):
            await anext(chunks)


async def test_the_sdks_client_goes_through_our_transport_over_a_real_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[Request] = []

    class Recording(AiohttpTransport):
        async def send(self, request: Request) -> AiohttpResponse:
            sent.append(request)
            return await super().send(request)

    monkeypatch.setattr(bridge, "AiohttpTransport", Recording)
    with FakeModelServer() as server:
        server.script(JSONReply({"jsonrpc": "2.0", "id": 1, "result": {}}))
        url = server.base_url + "/mcp"
        async with bridge.mcp_client(headers={"authorization": "Bearer t"}) as client:
            response = await client.post(url, json={"jsonrpc": "2.0"})
        assert response.json()["result"] == {}
        assert server.requests[0].headers["authorization"] == "Bearer t"
    assert [r.url for r in sent] == [url]
