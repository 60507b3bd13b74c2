"""A `Transport` with no network: a function of ours answers every request.

`MockTransport(handler)` hands each `Request` to `handler` (sync or async),
which returns a `MockResponse`: a status, headers and a body given whole or
as chunks (a list, or an async iterator that can pace or fail). Pass it as
`HTTPOptions(transport=...)` to run a model client, or a whole `Relay`,
without a socket; `FakeModelServer` is the one to use when the bytes should
cross a real connection.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolrelay.adapters.http.seam import Request

__all__ = ["Headers", "MockResponse", "MockTransport"]


class Headers(Mapping[str, str]):
    """Headers looked up in any case, as a real answer's are."""

    def __init__(self, items: Mapping[str, str] | None = None) -> None:
        self._items = {k.lower(): v for k, v in (items or {}).items()}

    def __getitem__(self, key: str) -> str:
        return self._items[key.lower()]

    def __iter__(self) -> Any:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class MockResponse:
    """One answer (`adapters.http.seam.Response`); `closed` says whether it was closed."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | Iterable[bytes] | AsyncIterable[bytes] = b""
    reason: str = ""
    closed: bool = False

    def __post_init__(self) -> None:
        self.headers = Headers(self.headers)

    async def chunks(self) -> AsyncIterator[bytes]:
        body = self.body
        if isinstance(body, bytes):
            if body:
                yield body
            return
        if isinstance(body, AsyncIterable):
            async for chunk in body:
                yield chunk
            return
        for chunk in body:
            yield chunk

    async def aclose(self) -> None:
        self.closed = True
        close = getattr(self.body, "aclose", None)
        if close is not None:
            await close()


Handler = Callable[[Request], "MockResponse | Awaitable[MockResponse]"]


class MockTransport:
    """A `Transport` answering with `handler(request)`; `requests` lists what was sent."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Request] = []

    async def send(self, request: Request) -> MockResponse:
        self.requests.append(request)
        answer = self.handler(request)
        if inspect.isawaitable(answer):
            answer = await answer
        assert isinstance(answer, MockResponse)
        return answer

    async def aclose(self) -> None:
        return None
