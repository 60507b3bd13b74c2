"""The proxy from the environment, for every request of the process: `HTTPS_PROXY` tunnels
TLS through CONNECT, `HTTP_PROXY` takes plain requests, `NO_PROXY` goes around both.

A real proxy on a socket, made here: it records each request line, tunnels CONNECT to the
target, and answers a plain request itself (so seeing the answer proves the proxy carried
it). And the connect timeout, at the TLS handshake of a server that never speaks.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.adapters.models.test_tls import ANSWER, REQUEST, _certificates
from tests.patience import HANG
from toolrelay.adapters.http import tls_context
from toolrelay.adapters.http.env_proxy import EnvProxies, ProxyRoute
from toolrelay.adapters.models import OpenAIChat, Retry, Timeouts
from toolrelay.adapters.models.http import HTTPOptions
from toolrelay.errors import ProviderError

pytestmark = pytest.mark.anyio

PROXIED = b'data: {"via":"proxy"}\n\ndata: [DONE]\n\n'
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY")


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


def _sse(body: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    return head + b"content-length: %d\r\n\r\n" % len(body) + body


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))
    return head


class Seen(list[bytes]):
    """The request lines a proxy saw; `heads`: the whole heads."""

    heads: list[bytes]


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[str, Seen]]:
    """(proxy URL, the request lines it saw)."""
    seen = Seen()
    seen.heads = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await _read_request(reader)
            line = head.split(b"\r\n", 1)[0]
            seen.append(line)
            seen.heads.append(head)
            if line.startswith(b"CONNECT "):
                host, port = line.split()[1].decode().rsplit(":", 1)
                up_reader, up_writer = await asyncio.open_connection(host, int(port))
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            else:
                writer.write(_sse(PROXIED))
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", seen


@pytest.fixture
async def tls_upstream(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    ca, cert, key = _certificates(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _read_request(reader)
            writer.write(_sse(ANSWER))
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    async with server:
        yield f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}", ca


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    tls_context.cache_clear()
    yield monkeypatch
    tls_context.cache_clear()


async def call(base: str) -> bytes:
    client = OpenAIChat(base_url=base, model="m", http=HTTPOptions(retry=Retry(attempts=1)))
    try:
        async with asyncio.timeout(HANG):
            stream = await client.open(REQUEST)
            return b"".join([chunk async for chunk in stream])
    finally:
        await client.aclose()


@pytest.mark.parametrize("credentials", ["", "ann:pw@"])
async def test_https_proxy_tunnels_tls_with_connect(
    proxy: tuple[str, Seen],
    tls_upstream: tuple[str, Path],
    clean_env: pytest.MonkeyPatch,
    credentials: str,
) -> None:
    """With credentials in the proxy's URL, they go on the CONNECT (`env_proxy` rule 3)."""
    (proxy_url, seen), (base, ca) = proxy, tls_upstream
    clean_env.setenv("SSL_CERT_FILE", str(ca))
    clean_env.setenv("HTTPS_PROXY", proxy_url.replace("http://", f"http://{credentials}"))
    assert await call(base) == ANSWER  # verified end to end, through the tunnel
    assert seen == [f"CONNECT {base.removeprefix('https://')} HTTP/1.1".encode()]
    (head,) = seen.heads
    said = [line for line in head.decode().split("\r\n") if line.startswith("Proxy-Auth")]
    expected = base64.b64encode(credentials.removesuffix("@").encode()).decode()
    assert said == ([f"Proxy-Authorization: Basic {expected}"] if credentials else [])


async def test_http_proxy_carries_plain_requests(
    proxy: tuple[str, Seen], clean_env: pytest.MonkeyPatch
) -> None:
    proxy_url, seen = proxy
    clean_env.setenv("HTTP_PROXY", proxy_url)
    assert await call("http://model.invalid:8000") == PROXIED
    assert seen == [b"POST http://model.invalid:8000/v1/chat/completions HTTP/1.1"]


