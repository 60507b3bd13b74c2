"""Recording upstream exchanges as test fixtures, with their secrets scrubbed.

A `Recorder` wraps a `Transport` (`Recorder.wrap`); every request sent
through it and its answer are written to the recorder's directory as two
files sharing one name, in the order the requests were sent:

- `<stem>.<sse|ndjson|json|txt>`: the response body's bytes exactly as they
  arrived (compression undone), framing included: what `toolrelay replay`,
  `ReplayModel` and a `FakeModelServer` `BodyReply` read back unchanged.
- `<stem>.exchange.json`: the request (method, URL, headers, JSON body), the
  answer's status, reason and the headers that matter to a reader
  (`KEPT_RESPONSE_HEADERS`), the body file's name, and whether the body was
  read to its end (`complete`: false when the reader stopped early or the
  connection broke) or the request got no answer (`error`).

`toolrelay.testing.recorded` reads a directory back (`ReplayModel.from_recording`,
`recorded_replies`). The module owns the scrubbing, so that a recording can
be committed or attached to a bug report:

1. Request headers whose name says they carry a credential (`Authorization`,
   `Cookie`, any `…key…`, `…token…`, `…secret…`, `…auth…`, `…session…`,
   `…password…`) are written as `[scrubbed]`; response headers are kept only
   when listed (so `Set-Cookie` never is).
2. URL query parameters and JSON body fields with such names (body fields:
   `SECRET_FIELDS` plus the route's `record_scrub`), at any depth, are
   `[scrubbed]`.
3. Every secret value seen (those headers' values, the bare key after
   `Bearer `, the values given to `Recorder(secrets=…)`) is replaced
   wherever it appears in any written byte, the response body included.

Writing never fails a model call: a recording that cannot be written is
logged and skipped.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import threading
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from toolrelay.adapters.http.seam import Request, Response, Transport, TransportError
from toolrelay.core.formats.content import detect_format

__all__ = [
    "EXCHANGE_SUFFIX",
    "KEPT_RESPONSE_HEADERS",
    "SCRUBBED",
    "SECRET_FIELDS",
    "Recorder",
    "RecordingTransport",
]

log = logging.getLogger(__name__)

SCRUBBED: Final = "[scrubbed]"
EXCHANGE_SUFFIX: Final = ".exchange.json"
SECRET_FIELDS: Final = frozenset(
    {
        "api_key",
        "apikey",
        "api-key",
        "key",
        "access_token",
        "refresh_token",
        "token",
        "secret",
        "client_secret",
        "password",
        "authorization",
    }
)
"""JSON body fields scrubbed by default (rule 2): names, not patterns, so `max_tokens`
stays."""
KEPT_RESPONSE_HEADERS: Final = frozenset(
    {
        "content-type",
        "retry-after",
        "retry-after-ms",
        "x-request-id",
        "request-id",
        "openai-processing-ms",
        "x-ratelimit-limit-requests",
        "x-ratelimit-limit-tokens",
        "x-ratelimit-remaining-requests",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-requests",
        "x-ratelimit-reset-tokens",
    }
)
_SECRET_HEADER: Final = re.compile(r"auth|cookie|key|token|secret|session|password", re.I)
_EXTENSIONS: Final = {"sse": ".sse", "ndjson": ".ndjson", "json": ".json"}
_MIN_SECRET: Final = 6
"""Shorter values are not replaced in the bytes (they would hit ordinary text)."""
_COUNT = itertools.count(1)
"""One sequence for every recorder of the process (routes may share a directory)."""
_COUNT_LOCK = threading.Lock()


class Recorder:
    """Writes exchanges under `directory` (module doc); one per model route or process."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        secrets: Iterable[str] = (),
        secret_fields: Iterable[str] = (),
    ) -> None:
        self.directory = Path(directory)
        self._secrets = {s for s in secrets if isinstance(s, str) and len(s) >= _MIN_SECRET}
        self._fields = SECRET_FIELDS | {f.lower() for f in secret_fields}

    def wrap(self, transport: Transport) -> RecordingTransport:
        return RecordingTransport(transport, self)

    def stem(self) -> str:
        """A name that sorts in sending order, unique across processes writing one directory."""
        with _COUNT_LOCK:
            number = next(_COUNT)
        now = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        return f"{now}-{os.getpid()}-{number:04d}"

    def write(
        self,
        request: Request,
        *,
        response: Response | None,
        body: bytes,
        complete: bool,
        error: str | None = None,
    ) -> Path | None:
        """Write one exchange; the body file's path (None when nothing could be written)."""
        secrets = self._secrets | _header_secrets(request.headers)
        ordered = sorted(secrets, key=len, reverse=True)  # a key inside a longer one: longest first
        stem = self.stem()
        content_type = response.headers.get("content-type") if response is not None else None
        kind = detect_format(body, content_type) if body else "json"
        ok = response is not None and 200 <= response.status < 300
        extension = _EXTENSIONS[kind] if ok or _is_json(body) else ".txt"
        exchange: dict[str, Any] = {
            "request": {
                "method": request.method,
                "url": self._url(request.url),
                "headers": self._request_headers(request.headers),
                "body": self._body(request.body),
            },
            "response": None
            if response is None
            else {
                "status": response.status,
                "reason": response.reason,
                "headers": {
                    k.lower(): v
                    for k, v in response.headers.items()
                    if k.lower() in KEPT_RESPONSE_HEADERS
                },
            },
            "body": f"{stem}{extension}" if response is not None else None,
            "complete": complete,
            "error": error,
        }
        text = orjson.dumps(exchange, option=orjson.OPT_INDENT_2) + b"\n"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / f"{stem}{extension}"
            if response is not None:
                path.write_bytes(_replace(body, ordered))
            (self.directory / f"{stem}{EXCHANGE_SUFFIX}").write_bytes(_replace(text, ordered))
        except OSError as exc:
            log.warning("cannot write the recording %s in %s: %s", stem, self.directory, exc)
            return None
        return path if response is not None else None

    def _request_headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        return {k.lower(): SCRUBBED if _SECRET_HEADER.search(k) else v for k, v in headers.items()}

    def _url(self, url: str) -> str:
        parts = urlsplit(url)
        if not parts.query:
            return url
        query = [
            (k, SCRUBBED if k.lower() in self._fields or _SECRET_HEADER.search(k) else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ]
        return urlunsplit(parts._replace(query=urlencode(query, safe="[]")))

    def _body(self, raw: bytes) -> Any:
        if not raw:
            return None
        try:
            return self._scrub(orjson.loads(raw))
        except orjson.JSONDecodeError:
            return raw.decode("utf-8", "replace")

    def _scrub(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: SCRUBBED if str(k).lower() in self._fields else self._scrub(v)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self._scrub(v) for v in value]
        return value


def _header_secrets(headers: Mapping[str, str]) -> set[str]:
    """The values of credential headers, and the key inside `Bearer <key>`."""
    found: set[str] = set()
    for name, value in headers.items():
        if not _SECRET_HEADER.search(name) or not value:
            continue
        found.add(value)
        scheme, _, rest = value.partition(" ")
        if rest and scheme.lower() in ("bearer", "basic", "token"):
            found.add(rest.strip())
    return {s for s in found if len(s) >= _MIN_SECRET}


def _replace(data: bytes, secrets: list[str]) -> bytes:
    for secret in secrets:
        raw = secret.encode()
        if data.find(raw) >= 0:
            data = data.replace(raw, SCRUBBED.encode())
        escaped = orjson.dumps(secret)[1:-1]  # as it sits inside a JSON string
        if escaped != raw and data.find(escaped) >= 0:
            data = data.replace(escaped, SCRUBBED.encode())
    return data


def _is_json(body: bytes) -> bool:
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return True


class RecordingTransport:
    """A `Transport` that hands every exchange to its `Recorder` (module doc)."""

    def __init__(self, inner: Transport, recorder: Recorder) -> None:
        self.inner = inner
        self.recorder = recorder

    async def send(self, request: Request) -> Response:
        try:
            response = await self.inner.send(request)
        except TransportError as exc:
            self.recorder.write(request, response=None, body=b"", complete=False, error=str(exc))
            raise
        return _RecordingResponse(response, request, self.recorder)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _RecordingResponse:
    """The inner answer, its body kept as it is read; written once, at its end or close."""

    def __init__(self, inner: Response, request: Request, recorder: Recorder) -> None:
        self._inner = inner
        self._request = request
        self._recorder = recorder
        self._body: list[bytes] = []
        self._written = False

    @property
    def status(self) -> int:
        return self._inner.status

    @property
    def reason(self) -> str:
        return self._inner.reason

    @property
    def headers(self) -> Mapping[str, str]:
        return self._inner.headers

    async def chunks(self) -> AsyncIterator[bytes]:
        error: str | None = None
        try:
            async for chunk in self._inner.chunks():
                self._body.append(chunk)
                yield chunk
        except TransportError as exc:
            error = str(exc)
            raise
        finally:
            if error is not None:
                self._write(complete=False, error=error)
        self._write(complete=True)

    async def aclose(self) -> None:
        self._write(complete=False)  # a body read to its end was written already
        await self._inner.aclose()

    def _write(self, *, complete: bool, error: str | None = None) -> None:
        if self._written:
            return
        self._written = True
        self._recorder.write(
            self._request,
            response=self._inner,
            body=b"".join(self._body),
            complete=complete,
            error=error,
        )
