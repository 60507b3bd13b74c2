"""httpx2's transport interface over ours: the MCP SDK's requests through our transport.

The MCP SDK takes an `httpx2.AsyncClient`; `mcp_client` gives it one whose
transport is `SeamTransport`, which sends each request through a `Transport`
of ours (aiohttp's), so MCP traffic shares the process's one HTTP library,
TLS context and proxy configuration. It implements httpx2's public
`AsyncBaseTransport`: a request in, a response with a byte stream out, errors
as httpx2's exception types. Redirects are handed back (the SDK follows them
itself, within the server's origin); httpx2's `read` timeout bounds the wait
for the headers and for each chunk, the transport's own the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Final

import httpx2

from toolrelay.adapters.http.aio import AiohttpTransport
from toolrelay.adapters.http.seam import (
    BodyError,
    ConnectError,
    NoResponse,
    Request,
    Response,
    Transport,
    TransportError,
)

__all__ = ["SeamTransport", "mcp_client"]

MCP_TIMEOUT_S: Final = 30.0
MCP_READ_S: Final = 300.0
"""The SDK's own defaults: 30 s to connect, a stream may stay quiet for 5 minutes."""
_DROPPED: Final = frozenset({"content-encoding", "content-length", "transfer-encoding"})
"""Headers that no longer describe the body once the transport has decoded it."""


class SeamTransport(httpx2.AsyncBaseTransport):
    """httpx2's transport interface, sending through one of ours (module doc)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        read_s = _read_timeout(request)
        ours = Request(
            request.method, str(request.url), dict(request.headers), body, follow_redirects=False
        )
        try:
            async with asyncio.timeout(read_s):
                response = await self.transport.send(ours)
        except TimeoutError as exc:
            raise httpx2.ReadTimeout("no answer in time", request=request) from exc
        except TransportError as exc:
            raise _httpx_error(exc, request) from exc
        headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _DROPPED]
        return httpx2.Response(
            response.status,
            headers=headers,
            stream=_Body(response, read_s, request),
            extensions={"reason_phrase": response.reason.encode("latin-1", "replace")},
        )

    async def aclose(self) -> None:
        await self.transport.aclose()


class _Body(httpx2.AsyncByteStream):
    def __init__(self, response: Response, read_s: float | None, request: httpx2.Request) -> None:
        self.response = response
        self.read_s = read_s
        self.request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self.response.chunks()
        while True:
            try:
                async with asyncio.timeout(self.read_s):
                    chunk = await anext(chunks, None)
            except TimeoutError as exc:
                raise httpx2.ReadTimeout("no data in time", request=self.request) from exc
            except TransportError as exc:
                raise _httpx_error(exc, self.request) from exc
            if chunk is None:
                return
            yield chunk

    async def aclose(self) -> None:
        await self.response.aclose()


def _read_timeout(request: httpx2.Request) -> float | None:
    timeout = request.extensions.get("timeout")
    value = timeout.get("read") if isinstance(timeout, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _httpx_error(exc: TransportError, request: httpx2.Request) -> httpx2.TransportError:
    text = str(exc)
    if isinstance(exc, ConnectError):
        return httpx2.ConnectError(text, request=request)
    if isinstance(exc, NoResponse | BodyError):
        return httpx2.ReadError(text, request=request)
    return httpx2.RemoteProtocolError(text, request=request)


def mcp_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """The SDK's client factory (`McpHttpClientFactory`), on our transport."""
    timeout = timeout or httpx2.Timeout(MCP_TIMEOUT_S, read=MCP_READ_S)
    connect = timeout.connect if timeout.connect is not None else MCP_TIMEOUT_S
    transport = SeamTransport(AiohttpTransport(connect_timeout=connect))
    return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=transport)
