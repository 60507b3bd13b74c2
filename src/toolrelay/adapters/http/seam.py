"""The one interface every HTTP client of ours talks through: a request in, an answer out.

Model clients, OpenAPI tool sources, pipeline outlets and (through
`adapters.http.bridge`) the MCP SDK send requests through a `Transport`: a
request goes in whole (method, URL, headers, body bytes); `send` returns once
the status line and headers are in, with the body as an async iterator of
bytes, read as it arrives. Timeouts beyond connecting (first byte, idle,
total) are the caller's (`adapters.models.watchdog` for model calls).

Rules:
1. `send` raises only `TransportError`s (or a cancel); a body's chunks raise
   only `BodyError`. The text of each is a sentence a user can read: it never
   holds the URL (behind a server the URL is internal).
2. `ConnectError`: nothing reached the server (refused, DNS, TLS, a connect
   timeout): safe to send again. `NoResponse`: the server hung up before a
   byte of answer, on a connection it had kept alive: it read nothing of the
   request (llama.cpp's server does this), so sending again is safe too.
3. A body read to its end gives its connection back for reuse; `aclose()`
   before that drops the connection. `aclose()` is idempotent.

`toolrelay.testing.MockTransport` is a `Transport` with no network, and the
default one is `adapters.http.aio.AiohttpTransport`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "BodyError",
    "ConnectError",
    "NoResponse",
    "Request",
    "Response",
    "Transport",
    "TransportError",
]


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request, body included (requests of ours are small JSON documents).

    `follow_redirects`: the transport follows them (a 303 or a 301/302 to a POST turns
    it into a GET, as browsers do); False hands the redirect back as the answer.
    """

    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    follow_redirects: bool = True


class Response(Protocol):
    """An answer whose status line and headers are in; the body is read through `chunks`."""

    @property
    def status(self) -> int: ...

    @property
    def reason(self) -> str: ...

    @property
    def headers(self) -> Mapping[str, str]:
        """Case-insensitive lookups; `items()` gives every header, repeated ones included."""
        ...

    def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (compression undone), once; `BodyError` if the
        connection fails before the body's end."""
        ...

    async def aclose(self) -> None: ...


class Transport(Protocol):
    """Sends requests (module doc); `aclose()` ends its connections."""

    async def send(self, request: Request) -> Response: ...

    async def aclose(self) -> None: ...


class TransportError(Exception):
    """A request that got no usable answer (rule 1)."""


class ConnectError(TransportError):
    """No connection to the server (rule 2): nothing was sent."""


class NoResponse(TransportError):
    """The server closed the connection before any byte of its answer (rule 2)."""


class BodyError(TransportError):
    """The connection failed while the body was being read."""
