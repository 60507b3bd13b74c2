"""`Sender`: a request sent past httpx's client layers is the request httpx would send,
and whatever needs those layers (credentials, cookies, redirects, the log line) gets them."""

from __future__ import annotations

import logging

import httpx
import pytest

from toolrelay.adapters.models.direct import Sender, header_values

HEADERS = {"content-type": "application/json", "accept": "text/event-stream", "x-key": "k"}
BODY = b'{"model":"m"}'


def _client(handler: httpx.MockTransport, **kwargs: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=handler,
        timeout=httpx.Timeout(connect=3.0, read=None, write=None, pool=3.0),
        follow_redirects=True,
        **kwargs,  # type: ignore[arg-type]
    )


class Recorder:
    """A mock upstream that keeps every request it got."""

    def __init__(self, reply: httpx.Response | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.replies: list[httpx.Response] = []
        self.transport = httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.replies:
            return self.replies.pop(0)
        return httpx.Response(200, content=b"data: {}\n\n")


def _wire(request: httpx.Request) -> list[tuple[str, str]]:
    return sorted((k.lower(), v) for k, v in request.headers.multi_items())


@pytest.mark.anyio
@pytest.mark.parametrize("url", ["http://fake/v1/chat/completions", "http://fake:8123/v1/x"])
async def test_the_request_is_the_one_httpx_would_send(url: str) -> None:
    upstream = Recorder()
    client = _client(upstream.transport)
    sender = Sender(client)
    for _ in range(2):  # the second one from the cached template
        response = await sender.post(url, BODY, HEADERS, stream=True)
        assert await response.aread() == b"data: {}\n\n"
        await response.aclose()
    expected = client.build_request("POST", url, content=BODY, headers=HEADERS)
    for sent in upstream.requests:
        assert sent.method == "POST"
        assert sent.url == expected.url
        assert sent.content == BODY
        assert _wire(sent) == _wire(expected)
        assert sent.extensions["timeout"] == expected.extensions["timeout"]
    await client.aclose()


@pytest.mark.anyio
async def test_credentials_in_the_url_become_basic_auth_as_in_httpx() -> None:
    upstream = Recorder()
    client = _client(upstream.transport)
    response = await Sender(client).post("http://u:p@fake/v1/x", BODY, HEADERS, stream=True)
    await response.aclose()
    assert upstream.requests[0].headers["authorization"] == httpx.BasicAuth("u", "p")._auth_header
    await client.aclose()


@pytest.mark.anyio
async def test_cookies_a_server_sets_are_sent_back() -> None:
    upstream = Recorder()
    upstream.replies.append(httpx.Response(200, headers={"set-cookie": "lb=node7; Path=/"}))
    client = _client(upstream.transport)
    sender = Sender(client)
    for _ in range(2):
        await (await sender.post("http://fake/v1/x", BODY, HEADERS, stream=True)).aclose()
    assert "cookie" not in upstream.requests[0].headers
    assert upstream.requests[1].headers["cookie"] == "lb=node7"
    await client.aclose()


@pytest.mark.anyio
async def test_a_redirect_is_followed_and_that_url_then_goes_through_httpx() -> None:
    upstream = Recorder()
    moved = {"location": "http://fake/v2/x"}
    upstream.replies += [httpx.Response(307, headers=moved), httpx.Response(307, headers=moved)]
    client = _client(upstream.transport)
    sender = Sender(client)
    first = await sender.post("http://fake/v1/x", BODY, HEADERS, stream=True)
    assert first.status_code == 200
    assert str(first.request.url) == "http://fake/v2/x"
    await first.aclose()
    # sent once straight, redirected, sent again through httpx (which followed)
    assert [str(r.url) for r in upstream.requests] == [
        "http://fake/v1/x",
        "http://fake/v1/x",
        "http://fake/v2/x",
    ]
    upstream.requests.clear()
    upstream.replies.append(httpx.Response(307, headers=moved))
    await (await sender.post("http://fake/v1/x", BODY, HEADERS, stream=True)).aclose()
    assert [str(r.url) for r in upstream.requests] == ["http://fake/v1/x", "http://fake/v2/x"]
    await client.aclose()


@pytest.mark.anyio
async def test_httpx_request_log_line_is_kept(caplog: pytest.LogCaptureFixture) -> None:
    upstream = Recorder()
    client = _client(upstream.transport)
    with caplog.at_level(logging.INFO, logger="httpx"):
        response = await Sender(client).post("http://fake/v1/x", BODY, HEADERS, stream=True)
    await response.aclose()
    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert lines == ['HTTP Request: POST http://fake/v1/x "HTTP/1.1 200 OK"']
    await client.aclose()


def test_header_values_are_what_headers_get_gives() -> None:
    headers = httpx.Headers(
        [("Content-Type", "text/event-stream"), ("Set-Cookie", "a=1"), ("set-cookie", "b=2")]
    )
    names = (b"content-type", b"set-cookie", b"content-encoding")
    got = header_values(headers, *names)
    assert got == [headers.get(name.decode()) for name in names]
    assert got == ["text/event-stream", "a=1, b=2", None]
