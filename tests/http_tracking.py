"""A transport that counts response bodies still open, around the default one.

A body that is neither read to the end nor closed keeps its connection busy: the
tests use `open_bodies` to check that a client released every connection,
through the seam (`adapters.http.seam`), not the HTTP library's pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from toolrelay.adapters.http import AiohttpTransport, Request, Response


class _Tracked:
    """The inner answer, counted open until its first `aclose()`."""

    def __init__(self, inner: Response, owner: TrackingTransport) -> None:
        self._inner = inner
        self._owner = owner
        self._closed = False
        self.status = inner.status
        self.reason = inner.reason
        self.headers: Mapping[str, str] = inner.headers

    def chunks(self) -> AsyncIterator[bytes]:
        return self._inner.chunks()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._owner.open_bodies -= 1
        await self._inner.aclose()


class TrackingTransport:
    """The default transport, counting responses whose body is not closed yet."""

    def __init__(self) -> None:
        self._inner = AiohttpTransport()
        self.open_bodies = 0
        self.responses = 0

    async def send(self, request: Request) -> _Tracked:
        response = await self._inner.send(request)
        self.open_bodies += 1
        self.responses += 1
        return _Tracked(response, self)

    async def aclose(self) -> None:
        await self._inner.aclose()
