"""The `Transport` every HTTP client of ours uses by default, on aiohttp's public API.

Why aiohttp (docs/performance.md has the figures): its C HTTP parser and
stream reader cost about a third of httpx2's CPU per streamed answer, and its
connection pool hands a freed connection to one waiting request, so a burst
of a thousand streams does not queue behind a walk over the pool.

Owns one `aiohttp.ClientSession` per transport, made on first use in the
running loop (a transport used from a new loop gets a new session), and
turning aiohttp's errors into the seam's (`adapters.http.seam`, rule 1).
Every session verifies TLS with the one process-wide context (`tls_context`)
and takes its proxy from the environment (`HTTPS_PROXY`, `HTTP_PROXY`,
`NO_PROXY`, as `urllib` reads them), read when the session is made
(`adapters.http.env_proxy`, not aiohttp's `trust_env`, which reads them again
in a thread for every request), so one TLS and proxy configuration serves the
process.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Final

import aiohttp

from toolrelay.adapters.http.env_proxy import EnvProxies
from toolrelay.adapters.http.seam import (
    BodyError,
    ConnectError,
    NoResponse,
    Request,
    TransportError,
)

__all__ = [
    "CONNECT_TIMEOUT_S",
    "KEEPALIVE_S",
    "MAX_CONNECTIONS",
    "AiohttpTransport",
    "tls_context",
]

MAX_CONNECTIONS: Final = 4096
"""Connections a transport opens at once, idle ones included: one per chat being answered
(requests past it wait for a free one, within the connect timeout)."""
KEEPALIVE_S: Final = 30.0
"""How long an idle connection is kept for the next request (servers close theirs after
5 s to minutes; one closed under a request is `NoResponse`, sent again)."""
CONNECT_TIMEOUT_S: Final = 10.0


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context every connection verifies with: the system's CA store, or the
    file and folder `SSL_CERT_FILE` / `SSL_CERT_DIR` name (OpenSSL reads them). Made once:
    loading a CA bundle costs tens of milliseconds of CPU with the loop stopped."""
    return ssl.create_default_context()


class AiohttpTransport:
    """A `Transport` on one aiohttp session (module doc)."""

    def __init__(
        self,
        *,
        connect_timeout: float | None = CONNECT_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
        keepalive_s: float = KEEPALIVE_S,
    ) -> None:
        """`connect_timeout` covers waiting for a free connection, the proxy and the TLS
        handshake (None: no bound)."""
        self.connect_timeout = connect_timeout
        self.max_connections = max_connections
        self.keepalive_s = keepalive_s
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._proxies: EnvProxies  # made with each session (`_current`)

    def _current(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._session
        if session is not None and self._loop is loop and not session.closed:
            return session
        if session is not None:
            self._abandon(session)
        connector = aiohttp.TCPConnector(
            limit=self.max_connections,
            limit_per_host=0,
            keepalive_timeout=self.keepalive_s,
            ssl=tls_context(),
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None, connect=self.connect_timeout),
        )
        self._proxies = EnvProxies()  # the environment as it is now, for this session
        self._loop = loop
        return self._session

    def _abandon(self, session: aiohttp.ClientSession) -> None:
        """A session of a loop that is gone: its sockets are closed, the session let go."""
        connector = session.connector
        session.detach()
        if connector is not None:
            with contextlib.suppress(Exception):  # its loop may be closed already
                connector.close()

    async def send(self, request: Request) -> AiohttpResponse:
        session = self._current()
        headers, proxy_url, proxy_headers = request.headers, None, None
        proxy = self._proxies.for_url(request.url)
        if proxy is not None:
            proxy_url = proxy.url
            headers, proxy_headers = proxy.headers(request.url, headers)
        try:
            response = await session.request(
                request.method,
                request.url,
                headers=headers,
                data=request.body or None,
                allow_redirects=request.follow_redirects,
                proxy=proxy_url,
                proxy_headers=proxy_headers,
            )
        except aiohttp.ClientError as exc:
            raise renamed(exc, self.connect_timeout) from exc
        return AiohttpResponse(response)

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        if self._loop is asyncio.get_running_loop():
            await session.close()
        else:
            self._abandon(session)


