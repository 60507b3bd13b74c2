"""The chat stream's final event refers to the items it already sent, instead of repeating them.

A turn's `chat:completion` (`done: true`) carries its whole `output` and `content`
for in-process callers (`/v1` answers, the Python API). On a chat's event stream
every item already went out whole in its `response.output_item.done`, so there
each item the final event would repeat unchanged becomes a reference,
`{"id", "type", "status", "ref": true}`, and `content` is left out when a message
item is among them: the text is not sent a third time. An item that changed since
(an outlet filter's rewrite, an item closed by a cancel) stays whole.
"""

from __future__ import annotations

from typing import Any

from toolrelay.core import events as ev
from toolrelay.core.events import Event

__all__ = ["ItemReferences"]


class ItemReferences:
    """One turn's items as its stream sent them; `final` rewrites its final event."""

    __slots__ = ("_sent",)

    def __init__(self) -> None:
        self._sent: dict[str, Any] = {}

    def feed(self, event: Event) -> Event:
        """The event as the stream should carry it."""
        if event.type == ev.OUTPUT_ITEM_DONE:
            item = event.data.get("item")
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                self._sent[item["id"]] = item
            return event
        if event.type == ev.CHAT_COMPLETION and event.data.get("done") and self._sent:
            return self._final(event)
        return event

    def _final(self, event: Event) -> Event:
        output = event.data.get("output")
        if not isinstance(output, list):
            return event
        refs: list[Any] = []
        text_sent = False
        for item in output:
            key = item.get("id") if isinstance(item, dict) else None
            if isinstance(key, str) and self._sent.get(key) == item:
                refs.append({"id": key, "type": item.get("type"), "status": item.get("status")})
                refs[-1]["ref"] = True
                text_sent = text_sent or item.get("type") == "message"
            else:
                refs.append(item)
        data = {**event.data, "output": refs}
        if text_sent:
            data.pop("content", None)
        return Event(event.type, data)
