"""What a tool's own events (`__event_emitter__`) mean for the turn (issue 29 item 2).

An Open WebUI tool talks to the chat while it runs: it adds text to the
answer, replaces that text, attaches files, reports its status and cites
sources. Those events are part of the turn, not only of the live stream, so
this module reads one event into what it changes:

| event `type` | kind | changes |
|---|---|---|
| `message`, `chat:message:delta` | `append` | the text of the batch's tool message item |
| `replace`, `chat:message` | `replace` | that text, replaced |
| `files`, `chat:message:files` | `files` | `files` of the call's `function_call_output` |
| `status` | `status` | `statuses` of that output (the last one is its state) |
| `citation`, `source` | `source` | `sources` of that output, and the turn's tool sources (R11) |
| anything else | `other` | nothing: it goes to the client as it is |

Sans-IO and never raising: a malformed event (data not an object, text not a
string, files not a list) changes nothing and is passed on as `other`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from toolrelay.core.items import Item, message_item, updated

__all__ = ["ToolEvent", "read_tool_event", "with_marks", "with_text"]

_I = TypeVar("_I", bound=Item)

Kind = Literal["append", "replace", "files", "status", "source", "other"]

_KINDS: Final[Mapping[str, Kind]] = {
    "message": "append",
    "chat:message:delta": "append",
    "replace": "replace",
    "chat:message": "replace",
    "files": "files",
    "chat:message:files": "files",
    "status": "status",
    "citation": "source",
    "source": "source",
}

MARKS: Final = ("files", "statuses", "sources")
"""Keys a call's output item gets from its tool's events, in this order."""


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """One event a tool emitted, read: its kind, its (client-facing) type and data."""

    kind: Kind
    type: str
    data: dict[str, Any]
    text: str = ""
    """`append`/`replace`: the text."""
    files: tuple[dict[str, Any], ...] = ()
    """`files`: the files (objects only)."""


def read_tool_event(event: Mapping[str, Any]) -> ToolEvent:
    """An emitted `{type, data}` as the turn applies it (module doc's table)."""
    raw_type = event.get("type")
    kind_name = raw_type if isinstance(raw_type, str) and raw_type else "status"
    raw = event.get("data")
    data = dict(raw) if isinstance(raw, Mapping) else {}
    kind = _KINDS.get(kind_name, "other")
    if kind in ("append", "replace"):
        text = data.get("content")
        if not isinstance(text, str):
            return ToolEvent("other", kind_name, data)
        name = "chat:message:delta" if kind == "append" else "chat:message"
        return ToolEvent(kind, name, data, text=text)
    if kind == "files":
        files = data.get("files")
        if not isinstance(files, list):
            return ToolEvent("other", kind_name, data)
        kept = tuple(dict(f) for f in files if isinstance(f, Mapping))
        return ToolEvent("files", "chat:message:files", {"files": list(kept)}, files=kept)
    if kind == "source":
        return ToolEvent("source", "source", data)
    return ToolEvent(kind, kind_name, data)


def with_text(item: Item | None, text: str, *, replace: bool) -> Item:
    """The tool message item with `text` appended (or in place of its text); a new
    in-progress message item when there is none yet."""
    if item is None:
        return message_item(text, status="in_progress")
    old = "" if replace else _text(item)
    return updated(item, content=[{"type": "output_text", "text": old + text}])


def _text(item: Item) -> str:
    parts = item.get("content")
    if not isinstance(parts, list):
        return ""
    return "".join(str(p.get("text") or "") for p in parts if isinstance(p, Mapping))


def with_marks(item: _I, marks: Mapping[str, list[dict[str, Any]]]) -> _I:
    """A call's output item with what its tool emitted: files joined to the result's own."""
    extra: dict[str, Any] = {}
    for key in MARKS:
        found = marks.get(key)
        if not found:
            continue
        before = item.get(key)
        extra[key] = [*(before if isinstance(before, list) else []), *found]
    return updated(item, **extra) if extra else item
