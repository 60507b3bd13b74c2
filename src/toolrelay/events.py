"""The event protocol a client reads (SSE frames of `/api/chats/{id}/events`, `Relay` sinks).

`schema()` is its JSON Schema (also committed as `docs/events.schema.json`);
`PAYLOADS` maps each event type toolrelay sends to its payload's TypedDict, and
`Event` is one event. The table in `docs/events.md` is made from the same source.
`ChatStreamReader` reads a chat's SSE stream back into whole events (an item's
`done` there may leave out the text its deltas carried).
"""

from __future__ import annotations

from toolrelay.core.event_schema import schema
from toolrelay.core.events import PAYLOADS, Event
from toolrelay.core.formats.chat_stream import ChatStreamReader

__all__ = ["PAYLOADS", "ChatStreamReader", "Event", "schema"]
