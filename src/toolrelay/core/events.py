"""Events a client sees (DESIGN §4): one vocabulary for engine, server, page and bus.

Item events are the OpenAI Responses streaming events; chat-level events keep
Open WebUI's names. `data` is always a JSON-ready dict.
"""

from __future__ import annotations

from typing import Any, Final

OUTPUT_ITEM_ADDED: Final = "response.output_item.added"
OUTPUT_ITEM_DONE: Final = "response.output_item.done"
OUTPUT_TEXT_DELTA: Final = "response.output_text.delta"
REASONING_TEXT_DELTA: Final = "response.reasoning_text.delta"
FUNCTION_CALL_ARGUMENTS_DELTA: Final = "response.function_call_arguments.delta"
FUNCTION_CALL_ARGUMENTS_DONE: Final = "response.function_call_arguments.done"
CHAT_COMPLETION: Final = "chat:completion"
CHAT_MESSAGE_ERROR: Final = "chat:message:error"
SOURCE: Final = "source"
EXECUTE_TOOL: Final = "execute:tool"
TOOL_APPROVAL: Final = "tool:approval"
TOOL_PROGRESS: Final = "tool:progress"
CHAT_TITLE: Final = "chat:title"
CHAT_TAGS: Final = "chat:tags"
CHAT_FOLLOW_UPS: Final = "chat:message:follow_ups"
CHAT_OUTLET: Final = "chat:outlet"
CHAT_TASKS_CANCEL: Final = "chat:tasks:cancel"
TERMINAL_DISPLAY_FILE: Final = "terminal:display_file"
TERMINAL_WRITE_FILE: Final = "terminal:write_file"
TERMINAL_RUN_COMMAND: Final = "terminal:run_command"
CODE_OUTPUT: Final = "code_interpreter:output"
"""Live output of running code: `{call_id, kind: stdout|stderr|result|display|error, …}`."""
TURN_RESUMED: Final = "chat:turn:resumed"
"""A turn picked up from its last checkpoint: `output` replaces what a client had."""

DELTA_EVENTS: Final = frozenset(
    {OUTPUT_TEXT_DELTA, REASONING_TEXT_DELTA, FUNCTION_CALL_ARGUMENTS_DELTA}
)


class Event:
    """One event: its `type` (a name above) and JSON-ready `data`.

    A slotted class with a hand-written `__init__`, equality and repr (what the
    dataclass had). Treat it, and its `data`, as immutable once emitted: several
    sinks may share it. Hot paths build one as `BlankEvent()` and set both
    fields: a class without a Python `__init__` is built in C, half the cost.
    """

    __slots__ = ("data", "type")
    __match_args__ = ("type", "data")
    __hash__ = None  # type: ignore[assignment]  # mutable data, as the dataclass

    type: str
    data: dict[str, Any]

    def __init__(self, type: str, data: dict[str, Any]) -> None:
        self.type = type
        self.data = data

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return self.type == other.type and self.data == other.data

    def __repr__(self) -> str:
        return f"Event(type={self.type!r}, data={self.data!r})"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "data": self.data}


class BlankEvent(Event):
    """An `Event` made without arguments, for per-chunk hot paths: set `type` and
    `data` right after `BlankEvent()` (an event without them is never emitted)."""

    __slots__ = ()
    __init__ = object.__init__  # C-level: no Python frame
