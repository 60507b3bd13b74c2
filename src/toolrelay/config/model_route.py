"""`ModelRoute`: one `[[models]]` entry, a name clients send and the upstream it maps to.

Split out of `config.settings` (which holds the whole `Settings` and loads it) so
a route's shape (its keys, per-kind defaults and the checks between them) reads
on its own; `config.settings` re-exports `ModelRoute` and `LOCAL_ROUTE`. How a
route talks HTTP (timeouts, retries, size cap) is `config.route_http`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolrelay.config.route_http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    RouteRetries,
    RouteTimeouts,
    parse_size,
)
from toolrelay.core.stream.think_tags import TagConfig

__all__ = ["LOCAL_ROUTE", "ModelRoute"]


_REPLAYS: dict[str, frozenset[str]] = {
    "openai-chat": frozenset({"none", "reasoning_content", "think_tags"}),
    "ollama": frozenset({"none", "thinking", "think_tags"}),
    "openai-responses": frozenset({"none"}),  # reasoning goes back encrypted, or not at all
}


LOCAL_ROUTE = "local"
"""The embedded model's route name (issue 14): its defaults differ where it writes calls as text."""


class ModelRoute(BaseModel):
    """A name clients send as `model`, and the upstream server and model it maps to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    kind: Literal["openai-chat", "openai-responses", "ollama"] = "openai-chat"
    base_url: str
    model: str = Field(min_length=1)
    """Upstream model id; defaults to the route name."""
    api_key_env: str | None = None
    """Name of the env var holding the key, so the key never sits in the file."""
    api_key: str | None = Field(default=None, repr=False)
    """The key itself: local development only (the registry logs a warning)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Upstream body params; pinned (a client cannot change them) unless in `overridable`."""
    overridable: list[str] = Field(default_factory=list)
    """Keys of `params` a client's request may override."""
    allow_params: list[str] = Field(default_factory=list)
    """Extra request keys passed upstream as sent: non-standard ones (vLLM's `top_k`,
    `chat_template_kwargs` …) and `store`/`service_tier`; any other such key is a 400."""
    tools: list[str] | None = None
    """Tool names or tool-server names this route may use; None means every configured tool."""
    reasoning_replay: Literal["none", "reasoning_content", "think_tags", "thinking"] = "none"
    """How reasoning goes back to the model; unset: `thinking` for Ollama, else `none`."""
    stateful: bool = False
    text_tool_calls: bool = False
    """A call to an offered tool that the model writes as text in its answer (JSON, a
    ```json fence, `<tool_call>` tags, `functions.X:{…}`) is run as a real call
    (`core.text_calls.parse`), whatever the route's `kind`, except with `stateful` (refused).
    Unset: on for the route named `local` (the embedded small model writes its calls that
    way), off for every other route."""
    tool_choice_step: bool = False
    """Before a turn's first model call the model is asked, without tools, which of the
    offered tools the user's message needs (at most `max_tools_per_call`, or none), and the
    turn is offered only those (`engine.tool_select`): a small model offered many tools
    otherwise answers with JSON and calls a tool for "Say hi.". Unset: on for the route
    named `local`, off for every other route."""
    max_tools_per_call: int = Field(default=2, ge=1)
    """With `tool_choice_step`: the most tools a turn is offered after the step."""
    prices: dict[str, float] | None = None
    """`{input = …, output = …}` per million tokens: each turn's `cost` (budgets, /metrics)."""
    events: Literal["toolrelay", "openwebui"] = "toolrelay"
    """The chat API's event stream for chats on this route: `openwebui` speaks Open WebUI's
    names and payloads (`core.formats.openwebui_events`); a request's `format` wins."""
    vision: bool = True
    """The model reads images: an image attached to a message goes to it as an image part;
    false: only its name is said."""
    code_interpreter: bool = True
    """False keeps this route's model from running code (`[code_interpreter]`)."""
    coalesce_ms: float | None = Field(default=None, ge=0)
    """Window in which this route's streamed deltas are merged (0: every chunk as it
    comes); unset: `[limits] coalesce_ms`. A request's `stream_options.coalesce_ms` wins."""
    context_tokens: int | None = Field(default=None, ge=512)
    """Tokens the model reads (its context window). A longer history is trimmed before
    each model call (oldest tool results, then oldest exchanges; docs/configuration.md)
    instead of failing at the provider. Unset: nothing is trimmed."""
    timeouts: RouteTimeouts = Field(default_factory=RouteTimeouts)
    """`{connect, first_byte, idle, total}` in seconds (`config.route_http`)."""
    retries: RouteRetries = Field(default_factory=RouteRetries)
    """`{attempts, backoff}`: tries before an answer's first byte."""
    max_response_bytes: int = Field(default=DEFAULT_MAX_RESPONSE_BYTES, ge=0)
    """A model answer past this is cut, the turn ending with an error and its partial
    output kept; bytes or a size like "64 MiB"; 0: no cap."""
    record: Path | None = None
    """Write every exchange with the upstream (request, status, headers, the raw body)
    as a fixture in this directory, secrets scrubbed (docs/development.md); unset:
    `record` of the settings (`toolrelay serve|chat --record DIR`)."""
    record_scrub: list[str] = Field(default_factory=list)
    """More JSON body fields (any depth) the recording writes as `[scrubbed]`, beside
    `api_key`, `token`, `password` and the like."""
    reasoning_tags: bool | list[str] | None = None
    """Inline reasoning tags in this model's text (SPEC R5, Open WebUI's model param):
    false turns tag detection off (`<think>` stays text), `["<start>", "<end>"]` is the
    one pair looked for instead of the defaults; unset or true: the default tags."""

    @field_validator("reasoning_tags")
    @classmethod
    def _tag_pair(cls, value: bool | list[str] | None) -> bool | list[str] | None:
        if isinstance(value, list) and (len(value) != 2 or not all(value)):
            raise ValueError("must be false, true, or two non-empty strings [start, end]")
        return value

    def tag_config(self) -> TagConfig:
        """The inline tags this route's turns look for (`reasoning_tags`)."""
        return TagConfig.from_param(self.reasoning_tags)

    @model_validator(mode="before")
    @classmethod
    def _model_defaults_to_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("model") and "name" in data:
            data = {**data, "model": data["name"]}
        if isinstance(data, dict) and "reasoning_replay" not in data:
            replay = "thinking" if data.get("kind") == "ollama" else "none"
            data = {**data, "reasoning_replay": replay}
        if isinstance(data, dict) and "text_tool_calls" not in data:
            data = {**data, "text_tool_calls": data.get("name") == LOCAL_ROUTE}
        if isinstance(data, dict) and "tool_choice_step" not in data:
            data = {**data, "tool_choice_step": data.get("name") == LOCAL_ROUTE}
        return data

    @field_validator("max_response_bytes", mode="before")
    @classmethod
    def _size(cls, value: Any) -> Any:
        return parse_size(value)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https:// (got {value!r})")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _options_fit_kind(self) -> ModelRoute:
        """Options a client class would silently ignore are mistakes; say so."""
        if self.api_key is not None and self.api_key_env is not None:
            raise ValueError("set api_key_env or api_key, not both")
        if self.stateful and self.kind != "openai-responses":
            raise ValueError("stateful is only for kind 'openai-responses'")
        if self.stateful and self.text_tool_calls:
            raise ValueError(
                "text_tool_calls cannot work with stateful: the upstream keeps the model's "
                "answer as text, so the results of calls made from it match no call there; "
                "set stateful = false"
            )
        if self.reasoning_replay not in _REPLAYS[self.kind]:
            raise ValueError(
                f"reasoning_replay {self.reasoning_replay!r} is not for kind {self.kind!r}"
            )
        return self
