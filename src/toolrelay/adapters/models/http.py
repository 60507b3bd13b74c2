"""The HTTP plumbing every model client shares: one pooled client, timeouts, retries, errors.

This module owns getting a model server's response body to the engine as raw
bytes, and turning every way that can fail into a `ProviderError` with a
sentence a user can act on. It does not build request bodies (the API modules
do) and it does not parse response bodies (`core.body.BodyReader` does),
except to pull the message out of an HTTP error body.

Rules:
1. A few small httpx pools per model client (`Upstream.client`), made on
   first use, so connections are reused across turns and iterations and
   starting a request stays cheap with thousands open; `aclose()` ends them.
   A request goes straight to the transport httpx would use, past the
   client's per-request layers (`adapters.models.direct`).
2. `open` returns only once the first body chunk has arrived. Until then a
   failure may be retried (connect errors, 429, 500/502/503/504, with
   exponential backoff + jitter, or the server's `Retry-After`; a hang-up
   with no byte of answer, at once); once a byte has been handed out nothing
   is ever retried.
3. Timeouts: `connect` is httpx's; `first_byte` covers status line, headers
   and the first chunk; `idle` is the longest gap between chunks; `total`
   bounds everything, retries included. One timer per model call watches
   them all (`adapters.models.watchdog`), handed from the request to the
   body (`adapters.models.body`), so a stalled server cannot hold a turn forever.
4. A stream that ends, fails or is closed releases its connection at once
   (back to the pool if the body was read to the end, dropped otherwise).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Final

import httpx
import orjson

from toolrelay.adapters.models.body import UpstreamBody
from toolrelay.adapters.models.direct import Sender, header_values
from toolrelay.adapters.models.errors import describe, error_from_response
from toolrelay.adapters.models.pool import make_fair
from toolrelay.adapters.models.watchdog import DEFAULT_TIMEOUTS, Timeouts, Watchdog
from toolrelay.core.formats.content import detect_format
from toolrelay.engine.interfaces import ModelRequest
from toolrelay.errors import ProviderError

__all__ = [
    "DEFAULT_RETRY",
    "DEFAULT_TIMEOUTS",
    "APIClient",
    "HTTPOptions",
    "Retry",
    "Timeouts",
    "Upstream",
    "UpstreamBody",
    "bearer",
    "error_from_response",
    "parse_retry_after",
    "retry_delay",
    "v1_url",
]

log = logging.getLogger(__name__)
RETRY_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
_ERROR_BODY_LIMIT: Final = 65536


@dataclass(frozen=True, slots=True)
class Retry:
    """`attempts` counts every try, the first included (1 = never retry)."""

    attempts: int = 3
    backoff: float = 0.5
    max_backoff: float = 20.0
    jitter: float = 0.25


DEFAULT_RETRY: Final = Retry()


@dataclass(frozen=True, slots=True)
class HTTPOptions:
    """How a model client talks HTTP, the same for every API: one value, not eight arguments.

    `headers` go on every request (after the client's `Authorization`, so they
    win); `transport` replaces httpx's (tests count open bodies with one).
    """

    headers: Mapping[str, str] = field(default_factory=dict)
    timeouts: Timeouts = DEFAULT_TIMEOUTS
    retry: Retry = DEFAULT_RETRY
    transport: httpx.AsyncBaseTransport | None = None


DEFAULT_HTTP: Final = HTTPOptions()


def v1_url(base_url: str, path: str) -> str:
    """`http://h:8000` and `http://h:8000/v1` (trailing slash or not) both give `…/v1/<path>`."""
    root = base_url.rstrip("/")
    if not root.endswith("/v1"):
        root += "/v1"
    return f"{root}/{path.lstrip('/')}"


def bearer(api_key: str | None) -> dict[str, str]:
    """`Authorization: Bearer` when a key is given (`HTTPOptions.headers` may override it)."""
    return {"authorization": f"Bearer {api_key}"} if api_key else {}


def _json_default(obj: object) -> object:
    """Callers may hand in any Mapping/Sequence (frozen specs, tuples); the wire wants JSON."""
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, tuple | list | set | frozenset):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, or `Retry-After` seconds/date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def retry_delay(
    retry: Retry,
    attempt: int,
    retry_after: float | None = None,
    *,
    rand: Callable[[], float] = random.random,
) -> float:
    """Wait before try number `attempt + 1` (attempt counts from 1).

    The server's `Retry-After` wins but is capped at twice `max_backoff`, so a
    server cannot park a turn for an hour; otherwise the backoff doubles per
    try up to `max_backoff`, spread by ±`jitter` so clients do not stampede.
    """
    if retry_after is not None:
        return min(retry_after, retry.max_backoff * 2)
    base = min(retry.max_backoff, retry.backoff * 2.0 ** (attempt - 1))
    return max(0.0, base * (1 + retry.jitter * (2 * rand() - 1)))


_NO_RESPONSE: Final = "Server disconnected without sending a response."
"""httpcore's words for a connection closed before any byte of the answer."""