class AiohttpResponse:
    """One answer (`seam.Response`); its body is aiohttp's stream, read as it comes."""

    __slots__ = ("headers", "reason", "response", "status")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.status: int = response.status
        self.reason: str = response.reason or ""
        self.headers: Mapping[str, str] = response.headers

    async def chunks(self) -> AsyncIterator[bytes]:
        read = self.response.content.readany  # what has come since the last read, joined
        try:
            while chunk := await read():
                yield chunk
        except aiohttp.ClientError as exc:
            raise _body_error(exc) from exc

    async def aclose(self) -> None:
        response = self.response
        if response.connection is None:  # read to its end (given back) or closed already
            response.close()
            return
        response.close()  # mid-body: the connection cannot be reused, it is dropped
        await asyncio.sleep(0)  # asyncio closes the socket on the loop's next turn: now


def _body_error(exc: aiohttp.ClientError) -> BodyError:
    if isinstance(exc, aiohttp.ClientPayloadError):
        detail = _one_line(getattr(exc.__cause__, "message", None) or str(exc))
        if detail.startswith("Not enough data"):  # the connection closed mid-body
            return BodyError("the server closed the connection before the body's end")
        return BodyError(f"bad body: {detail}")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return BodyError("the server closed the connection before the body's end")
    return BodyError(_os_text(exc) or type(exc).__name__)


def _one_line(text: str) -> str:
    """aiohttp's parser errors quote the bad bytes on a line of their own and point at
    them with a caret below: one line, the caret left out."""
    lines = (line.strip() for line in str(text).splitlines())
    return " ".join(line for line in lines if line and line.strip("^ "))


def renamed(exc: aiohttp.ClientError, connect_timeout: float | None) -> TransportError:
    """aiohttp's error as the seam's, in words without the URL (seam rule 1)."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return ConnectError(f"no connection within {connect_timeout:g} s")
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        error = exc.certificate_error
        return ConnectError(f"TLS: {getattr(error, 'verify_message', None) or error}")
    if isinstance(exc, aiohttp.ClientConnectorSSLError):
        return ConnectError(f"TLS: {getattr(exc.os_error, 'reason', None) or exc.os_error}")
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return ConnectError(f"cannot resolve the host name ({_os_text(exc.os_error)})")
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        return ConnectError(f"cannot connect to the proxy ({_os_text(exc.os_error)})")
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return ConnectError(f"the proxy answered {exc.status} {exc.message}")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ConnectError(_os_text(exc.os_error) or "connection failed")
    hung_up = _hung_up(exc)
    if hung_up is not None:
        return hung_up
    if isinstance(exc, aiohttp.TooManyRedirects):
        return TransportError("too many redirects")
    if isinstance(exc, aiohttp.ClientResponseError):
        return TransportError(f"bad answer: {_one_line(exc.message)}")
    if isinstance(exc, aiohttp.InvalidURL):
        return TransportError("invalid URL")
    return TransportError(_os_text(exc) or type(exc).__name__)


def _hung_up(exc: aiohttp.ClientError) -> NoResponse | None:
    """A kept-alive connection the server closed, met before any answer (seam rule 2)."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return NoResponse("the server closed the connection without answering")
    if isinstance(exc, aiohttp.ClientOSError) and isinstance(
        exc.__cause__, aiohttp.ClientConnectionResetError
    ):  # handed out while its close was being processed: nothing was sent on it
        return NoResponse("the server closed the connection before the request was sent")
    return None


def _os_text(exc: BaseException) -> str:
    """An OS error in words, without the address asyncio puts in its message ("" if it is
    not one: the caller names it)."""
    if not isinstance(exc, OSError):
        return ""
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or exc}"
    if isinstance(exc, socket.gaierror):
        return exc.strerror or "unknown host"
    if exc.errno is not None:
        return os.strerror(exc.errno)
    return "connection failed"
