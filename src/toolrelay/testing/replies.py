"""The replies a `FakeModelServer` serves: what to send, and how fast.

Each reply type says how to answer one request (`SSEReply`, `NDJSONReply`,
`JSONReply`, `RawReply`, `BodyReply`, or a callable given the `RecordedRequest`
that returns one); `resolve` turns it into a `Plan` (status, headers, the body's
pieces and their pacing) that the server's connection writes. Kept apart from the
server so the wire formats a test scripts read on their own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, TypeAlias

from toolrelay.testing.wire import dumps

__all__ = [
    "BodyReply",
    "JSONReply",
    "NDJSONReply",
    "Plan",
    "RawReply",
    "RecordedRequest",
    "Reply",
    "SSEReply",
    "error_plan",
    "resolve",
]

log = logging.getLogger("toolrelay.testing.fake_server")  # the server's log, as before the split

_MAX_CALLABLE_DEPTH = 8


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it; `json` is the parsed body or None if it is not JSON."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    json: Any


@dataclass(frozen=True)
class Plan:
    """What to put on the wire for one reply, independent of which Reply type produced it."""

    status: int
    headers: list[tuple[str, str]]
    pieces: list[bytes]
    streamed: bool = False
    delay: float = 0.0
    stall_after: int | None = None
    stall_for: float = 3600.0
    drop_after: int | None = None
    ttfb_delay: float = 0.0
    holds: Mapping[int, threading.Event] = field(default_factory=dict)


def _merge_headers(content_type: str | None, extra: Mapping[str, str]) -> list[tuple[str, str]]:
    """Caller headers win over the default Content-Type (case-insensitively)."""
    out = [(k.lower(), v) for k, v in extra.items()]
    if content_type is not None and all(k != "content-type" for k, _ in out):
        out.insert(0, ("content-type", content_type))
    return out


def _raw(piece: bytes | str) -> bytes:
    return piece if isinstance(piece, bytes) else piece.encode()


@dataclass(frozen=True, kw_only=True)
class _Paced:
    """Pacing and failure injection shared by the streamed reply types."""

    delay: float = 0.0
    stall_after: int | None = None
    stall_for: float = 3600.0
    drop_after: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    status: int = 200
    ttfb_delay: float = 0.0
    holds: Mapping[int, threading.Event] = field(default_factory=dict)
    """Before piece i, wait until `holds[i]` is set: a test releases the stream once it
    has seen what came before (an order that no pacing can guarantee on a loaded box)."""

    def _paced_plan(self, content_type: str, pieces: list[bytes]) -> Plan:
        return Plan(
            status=self.status,
            headers=_merge_headers(content_type, self.headers),
            pieces=pieces,
            streamed=True,
            delay=self.delay,
            stall_after=self.stall_after,
            stall_for=self.stall_for,
            drop_after=self.drop_after,
            ttfb_delay=self.ttfb_delay,
            holds=self.holds,
        )


@dataclass(frozen=True)
class SSEReply(_Paced):
    """An SSE body: Mappings become `data: <json>\\n\\n`, str/bytes go out raw; one chunk each.

    `stall_after`/`drop_after` count events, `[DONE]` included as the last one.
    """

    events: Sequence[bytes | str | Mapping[str, Any]]
    _: KW_ONLY
    done: bool = True

    def _plan(self) -> Plan:
        pieces = [
            b"data: " + dumps(e) + b"\n\n" if isinstance(e, Mapping) else _raw(e)
            for e in self.events
        ]
        if self.done:
            pieces.append(b"data: [DONE]\n\n")
        return self._paced_plan("text/event-stream", pieces)


@dataclass(frozen=True)
class NDJSONReply(_Paced):
    """An NDJSON body (Ollama): Mappings become one JSON line each, bytes/str go out raw."""

    lines: Sequence[bytes | str | Mapping[str, Any]]

    def _plan(self) -> Plan:
        pieces = [dumps(x) + b"\n" if isinstance(x, Mapping) else _raw(x) for x in self.lines]
        return self._paced_plan("application/x-ndjson", pieces)


@dataclass(frozen=True)
class JSONReply:
    """A JSON body in one piece; str/bytes bodies are sent verbatim (to serve broken JSON)."""

    body: Mapping[str, Any] | list[Any] | str | bytes
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    _: KW_ONLY
    ttfb_delay: float = 0.0

    def _plan(self) -> Plan:
        body = self.body
        raw = _raw(body) if isinstance(body, str | bytes) else dumps(body)
        headers = _merge_headers("application/json", self.headers)
        return Plan(self.status, headers, [raw], ttfb_delay=self.ttfb_delay)


@dataclass(frozen=True)
class RawReply:
    """Any status, body and headers, e.g. a 429 with Retry-After or a 502 with an HTML page."""

    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    _: KW_ONLY
    ttfb_delay: float = 0.0

    def _plan(self) -> Plan:
        headers = _merge_headers(None, self.headers)
        return Plan(self.status, headers, [self.body], ttfb_delay=self.ttfb_delay)


@dataclass(frozen=True)
class BodyReply:
    """A pre-rendered body: one write with Content-Length, or `chunk_size`-byte chunks."""

    body: bytes
    content_type: str = "text/event-stream"
    _: KW_ONLY
    chunk_size: int | None = None
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    ttfb_delay: float = 0.0

    def _plan(self) -> Plan:
        headers = _merge_headers(self.content_type, self.headers)
        if self.chunk_size is None:
            return Plan(self.status, headers, [self.body], ttfb_delay=self.ttfb_delay)
        size = max(1, self.chunk_size)
        pieces = [self.body[i : i + size] for i in range(0, len(self.body), size)]
        return Plan(self.status, headers, pieces, streamed=True, ttfb_delay=self.ttfb_delay)


Reply: TypeAlias = (
    "SSEReply | NDJSONReply | JSONReply | RawReply | BodyReply | Callable[[RecordedRequest], Reply]"
)
_REPLY_TYPES = (SSEReply, NDJSONReply, JSONReply, RawReply, BodyReply)


def error_plan(message: str) -> Plan:
    body = dumps({"error": {"message": message, "type": "fake_server_error", "code": None}})
    return Plan(500, [("content-type", "application/json")], [body])


def resolve(reply: Reply, request: RecordedRequest) -> Plan:
    """Call callable replies (they may return callables) until a concrete reply comes out."""
    for _ in range(_MAX_CALLABLE_DEPTH):
        if isinstance(reply, _REPLY_TYPES):
            return reply._plan()
        try:
            reply = reply(request)
        except Exception as exc:  # a test's callback failed: answer, don't hang
            log.exception("fake server: reply callable raised")
            return error_plan(f"reply callable raised {type(exc).__name__}: {exc}")
    return error_plan("reply callables nested too deeply")