@dataclass(frozen=True, slots=True)
class _Retryable:
    """A failed try that may be tried again."""

    error: ProviderError
    retry_after: float | None = None


MAX_CONNECTIONS: Final = 4096
"""Concurrent upstream responses per client: one per chat being answered."""
POOLS: Final = 128
"""httpx pools the client's connections split over, at most (see `Upstream.client`)."""
PER_POOL: Final = 8
"""Requests a pool carries at once before the next pool takes new ones."""
KEEPALIVE: Final = 8
"""Idle connections each pool keeps for the next chats (a burst's worth across pools)."""
KEEPALIVE_S: Final = 30.0
"""How long an idle upstream connection is kept (servers close theirs after 5 s to minutes;
httpx notices a closed one before reusing it)."""


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context every upstream pool verifies with (httpx's default: certifi's CA
    bundle, or `SSL_CERT_FILE`/`SSL_CERT_DIR`). Each pool made its own on its first request,
    reading the bundle: about 40 ms of CPU with the loop stopped, times `POOLS` per model
    server, taken out of the first chats' time to first token."""
    return httpx.create_ssl_context()


class Upstream:
    """The connection to one model server: POSTs JSON, hands back `UpstreamBody`s (module doc)."""

    def __init__(self, options: HTTPOptions, *, auth: Mapping[str, str] | None = None) -> None:
        self.headers = {**(auth or {}), **options.headers}
        self.timeouts = options.timeouts
        self.retry = options.retry
        self._transport = options.transport
        self._clients: list[Sender] = []
        self._next = 0
        self._headers_by_stream = {flag: self._make_headers(flag) for flag in (True, False)}

    @property
    def client(self) -> Sender:
        """The first httpx client carrying fewer than `PER_POOL` requests (made on first use,
        up to `POOLS`; then the least busy).

        httpx's pool walks all its connections, and for each idle one all of them
        again, every time a request starts or ends: with a thousand streams open,
        starting one cost milliseconds, and with a thousand idle connections kept
        from the last burst, the next burst's first tokens took seconds (measured:
        p50 3.3 s on a warm pool against 0.9 s on a cold one, 38 % of the CPU in that
        walk). Pools of at most `PER_POOL` requests and `KEEPALIVE` idle connections
        keep the walk short. Filling the first pools first keeps a quiet server's
        requests on one pool, so they reuse its connection (taken in turn, they were
        spread over all pools, each idle past its keep-alive by its next request).
        httpx's default limits (100 connections, 20 kept for 5 s) would queue a busy
        server's streams and reconnect most. A transport given in the options
        (tests) gets one client.
        """
        clients = self._clients
        for sender in clients:
            if sender.open < PER_POOL:
                return sender
        if len(clients) < (1 if self._transport is not None else POOLS):
            clients.append(Sender(self._new_client()))
            return clients[-1]
        return min(clients, key=lambda sender: sender.open)

    def _new_client(self) -> httpx.AsyncClient:
        t = self.timeouts
        client = httpx.AsyncClient(
            transport=self._transport,
            verify=tls_context(),
            timeout=httpx.Timeout(connect=t.connect, read=None, write=None, pool=t.connect),
            limits=httpx.Limits(
                max_connections=MAX_CONNECTIONS // POOLS,
                max_keepalive_connections=KEEPALIVE,
                keepalive_expiry=KEEPALIVE_S,
            ),
            follow_redirects=True,
        )
        make_fair(client)  # one idle connection per request at a time (pool.py)
        return client

    async def aclose(self) -> None:
        clients, self._clients = self._clients, []
        for client in clients:
            await client.aclose()

    async def post(self, url: str, payload: Mapping[str, Any], *, stream: bool) -> UpstreamBody:
        """Send until a first body byte arrives or the failure is final (rule 2)."""
        loop = asyncio.get_running_loop()
        watch = Watchdog(loop, self.timeouts)
        # a copy of the exact size: orjson's own result reserves 4 KiB, and the request
        # (with its body) lives as long as the stream does
        body = bytes(memoryview(orjson.dumps(payload, default=_json_default)))
        attempt = 0
        try:
            while True:
                attempt += 1
                outcome = await self._attempt(url, body, stream=stream, watch=watch)
                if isinstance(outcome, UpstreamBody):
                    return outcome
                if attempt >= self.retry.attempts:
                    raise outcome.error
                delay = retry_delay(self.retry, attempt, outcome.retry_after)
                at = watch.total_at
                if at is not None and loop.time() + delay >= at:
                    raise outcome.error
                await asyncio.sleep(delay)
        except BaseException:
            watch.close()
            raise

    async def _attempt(
        self, url: str, body: bytes, *, stream: bool, watch: Watchdog
    ) -> UpstreamBody | _Retryable:
        sender = self.client
        done = sender.counted()  # the request is the pool's until its body is released
        try:
            outcome = await self._attempt_on(sender, done, url, body, stream=stream, watch=watch)
        except BaseException:
            done()
            raise
        if not isinstance(outcome, UpstreamBody):
            done()
        return outcome

    async def _attempt_on(
        self,
        sender: Sender,
        done: Callable[[], None],
        url: str,
        body: bytes,
        *,
        stream: bool,
        watch: Watchdog,
    ) -> UpstreamBody | _Retryable:
        watch.opening()
        try:
            response = await sender.post(url, body, self._headers_by_stream[stream], stream=stream)
        except asyncio.CancelledError:
            expired = watch.timed_out()
            if expired is None:
                raise
            raise expired from None
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            watch.settled()
            # the URL goes to the log only: behind a server it is internal, not for API users
            log.warning("cannot connect to the model server at %s: %s", url, describe(exc))
            return _Retryable(ProviderError(f"Cannot connect to the model server: {describe(exc)}"))
        except httpx.RemoteProtocolError as exc:
            if str(exc) != _NO_RESPONSE:
                raise ProviderError(f"Model server request failed: {describe(exc)}") from exc
            # a kept-alive connection the server closed as it was reused (llama.cpp's server
            # closes one after each streamed answer, a millisecond later): nothing was
            # answered, so the request goes again at once, on a new connection
            watch.settled()
            log.info("the model server closed a reused connection unanswered; sending again")
            error = ProviderError(f"Model server request failed: {describe(exc)}")
            return _Retryable(error, retry_after=0.0)
        except httpx.TransportError as exc:
            raise ProviderError(f"Model server request failed: {describe(exc)}") from exc
        try:
            if watch.expiring:  # the deadline passed, and the transport swallowed the cancel
                expired = watch.expired
                watch.settled()
                raise expired or watch.error(False)
            if not response.is_success:
                watch.settled()
                return await self._failure(response, watch)
            return await self._first_chunk(response, watch, done)
        except BaseException:
            await response.aclose()
            raise

    async def _first_chunk(
        self, response: httpx.Response, watch: Watchdog, done: Callable[[], None]
    ) -> UpstreamBody:
        encoding, content_type = header_values(
            response.headers, b"content-encoding", b"content-type"
        )
        # the raw stream skips httpx's decoder chain; it is only needed for a compressed body
        encoded = (encoding or "identity").lower() != "identity"
        body = UpstreamBody(response, watch, decode=encoded, released=done)
        first = await body.first()  # a timeout or a lost connection: its ProviderError
        watch.settled()
        body.format = detect_format(first or b"", content_type)
        if first is None:
            await body.aclose()
        return body

    async def _failure(self, response: httpx.Response, watch: Watchdog) -> _Retryable:
        """Read the error body (best effort), close, and say whether to try again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeouts.idle
        if watch.total_at is not None:
            deadline = min(deadline, watch.total_at)
        raw = b""
        try:
            async with asyncio.timeout_at(deadline):
                async for chunk in response.aiter_bytes():
                    raw += chunk
                    if len(raw) >= _ERROR_BODY_LIMIT:
                        break
        except (TimeoutError, httpx.TransportError):
            pass
        finally:
            await response.aclose()
        error = error_from_response(
            response.status_code, raw, response.headers.get("content-type"), response.reason_phrase
        )
        if response.status_code not in RETRY_STATUSES:
            raise error
        return _Retryable(error, parse_retry_after(response.headers))

    def _make_headers(self, stream: bool) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream, application/x-ndjson, application/json"
            if stream
            else "application/json",
        }
        headers.update(self.headers)
        return headers


class APIClient:
    """The base of the model clients: where it posts, its defaults, one `Upstream`.

    Subclasses (one per API) build the request body (`body`); opening and
    closing are the same for all of them.
    """

    def __init__(
        self,
        url: str,
        *,
        model: str,
        stream: bool,
        params: Mapping[str, Any] | None,
        http: HTTPOptions,
        auth: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url
        self.model = model
        self.stream = stream
        self.params = dict(params or {})
        self.upstream = Upstream(http, auth=auth)

    def body(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    async def open(self, request: ModelRequest) -> UpstreamBody:
        return await self.upstream.post(self.url, self.body(request), stream=self.stream)

    async def aclose(self) -> None:
        await self.upstream.aclose()
