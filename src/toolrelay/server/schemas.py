"""Request bodies of the HTTP API: lenient where OpenAI is (extra keys pass), strict on types."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


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


class ChatCompletionRequest(_Open):
    model: str
    messages: list[ChatMessageIn] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[ChatTool] | None = None
    toolrelay_events: bool = False
    """Opt-in: server-side tool activity as extra chunks (`choices: []`, key `toolrelay`)."""


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


class ChatCreate(_Open):
    title: str | None = Field(default=None, max_length=500)
    model: str | None = None


class MessageCreate(_Open):
    content: str | list[dict[str, Any]]
    model: str | None = None
    tools: list[ChatTool] | None = None
    """Client-side tools: their calls arrive as `execute:tool` events."""


class ToolResultIn(_Open):
    id: str = Field(min_length=1)
    result: Any = None
    headers: dict[str, str] | None = None
    """HTTP-style headers of the result (`Content-Disposition: inline` HTML → an embed, R10)."""
    approved: bool | None = None
    """Set for an approval answer (`tool:approval`) instead of a result."""
    reason: str | None = None


class KeyCreate(_Open):
    name: str = ""
    user: str | None = None
    """Create the key for a new user of this name (default: the caller)."""
    admin: bool = False