async def test_no_proxy_goes_around_it(
    proxy: tuple[str, Seen],
    tls_upstream: tuple[str, Path],
    clean_env: pytest.MonkeyPatch,
) -> None:
    (proxy_url, seen), (base, ca) = proxy, tls_upstream
    clean_env.setenv("SSL_CERT_FILE", str(ca))
    clean_env.setenv("HTTPS_PROXY", proxy_url)
    clean_env.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert await call(base) == ANSWER
    assert seen == []


async def test_a_tls_handshake_that_never_ends_is_a_connect_timeout() -> None:
    """A server that accepts the connection and never says a word: `connect` ends it."""
    held: list[asyncio.StreamWriter] = []

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # never answers the ClientHello

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    base = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    http = HTTPOptions(retry=Retry(attempts=1), timeouts=Timeouts(connect=0.3))
    client = OpenAIChat(base_url=base, model="m", http=http)
    try:
        with pytest.raises(ProviderError) as info:
            async with asyncio.timeout(HANG):
                await client.open(REQUEST)
    finally:
        await client.aclose()
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
    assert info.value.message == "Cannot connect to the model server: no connection within 0.3 s"


async def test_credentials_in_the_proxy_url_go_as_a_header(clean_env: pytest.MonkeyPatch) -> None:
    """Rule 3 of `adapters.http.env_proxy`: `user:pass@` becomes `Proxy-Authorization`."""
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            heads.append(await _read_request(reader))
            writer.write(_sse(PROXIED))
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        clean_env.setenv("HTTP_PROXY", f"http://ann:s%40cret@127.0.0.1:{port}")
        assert await call("http://model.invalid:8000") == PROXIED
    (head,) = heads
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST http://model.invalid:8000/v1/chat/completions HTTP/1.1"
    assert f"Proxy-Authorization: Basic {base64.b64encode(b'ann:s@cret').decode()}" in lines


def test_the_proxy_is_chosen_per_scheme_and_host(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HTTPS_PROXY", "proxy.internal:3128")
    clean_env.setenv("NO_PROXY", ".example.com,localhost")
    proxies = EnvProxies()
    assert proxies.for_url("https://api.openai.com/v1") == ProxyRoute("http://proxy.internal:3128")
    assert proxies.for_url("http://api.openai.com/v1") is None  # no HTTP_PROXY
    assert proxies.for_url("https://api.example.com/v1") is None  # a subdomain of NO_PROXY's
    assert proxies.for_url("https://localhost:8443/v1") is None  # with its port
    clean_env.setenv("NO_PROXY", "*")
    assert EnvProxies().for_url("https://api.openai.com/v1") is None


def test_a_proxy_that_is_not_plain_http_is_ignored_and_said(
    clean_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clean_env.setenv("HTTPS_PROXY", "https://proxy.internal:3128")
    with caplog.at_level("WARNING", logger="toolrelay.adapters.http.env_proxy"):
        assert EnvProxies().for_url("https://api.openai.com/v1") is None
    assert "only http:// proxies work" in caplog.text


async def test_the_environment_is_read_when_a_client_starts(
    proxy: tuple[str, Seen], clean_env: pytest.MonkeyPatch
) -> None:
    """A proxy set later reaches the clients made later, not a running session's requests;
    aiohttp's own per-request reading of the environment (`trust_env`) is off."""
    proxy_url, seen = proxy
    client = OpenAIChat(
        base_url="http://model.invalid:8000", model="m", http=HTTPOptions(retry=Retry(attempts=1))
    )
    try:
        with pytest.raises(ProviderError):  # direct: the host does not resolve
            async with asyncio.timeout(HANG):
                await client.open(REQUEST)
        clean_env.setenv("HTTP_PROXY", proxy_url)
        with pytest.raises(ProviderError):
            async with asyncio.timeout(HANG):
                await client.open(REQUEST)
    finally:
        await client.aclose()
    assert seen == []
    assert await call("http://model.invalid:8000") == PROXIED  # a new client reads it
    assert len(seen) == 1
