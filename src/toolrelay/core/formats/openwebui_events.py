"""Our events as Open WebUI 0.12.4 sends them (issue 29 item 6): the `openwebui` mode.

Where the two differ for the same thing, this turns ours into Open WebUI's, one
event at a time, keeping order (reference §13):

| ours | Open WebUI mode |
|---|---|
| `response.*` (item events, deltas) | `response:completion` with the event as data (`{type: "response.output_text.delta", item_id, …}`) |
| `chat:title {title}` | `chat:title` with the title (a string) as data |
| `chat:tags {tags}` | `chat:tags` with the list as data |
| `chat:outlet {content, output}` | `chat:outlet {messages: [{id, role: assistant, content, output}]}` |
| `chat:tasks:cancel {}` | `chat:tasks:cancel {output}`, sent just before the final event (which has the output) |
| `chat:completion {done: true, …}` | the same plus `title` (the chat's title then) |
| (a turn's first event) | `chat:active {active: true}` before it |
| (after the final event) | `chat:active {active: false}` |
| the final event's item references `{id, type, status, ref: true}` | the whole items, and `content` |
| `chat:snapshot` (the opening frame) | kept, inside the same envelope |

Open WebUI's front end replaces the message's output and content with the final
event's, so the references the chat stream sends there (`server.live_events`) are
resolved from the `response.output_item.done` events this subscriber saw; one that
started after some of them (a `Last-Event-ID` resume) gets the rest from the saved
message through `remember` (`unresolved` says when).

Everything else (`source`, `status`, `chat:message:error`, `chat:message:files`,
`chat:message:follow_ups`, `chat:completion` with usage …) passes as it is. Pure.
"""

from __future__ import annotations

from typing import Any

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.items import as_items, output_text

__all__ = ["OpenWebUIEvents"]


class OpenWebUIEvents:
    """One subscriber's translation; `message_id` is the turn's (set by the caller)."""

    def __init__(self, *, title: str | None = None, active: bool = False) -> None:
        self.title = title
        self.active = active
        self.message_id: str | None = None
        self._cancel: Event | None = None
        self._items: dict[str, Any] = {}
        """Items by id, as their `output_item.done` (or the saved message) gave them."""

    @property
    def starting(self) -> bool:
        """The next turn event starts a turn (the caller may look its message id up)."""
        return not self.active

    def remember(self, items: Any) -> None:
        """Whole items to resolve the final event's references with (the saved message's)."""
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                self._items.setdefault(item["id"], item)

    def unresolved(self, event: Event) -> bool:
        """The event is a final one referring to an item this subscriber never saw whole."""
        return any(_is_ref(item) and item["id"] not in self._items for item in _final_output(event))

    def feed(self, event: Event) -> list[Event]:
        kind, data = event.type, event.data
        out: list[Event] = []
        if kind in ("chat:snapshot", "server:shutdown"):
            return [event]
        if kind == ev.OUTPUT_ITEM_DONE:
            self.remember([data.get("item")])
        if not self.active and kind not in _AFTER_TURN:
            self.active = True
            out.append(Event("chat:active", {"active": True}))
        if kind.startswith("response."):
            out.append(Event("response:completion", {"type": kind, **data}))
        elif kind == ev.CHAT_TITLE:
            title = data.get("title")
            self.title = title if isinstance(title, str) else self.title
            out.append(Event(kind, title))  # type: ignore[arg-type]  # a string, as Open WebUI's
        elif kind == ev.CHAT_TAGS:
            out.append(Event(kind, list(data.get("tags") or [])))  # type: ignore[arg-type]
        elif kind == ev.CHAT_OUTLET:
            message = {
                "id": self.message_id,
                "role": "assistant",
                "content": data.get("content"),
                "output": data.get("output"),
            }
            out.append(Event(kind, {"messages": [message]}))
        elif kind == ev.CHAT_TASKS_CANCEL:
            self._cancel = event  # its output comes with the final event
        elif kind == ev.CHAT_COMPLETION and data.get("done"):
            if self._cancel is not None:
                out.append(ev.event(ev.CHAT_TASKS_CANCEL, {"output": data.get("output", [])}))
                self._cancel = None
            out.append(Event(kind, {**self._resolved(data), "title": self.title}))
            out.append(Event("chat:active", {"active": False}))
            self.active = False
        else:
            out.append(event)
        return out

    def _resolved(self, data: dict[str, Any]) -> dict[str, Any]:
        """The final event's data with whole items in place of references, and `content`
        (left out beside references) derived again from them."""
        output = data.get("output")
        if not isinstance(output, list) or not any(_is_ref(i) for i in output):
            return data
        whole = [self._items.get(i["id"], i) if _is_ref(i) else i for i in output]
        resolved = {**data, "output": whole}
        if "content" not in data:
            resolved["content"] = output_text(as_items([i for i in whole if isinstance(i, dict)]))
        return resolved

    def envelope(self, chat_id: str, event: Event) -> dict[str, Any]:
        """Open WebUI's Socket.IO envelope: `{chat_id, message_id, data: {type, data}}`."""
        return {
            "chat_id": chat_id,
            "message_id": self.message_id,
            "data": {"type": event.type, "data": event.data},
        }


def _is_ref(item: Any) -> bool:
    return isinstance(item, dict) and item.get("ref") is True and isinstance(item.get("id"), str)


def _final_output(event: Event) -> list[Any]:
    if event.type != ev.CHAT_COMPLETION or not event.data.get("done"):
        return []
    output = event.data.get("output")
    return output if isinstance(output, list) else []


_AFTER_TURN = frozenset({ev.CHAT_TITLE, ev.CHAT_TAGS, ev.CHAT_FOLLOW_UPS})
"""Background-task events come after the final event: they start no turn."""
