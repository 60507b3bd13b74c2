"""An event as the JSON body buses send between processes (Redis entries, IPC frames).

One shape for every out-of-process backend, so an event reads back the same
whichever bus carried it: `{"type", "data", "ts"}`, `ts` being the wall-clock
publish time when the sender knows it. Data must be JSON-ready, as it is for SSE.
"""

from __future__ import annotations

from typing import Any

from toolrelay.adapters.events import Envelope
from toolrelay.core.events import Event

__all__ = ["body_envelope", "event_body"]


def event_body(event: Event, published_at: float | None = None) -> dict[str, Any]:
    """The JSON-ready body of `event`; `ts` only when the publish time is known."""
    body: dict[str, Any] = {"type": event.type, "data": event.data}
    if published_at is not None:
        body["ts"] = published_at
    return body


def body_envelope(seq: int, body: dict[str, Any]) -> Envelope:
    """The envelope a decoded body stands for (an absent or null `data` reads as `{}`)."""
    published = body.get("ts")
    when = float(published) if isinstance(published, int | float) else None
    return Envelope(seq, Event(body["type"], body.get("data") or {}), when)
