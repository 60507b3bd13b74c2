"""Events a client sees (DESIGN §4): one vocabulary for engine, server, page and bus.

Item events are the OpenAI Responses streaming events; chat-level events keep
Open WebUI's names. `data` is always a JSON-ready dict, shaped by its type's
payload (`PAYLOADS`: one TypedDict a type, checked by mypy where `event()` builds
one). `toolrelay.core.event_schema` turns `PAYLOADS` into the JSON Schema of the
protocol (`docs/events.schema.json`) and the table in `docs/events.md`: a new
event is a name, a payload type and a `PAYLOADS` entry here, nothing else.
The protocol is open: a tool's own events (`__event_emitter__`) pass through
with whatever type and data it gave, so a reader skips types it does not know.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, NotRequired, TypedDict, cast, overload

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

CHAT_MESSAGE_FILES: Final = "chat:message:files"
CHAT_MESSAGE: Final = "chat:message"
STATUS: Final = "status"
CHAT_SNAPSHOT: Final = "chat:snapshot"
SERVER_SHUTDOWN: Final = "server:shutdown"

DELTA_EVENTS: Final = frozenset(
    {OUTPUT_TEXT_DELTA, REASONING_TEXT_DELTA, FUNCTION_CALL_ARGUMENTS_DELTA}
)


# -- payloads: one TypedDict an event type ------------------------------------
# Items are `Mapping[str, Any]` here, not `core.items.Item`: the chat stream's final
# event may carry item references (`{id, type, status, ref: true}`), and a provider's
# own item kinds pass through. Optional keys are `NotRequired`; every payload may
# carry more keys than it names (a Responses server's own fields pass through).


class ItemData(TypedDict):
    """An output item appeared (`added`: as soon as its kind is known) or is final
    (`done`). `from_deltas: true` (a chat stream's `done`, to a reader that was sent
    the item's `added` and every delta since): the item comes without the text those
    deltas built (every content part's `text`, a call's `arguments`); put it back."""

    output_index: int
    item: Mapping[str, Any]
    from_deltas: NotRequired[bool]


class DeltaData(TypedDict):
    """More text, reasoning or arguments of the item `item_id`: append `delta`."""

    item_id: str
    output_index: int
    delta: str
    content_index: NotRequired[int]


class LeanDeltaData(TypedDict):
    """A delta's frame on a chat's stream: no `type` beside its `data` (the frame's
    `event:` line names it); `item_id`, `output_index` and `content_index` only when
    one differs from the stream's previous delta: else they are that delta's."""

    delta: str
    item_id: NotRequired[str]
    output_index: NotRequired[int]
    content_index: NotRequired[int]


class ArgumentsDoneData(TypedDict):
    """A function call's arguments are whole."""

    item_id: str
    output_index: int
    arguments: str


class ErrorText(TypedDict):
    content: str


class CompletionData(TypedDict, total=False):
    """With `done: true`, the turn's end (its output, text, usage, status); without,
    the usage of one model call so far."""

    done: bool
    output: Sequence[Mapping[str, Any]]
    content: str
    usage: Mapping[str, Any]
    status: str
    finish_reason: str | None
    error: ErrorText
    title: str | None


class MessageErrorData(TypedDict):
    """What went wrong, in a sentence for the user."""

    error: ErrorText


class SourceData(TypedDict, total=False):
    """A citation source: where it came from, its documents and one metadata entry each."""

    source: Mapping[str, Any]
    document: Sequence[str]
    metadata: Sequence[Mapping[str, Any]]


class ExecuteToolData(TypedDict):
    """A tool the client runs: answer it at `/api/chats/{id}/tool_result`."""

    id: str
    name: str
    params: Mapping[str, Any]


class ToolApprovalData(TypedDict):
    """A call that waits for the user's yes or no (`/api/chats/{id}/approve`)."""

    id: str
    name: str
    arguments: Mapping[str, Any]


class ToolProgressData(TypedDict):
    """How far an MCP tool's call has come."""

    call_id: str | None
    progress: float
    total: NotRequired[float]
    message: NotRequired[str]


class TitleData(TypedDict):
    """The chat's title, made after its first exchange."""

    title: str


class TagsData(TypedDict):
    """Tags for the chat."""

    tags: Sequence[str]


class FollowUpsData(TypedDict):
    """Questions the user may ask next."""

    follow_ups: Sequence[str]


class OutletData(TypedDict):
    """The answer as outlet filters changed it."""

    content: str
    output: Sequence[Mapping[str, Any]]


class TasksCancelData(TypedDict):
    """The turn was cancelled: its final event follows."""

    output: NotRequired[Sequence[Mapping[str, Any]]]


class TerminalData(TypedDict, total=False):
    """A file or terminal tool touched `path` (`run_command`: ran `command`)."""

    path: str
    page: int
    command: str


class CodeOutputData(TypedDict):
    """Live output of running code; `kind`: stdout, stderr, result, display or error
    (`text`: a stdout, stderr or result's text)."""

    call_id: str
    kind: str
    text: NotRequired[str]


class TurnResumedData(TypedDict):
    """A turn taken over from its last checkpoint: `output` replaces what a client had."""

    output: Sequence[Mapping[str, Any]]


class ReplaceData(TypedDict):
    """A tool replaced the text of the message `item_id` with `content`."""

    item_id: str
    output_index: int
    content: str


class FilesData(TypedDict):
    """Files a tool attached to the answer."""

    files: Sequence[Mapping[str, Any]]
    call_id: NotRequired[str]


class StatusData(TypedDict, total=False):
    """A tool's status line (Open WebUI's `status` event)."""

    description: str
    done: bool
    call_id: str


class SnapshotData(TypedDict):
    """A new subscriber's first frame: the chat's last messages, and whether a turn runs."""

    messages: Sequence[Mapping[str, Any]]
    running: bool
    more: bool
    waiting: NotRequired[Sequence[Mapping[str, Any]]]


class ShutdownData(TypedDict):
    """The server is stopping: reconnect (to another worker)."""

    reconnect: bool


PAYLOADS: Final[Mapping[str, type]] = {
    OUTPUT_ITEM_ADDED: ItemData,
    OUTPUT_ITEM_DONE: ItemData,
    OUTPUT_TEXT_DELTA: DeltaData,
    REASONING_TEXT_DELTA: DeltaData,
    FUNCTION_CALL_ARGUMENTS_DELTA: DeltaData,
    FUNCTION_CALL_ARGUMENTS_DONE: ArgumentsDoneData,
    CHAT_COMPLETION: CompletionData,
    CHAT_MESSAGE_ERROR: MessageErrorData,
    SOURCE: SourceData,
    EXECUTE_TOOL: ExecuteToolData,
    TOOL_APPROVAL: ToolApprovalData,
    TOOL_PROGRESS: ToolProgressData,
    CHAT_TITLE: TitleData,
    CHAT_TAGS: TagsData,
    CHAT_FOLLOW_UPS: FollowUpsData,
    CHAT_OUTLET: OutletData,
    CHAT_TASKS_CANCEL: TasksCancelData,
    TERMINAL_DISPLAY_FILE: TerminalData,
    TERMINAL_WRITE_FILE: TerminalData,
    TERMINAL_RUN_COMMAND: TerminalData,
    CODE_OUTPUT: CodeOutputData,
    TURN_RESUMED: TurnResumedData,
    CHAT_MESSAGE_FILES: FilesData,
    CHAT_MESSAGE: ReplaceData,
    STATUS: StatusData,
    CHAT_SNAPSHOT: SnapshotData,
    SERVER_SHUTDOWN: ShutdownData,
}
"""Every event type toolrelay itself sends, and its payload."""


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


def as_source(source: Mapping[str, Any]) -> SourceData:
    """A source built as a plain mapping (a tool's, a retriever's) as the `source` payload.

    Sources come from tools and retrievers in shapes we pass on as given, so this is a
    cast, not a check: the schema tests validate the sources real turns send.
    """
    return cast(SourceData, source)


# -- typed construction ---------------------------------------------------------
ItemType = Literal["response.output_item.added", "response.output_item.done"]
DeltaType = Literal[
    "response.output_text.delta",
    "response.reasoning_text.delta",
    "response.function_call_arguments.delta",
]
TerminalType = Literal["terminal:display_file", "terminal:write_file", "terminal:run_command"]


@overload
def event(type: ItemType, data: ItemData) -> Event: ...
@overload
def event(type: DeltaType, data: DeltaData) -> Event: ...
@overload
def event(
    type: Literal["response.function_call_arguments.done"], data: ArgumentsDoneData
) -> Event: ...
@overload
def event(type: Literal["chat:completion"], data: CompletionData) -> Event: ...
@overload
def event(type: Literal["chat:message:error"], data: MessageErrorData) -> Event: ...
@overload
def event(type: Literal["source"], data: SourceData) -> Event: ...
@overload
def event(type: Literal["execute:tool"], data: ExecuteToolData) -> Event: ...
@overload
def event(type: Literal["tool:approval"], data: ToolApprovalData) -> Event: ...
@overload
def event(type: Literal["tool:progress"], data: ToolProgressData) -> Event: ...
@overload
def event(type: Literal["chat:title"], data: TitleData) -> Event: ...
@overload
def event(type: Literal["chat:tags"], data: TagsData) -> Event: ...
@overload
def event(type: Literal["chat:message:follow_ups"], data: FollowUpsData) -> Event: ...
@overload
def event(type: Literal["chat:outlet"], data: OutletData) -> Event: ...
@overload
def event(type: Literal["chat:tasks:cancel"], data: TasksCancelData) -> Event: ...
@overload
def event(type: TerminalType, data: TerminalData) -> Event: ...
@overload
def event(type: Literal["code_interpreter:output"], data: CodeOutputData) -> Event: ...
@overload
def event(type: Literal["chat:turn:resumed"], data: TurnResumedData) -> Event: ...
@overload
def event(type: Literal["chat:message:files"], data: FilesData) -> Event: ...
@overload
def event(type: Literal["chat:message"], data: ReplaceData) -> Event: ...
@overload
def event(type: Literal["chat:snapshot"], data: SnapshotData) -> Event: ...
def event(type: str, data: Mapping[str, Any]) -> Event:
    """An `Event` whose payload mypy checks against its type's (`PAYLOADS`).

    The payload is kept as given (a TypedDict is a plain dict at run time): no copy.
    """
    return Event(type, cast(dict[str, Any], data))
