"""Recordings read back: what `--record DIR` (`adapters.http.record`) wrote, as test input.

A recording directory holds, per upstream exchange, the raw body file and its
`<stem>.exchange.json`. `read_recording` lists the exchanges in the order they
were sent; `ReplayModel.from_recording` plays them to the engine without a
socket, and `recorded_replies` gives `FakeModelServer` replies that put the
same status, headers and bytes back on a real socket. A body file alone is
also a plain recorded body (`toolrelay replay FILE`, `ReplayModel(FILE)`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from toolrelay.adapters.http.record import EXCHANGE_SUFFIX
from toolrelay.testing.fake_server import BodyReply, RawReply

__all__ = ["Exchange", "read_exchange", "read_recording", "recorded_replies"]


@dataclass(frozen=True, slots=True)
class Exchange:
    """One recorded exchange: the request as sent (scrubbed) and the answer as read."""

    path: Path
    """The `.exchange.json` file."""
    request: dict[str, Any]
    status: int | None
    """None: the request got no answer (`error` says why)."""
    reason: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    body_path: Path | None = None
    complete: bool = True
    """False: the reader stopped before the body's end, or the connection broke."""
    error: str | None = None

    @property
    def content_type(self) -> str | None:
        return self.headers.get("content-type")


def read_exchange(path: str | os.PathLike[str]) -> Exchange:
    """One `.exchange.json` and the body file it names."""
    path = Path(path)
    data = orjson.loads(path.read_bytes())
    response = data.get("response") or {}
    name = data.get("body")
    body_path = path.parent / name if isinstance(name, str) else None
    return Exchange(
        path=path,
        request=data.get("request") or {},
        status=response.get("status"),
        reason=response.get("reason") or "",
        headers=dict(response.get("headers") or {}),
        body=body_path.read_bytes() if body_path is not None else b"",
        body_path=body_path,
        complete=bool(data.get("complete", True)),
        error=data.get("error"),
    )


def read_recording(directory: str | os.PathLike[str]) -> list[Exchange]:
    """Every exchange of a recording directory, in sending order (the names sort so)."""
    return [read_exchange(p) for p in sorted(Path(directory).glob(f"*{EXCHANGE_SUFFIX}"))]


def recorded_replies(directory: str | os.PathLike[str]) -> list[BodyReply | RawReply]:
    """`FakeModelServer` replies for a recording's answered exchanges, in order: the
    recorded status, kept headers and body bytes (`server.script(*recorded_replies(d))`)."""
    replies: list[BodyReply | RawReply] = []
    for exchange in read_recording(directory):
        if exchange.status is None:
            continue
        headers = {k: v for k, v in exchange.headers.items() if k != "content-type"}
        if exchange.content_type is None:
            replies.append(RawReply(exchange.status, exchange.body, headers))
        else:
            replies.append(
                BodyReply(
                    exchange.body,
                    exchange.content_type,
                    status=exchange.status,
                    headers=headers,
                )
            )
    return replies
