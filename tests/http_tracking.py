"""An httpx transport that counts response bodies still open, through httpx's public API.

A body that is neither read to the end nor closed keeps its connection busy: the
tests use `open_bodies` to check that a client released every connection,
without reaching into httpx's private pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx


class _TrackedBody(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, owner: TrackingTransport) -> None:
        self._inner = inner
        self._owner = owner
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._owner.open_bodies -= 1
        await self._inner.aclose()


class TrackingTransport(httpx.AsyncBaseTransport):
    """The default transport, counting responses whose body is not closed yet."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.open_bodies = 0
        self.responses = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        self.open_bodies += 1
        self.responses += 1
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_TrackedBody(response.stream, self),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()
