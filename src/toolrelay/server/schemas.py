"""Request bodies of the HTTP API: lenient where OpenAI is (extra keys pass), strict on types."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


def _no_nul(value: str) -> str:
    """PostgreSQL text cannot hold NUL; refuse it here rather than fail at the save."""
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


Name = Annotated[str, Field(max_length=255), AfterValidator(_no_nul)]
"""A user, key or model name: what the database's name columns hold."""
Title = Annotated[str, Field(max_length=500), AfterValidator(_no_nul)]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ChatMessageIn(_Open):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class FunctionDef(_Open):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ChatTool(_Open):
    type: Literal["function"] = "function"
    function: FunctionDef


class StreamOptions(_Open):
    include_usage: bool = False
    coalesce_ms: float | None = Field(default=None, ge=0, le=60_000)
    """toolrelay's: merge deltas within this window (0: every chunk); unset: the route's."""


class ChatCompletionRequest(_Open):
    model: str
    messages: list[ChatMessageIn] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[ChatTool] | None = None
    toolrelay_events: bool = False
    """Opt-in: server-side tool activity as extra chunks (`choices: []`, key `toolrelay`)."""
    features: dict[str, Any] | None = None
    """toolrelay's extension: `{"code_interpreter": false}` keeps this request from running code."""
    files: list[str | dict[str, Any]] | None = None
    """toolrelay's extension: uploaded files (`POST /api/files`) by id, or `{id}`."""
    sources: list[dict[str, Any]] | None = None
    """toolrelay's extension: retrieved sources `{source, document[], metadata[]}` (R15)."""


class ResponseTool(_Open):
    type: str = "function"
    name: str | None = None
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ResponsesRequest(_Open):
    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    stream: bool = False
    tools: list[ResponseTool] | None = None
    previous_response_id: str | None = None
    stream_options: StreamOptions | None = None
    files: list[str | dict[str, Any]] | None = None
    """toolrelay's extension, as on chat completions."""
    sources: list[dict[str, Any]] | None = None


class ChatCreate(_Open):
    title: Title | None = None
    model: Name | None = None


class MessageCreate(_Open):
    content: str | list[dict[str, Any]]
    model: Name | None = None
    tools: list[ChatTool] | None = None
    """Client-side tools: their calls arrive as `execute:tool` events."""
    features: dict[str, Any] | None = None
    """What this turn asks for (`{"code_interpreter": false}` turns code off); unset: all on."""
    files: list[str | dict[str, Any]] | None = None
    """Uploaded files (`POST /api/files`) sent with this message, by id or `{id}`."""
    sources: list[dict[str, Any]] | None = None
    """Retrieved sources `{source, document[], metadata[]}`, injected once per model call (R15)."""


class BranchTurn(_Open):
    """A regenerated or continued answer (`server.branches`)."""

    message_id: str | None = Field(None, max_length=64)
    """The answer; unset: the chat's current branch's last."""
    model: Name | None = None
    tools: list[ChatTool] | None = None
    features: dict[str, Any] | None = None


class BranchSwitch(_Open):
    message_id: str = Field(min_length=1, max_length=64)
    """A message of the branch to show: the branch goes down to its newest answer."""


class ToolResultIn(_Open):
    id: str = Field(min_length=1)
    result: Any = None
    headers: dict[str, str] | None = None
    """HTTP-style headers of the result (`Content-Disposition: inline` HTML → an embed, R10)."""
    approved: bool | None = None
    """Set for an approval answer (`tool:approval`) instead of a result."""
    reason: str | None = None


class SessionCreate(_Open):
    key: str = Field(min_length=1, max_length=512)
    """The API key, posted once by the sign-in form; the answer sets the session cookie."""


class ChatUpdate(_Open):
    title: Title | None = None


class KeyCreate(_Open):
    name: Name = ""
    user: Name | None = None
    """Create the key for a new user of this name (default: the caller)."""
    admin: bool = False
