"""The server's log: stdlib `logging`, one line per record, JSON or pretty, secrets masked.

Owns the root handler `toolrelay serve` installs (`configure_logging`), the
request id every line of a request carries (`REQUEST_ID`, set by
`RequestIds`), and masking: whatever the formatter writes goes through
`Redactor`, so an API key, bearer token or a URL's password never reaches
the log, whoever logged it (toolrelay, uvicorn, httpx2). Structured fields go
in `extra={"fields": {...}}`: JSON puts them at the top level, pretty writes
`key=value`.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from typing import Any, Literal, TextIO

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.ids import new_id
from toolrelay.engine.interfaces import EventSink

__all__ = [
    "REQUEST_ID",
    "JSONFormatter",
    "PrettyFormatter",
    "Redactor",
    "RequestIdInErrors",
    "RequestIds",
    "configure_logging",
    "fields",
]

LogFormat = Literal["pretty", "json"]

REQUEST_ID: ContextVar[str | None] = ContextVar("toolrelay_request_id", default=None)
"""The id of the HTTP request being served (`X-Request-ID`); a /v1 turn's id is this id."""

MASK = "***"
_PATTERNS = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;]+"), r"\1 " + MASK),
    (re.compile(r"\b(tr|sk|rk|pk)-[A-Za-z0-9_\-]{8,}"), r"\1-" + MASK),
    (re.compile(r"(://)[^/\s:@]+:[^/\s@]+@"), r"\1" + MASK + "@"),
    (re.compile(r"(?i)((?:api[_-]?key|token|secret|password)[\"']?\s*[:=]\s*[\"']?)[^\s\"',&]+"),
     r"\1" + MASK),
)  # fmt: skip


def fields(**values: Any) -> dict[str, Any]:
    """`extra=` for a structured line: `log.info("turn", extra=fields(chat=…))`."""
    return {"fields": values}


class Redactor:
    """Masks known secret values and anything shaped like a credential."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str | None]) -> None:
        """More values to mask (too-short values would mask ordinary words: skipped)."""
        found = {s for s in secrets if s and len(s) >= 6}
        self._secrets = sorted(found | set(self._secrets), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        for pattern, repl in _PATTERNS:
            text = pattern.sub(repl, text)
        return text


class _Base(logging.Formatter):
    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self.redact = redact

    def _parts(self, record: logging.LogRecord) -> tuple[str, dict[str, Any], str | None]:
        message = record.getMessage()
        extra: dict[str, Any] = {}
        request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        if request_id:
            extra["request_id"] = request_id
        given = getattr(record, "fields", None)
        if isinstance(given, Mapping):
            extra.update(given)
        error = self.formatException(record.exc_info) if record.exc_info else None
        return message, extra, error


class JSONFormatter(_Base):
    """One JSON object per line: ts, level, logger, msg, request_id, the line's fields."""

    def format(self, record: logging.LogRecord) -> str:
        message, extra, error = self._parts(record)
        redact = self.redact  # before encoding too: JSON escapes would hide a secret's text
        message = redact(message)
        extra = {k: redact(v) if isinstance(v, str) else v for k, v in extra.items()}
        line: dict[str, Any] = {
            "ts": _iso(record.created),
            "level": record.levelname,
            "logger": record.name,
            "msg": message,
            **extra,
        }
        if error:
            line["exc"] = redact(error)
        return redact(orjson.dumps(line, default=str).decode())


class PrettyFormatter(_Base):
    """`HH:MM:SS LEVEL logger: message key=value …` for a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        message, extra, error = self._parts(record)
        clock = time.strftime("%H:%M:%S", time.localtime(record.created))
        pairs = " ".join(f"{k}={_plain(v)}" for k, v in extra.items() if v is not None)
        text = f"{clock} {record.levelname:<7} {record.name}: {message}"
        if pairs:
            text = f"{text}  {pairs}"
        if error:
            text = f"{text}\n{error}"
        return self.redact(text)


def _plain(value: Any) -> str:
    if isinstance(value, str):
        return value if value and " " not in value else repr(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int | bool) or value is None:
        return str(value)
    return orjson.dumps(value, default=str).decode()


def _iso(created: float) -> str:
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{whole}.{int(created % 1 * 1000):03d}Z"


def configure_logging(
    level: str | int = "INFO",
    fmt: LogFormat = "pretty",
    *,
    secrets: Iterable[str | None] = (),
    stream: TextIO | None = None,
) -> Redactor:
    """Route every logger (toolrelay's, uvicorn's, httpx2's) through one masked handler.

    Replaces the handlers a previous call installed, so it can be called again
    (tests, a reload); returns the `Redactor`, to add secrets known later.
    """
    redact = Redactor(secrets)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JSONFormatter(redact) if fmt == "json" else PrettyFormatter(redact))
    handler.set_name("toolrelay")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "toolrelay"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()  # ours, through the root
        logger.propagate = True
    # httpx2 (the MCP SDK's client) says INFO for every request; a tool call is logged once.
    # Alembic says INFO twice at every start ("Context impl …", "Will assume …"), migrating
    # or not. Both are heard at DEBUG.
    quiet = logging.DEBUG if root.level <= logging.DEBUG else logging.WARNING
    for name in ("httpx2", "httpcore2", "alembic"):
        logging.getLogger(name).setLevel(quiet)
    return redact


_ID_HEADER = b"x-request-id"


class RequestIds:
    """ASGI middleware: every HTTP request gets a fresh id, in `REQUEST_ID` and the
    `X-Request-ID` response header; 5xx error bodies name it too (`server.error_responses`).

    A client's own `X-Request-ID` is not reused: turns are saved under this id,
    so it must be unique.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = new_id("req")
        token = REQUEST_ID.set(request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((_ID_HEADER, request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)


class RequestIdInErrors:
    """An `EventSink` for a streamed `/v1` answer: a failed turn's final error names the
    request id, as a non-streamed 5xx body does, so the client's error leads to the log
    (a capped turn's notice is not an error: left as it is)."""

    def __init__(self, sink: EventSink, request_id: str) -> None:
        self.sink = sink
        self.suffix = f" (request id {request_id})"

    async def emit(self, event: Event) -> None:
        data = event.data
        failed = event.type == ev.CHAT_COMPLETION and data.get("status") == "failed"
        error = data.get("error") if failed else None
        if isinstance(error, Mapping) and isinstance(error.get("content"), str):
            named = {**error, "content": error["content"] + self.suffix}
            event = Event(event.type, {**data, "error": named})
        await self.sink.emit(event)
