"""The HTTP plumbing every model client shares: one transport, timeouts, retries, errors.

This module owns getting a model server's response body to the engine as raw
bytes, and turning every way that can fail into a `ProviderError` with a
sentence a user can act on. It does not build request bodies (the API modules
do), it does not parse response bodies (`core.stream.reader.BodyReader` does), except
to pull the message out of an HTTP error body, and it does not speak HTTP
itself: requests go through a `Transport` (`adapters.http`), aiohttp's unless
`HTTPOptions.transport` names another.

Rules:
1. One transport per model client (`Upstream.transport`), its connections
   made on first use and reused across turns and iterations; `aclose()` ends
   them.
2. `open` returns only once the first body chunk has arrived. Until then a
   failure may be retried (connect errors, 429, 500/502/503/504, with
   exponential backoff + jitter, or the server's `Retry-After`; a hang-up
   with no byte of answer, at once); once a byte has been handed out nothing
   is ever retried.
3. Timeouts: `connect` is the transport's (a free connection, the proxy, TLS);
   `first_byte` covers status line, headers and the first chunk; `idle` is
   the longest gap between chunks; `total` bounds everything, retries
   included. One timer per model call watches them all
   (`adapters.models.watchdog`), handed from the request to the body
   (`adapters.models.upstream_body`), so a stalled server cannot hold a turn forever.
4. A body past `max_response_bytes` ends the call with a `ProviderError`;
   what came before it is read (the turn keeps its partial output).
5. A stream that ends, fails or is closed releases its connection at once
   (back to the pool if the body was read to the end, dropped otherwise).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Final

import orjson

from toolrelay.adapters.http.aio import MAX_CONNECTIONS, AiohttpTransport
from toolrelay.adapters.http.record import Recorder
from toolrelay.adapters.http.seam import (
    ConnectError,
    NoResponse,
    Request,
    Response,
    Transport,
    TransportError,
)
from toolrelay.adapters.models.failures import error_from_response
from toolrelay.adapters.models.upstream_body import NO_CAP, UpstreamBody
from toolrelay.adapters.models.watchdog import DEFAULT_TIMEOUTS, Timeouts, Watchdog
from toolrelay.core.formats.content import detect_format
from toolrelay.engine.interfaces import ModelRequest
from toolrelay.errors import ProviderError

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
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


DEFAULT_MAX_RESPONSE_BYTES: Final = 32 << 20
"""A model answer's body is cut past this (rule 4): far above any real answer, far below
the memory a server has."""


@dataclass(frozen=True, slots=True)
class HTTPOptions:
    """How a model client talks HTTP, the same for every API: one value, not eight arguments.

    `headers` go on every request (after the client's `Authorization`, so they
    win); `max_response_bytes` None: no cap; `max_connections` bounds the
    connections to the server (requests past it wait for one, within
    `timeouts.connect`); `transport` replaces aiohttp's (tests count open
    bodies with one; `toolrelay.testing.MockTransport` needs no network);
    `record` writes every exchange as a fixture (`adapters.http.record`).
    """

    headers: Mapping[str, str] = field(default_factory=dict)
    timeouts: Timeouts = DEFAULT_TIMEOUTS
    retry: Retry = DEFAULT_RETRY
    max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES
    max_connections: int = MAX_CONNECTIONS
    transport: Transport | None = None
    record: Recorder | None = None


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


@dataclass(frozen=True, slots=True)
class _Retryable:
    """A failed try that may be tried again."""

    error: ProviderError
    retry_after: float | None = None


class Upstream:
    """The connection to one model server: POSTs JSON, hands back `UpstreamBody`s (module doc)."""

    def __init__(self, options: HTTPOptions, *, auth: Mapping[str, str] | None = None) -> None:
        self.headers = {**(auth or {}), **options.headers}
        self.timeouts = options.timeouts
        self.retry = options.retry
        cap = options.max_response_bytes
        self.max_bytes = NO_CAP if cap is None else cap
        self.transport: Transport = options.transport or AiohttpTransport(
            connect_timeout=options.timeouts.connect, max_connections=options.max_connections
        )
        if options.record is not None:
            self.transport = options.record.wrap(self.transport)
        self._headers_by_stream = {flag: self._make_headers(flag) for flag in (True, False)}

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def post(self, url: str, payload: Mapping[str, Any], *, stream: bool) -> UpstreamBody:
        """Send until a first body byte arrives or the failure is final (rule 2)."""
        loop = asyncio.get_running_loop()
        watch = Watchdog(loop, self.timeouts)
        # a copy of the exact size: orjson's own result reserves 4 KiB, and the request
        # (with its body) lives as long as the stream does
        body = bytes(memoryview(orjson.dumps(payload, default=_json_default)))
        request = Request("POST", url, self._headers_by_stream[stream], body)
        attempt = 0
        try:
            while True:
                attempt += 1
                outcome = await self._attempt(request, watch)
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

    async def _attempt(self, request: Request, watch: Watchdog) -> UpstreamBody | _Retryable:
        watch.opening()
        try:
            response = await self.transport.send(request)
        except asyncio.CancelledError:
            expired = watch.timed_out()
            if expired is None:
                raise
            raise expired from None
        except ConnectError as exc:
            watch.settled()
            # the URL goes to the log only: behind a server it is internal, not for API users
            log.warning("cannot connect to the model server at %s: %s", request.url, exc)
            return _Retryable(ProviderError(f"Cannot connect to the model server: {exc}"))
        except NoResponse as exc:
            # a kept-alive connection the server closed as it was reused (llama.cpp's server
            # closes one after each streamed answer, a millisecond later): nothing was
            # answered, so the request goes again at once, on a new connection
            watch.settled()
            log.info("the model server closed a reused connection unanswered; sending again")
            error = ProviderError(f"Model server request failed: {exc}")
            return _Retryable(error, retry_after=0.0)
        except TransportError as exc:
            raise ProviderError(f"Model server request failed: {exc}") from exc
        try:
            if watch.expiring:  # the deadline passed, and the transport swallowed the cancel
                expired = watch.expired
                watch.settled()
                raise expired or watch.error(False)
            if not 200 <= response.status < 300:
                watch.settled()
                return await self._failure(response, watch)
            return await self._first_chunk(response, watch)
        except BaseException:
            await response.aclose()
            raise

    async def _first_chunk(self, response: Response, watch: Watchdog) -> UpstreamBody:
        body = UpstreamBody(response, watch, max_bytes=self.max_bytes)
        first = await body.first()  # a timeout or a lost connection: its ProviderError
        watch.settled()
        body.format = detect_format(first or b"", response.headers.get("content-type"))
        if first is None:
            await body.aclose()
        return body

    async def _failure(self, response: Response, watch: Watchdog) -> _Retryable:
        """Read the error body (best effort), close, and say whether to try again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeouts.idle
        if watch.total_at is not None:
            deadline = min(deadline, watch.total_at)
        raw = b""
        try:
            async with asyncio.timeout_at(deadline):
                async for chunk in response.chunks():
                    raw += chunk
                    if len(raw) >= _ERROR_BODY_LIMIT:
                        break
        except (TimeoutError, TransportError):
            pass
        finally:
            await response.aclose()
        status, headers = response.status, response.headers
        error = error_from_response(status, raw, headers.get("content-type"), response.reason)
        if status not in RETRY_STATUSES:
            raise error
        return _Retryable(error, parse_retry_after(headers))

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
