"""Events a client sees (DESIGN §4): one vocabulary for engine, server, page and bus.

Item events are the OpenAI Responses streaming events; chat-level events keep
Open WebUI's names. `data` is always a JSON-ready dict.
"""

from __future__ import annotations

from dataclasses import dataclass
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

DELTA_EVENTS: Final = frozenset(
    {OUTPUT_TEXT_DELTA, REASONING_TEXT_DELTA, FUNCTION_CALL_ARGUMENTS_DELTA}
)


@dataclass(slots=True)
class Event:
    """One event: its `type` (a name above) and JSON-ready `data`.

    Not frozen (one is built per chunk; frozen doubles that cost), and `data`
    has no default (a default factory costs a third more per event): treat it,
    and its `data`, as immutable once emitted — several sinks may share it.
    """

    type: str
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "data": self.data}
