"""The small interfaces the engine depends on; adapters implement them.

The engine never imports a concrete model client, store or bus: it sees these
Protocols, and `toolrelay.testing` ships a fake for each.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Literal, Protocol, runtime_checkable

from toolrelay.core.events import Event
from toolrelay.core.formats.content import BodyFormat
from toolrelay.core.formats.transcript import ChatReplay
from toolrelay.core.items import Item
from toolrelay.errors import ConfigError

Message = dict[str, Any]
EventEmitter = Callable[[dict[str, Any]], Awaitable[None]]
EventCaller = Callable[[dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What the engine asks a model client for, in provider-neutral terms."""

    messages: Sequence[Message]
    """Chat Completions-style history (system, user, assistant, tool …)."""
    output: Sequence[Item] = ()
    """Items of this turn so far; clients convert them with `core.formats.transcript`."""
    tools: Sequence[Mapping[str, Any]] = ()
    """OpenAI function tool specs `{type: function, function: {name, description, parameters}}`."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Extra body parameters (temperature, max_tokens …) passed through."""
    previous_response_id: str | None = None
    """Responses API stateful continuation (R14)."""
    new_items_from: int = 0
    """With `previous_response_id`: index in `output` where this iteration's new items start."""
    replay: ChatReplay | None = None
    """The turn's cache of `output` converted to Chat Completions messages, passed on every
    call of one turn so each converts only the new items; None converts them all."""


@runtime_checkable
class ModelStream(Protocol):
    """One upstream response being read: raw body chunks, closed on exit."""

    format: BodyFormat
    """Body framing for `core.stream.reader.BodyReader`: `sse`, `ndjson` or `json`."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class ModelClient(Protocol):
    """Opens one model response; retries before the first byte are its business."""

    async def open(self, request: ModelRequest) -> ModelStream: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model and the runner need to know about a tool."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    timeout: float | None = None
    """Seconds; None means the run's default per-call timeout."""
    sequential: bool = False
    """Run alone, never concurrently with other calls of the batch."""
    requires_approval: bool = False
    kind: Literal["server", "client", "mcp"] = "server"
    """`client` tools are executed by the client through `execute:tool` (R9)."""
    filter_arguments: bool = True
    """Drop keys not in `parameters.properties` before the call (R8; MCP tools keep theirs)."""
    validates_arguments: bool = False
    """The tool checks its own arguments (pydantic for `@tool`): skip the JSON-schema pass."""
    idempotent: bool = False
    """Running it twice with the same arguments does what running it once does: a call cut
    by a dead server is run again when its turn resumes (`engine.checkpoint`); any other
    gets a result saying it may or may not have taken effect."""

    def openai_spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(slots=True)
class ToolContext:
    """Context a tool may ask for by declaring `__messages__`, `__user__` … parameters."""

    messages: Sequence[Message] = ()
    files: Sequence[Mapping[str, Any]] = ()
    user: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    chat_id: str | None = None
    message_id: str | None = None
    event_emitter: EventEmitter | None = None
    event_call: EventCaller | None = None
    call_id: str | None = None
    """Set per call by the runner: progress events name the call they belong to."""
    model: Mapping[str, Any] | None = None
    """The model answering (`__model__`): `{id, name, owned_by, …}`."""
    request: Any = None
    """A request-like object (`__request__`): the HTTP request that started the turn,
    secrets stripped (the server's `RequestInfo`); None outside a server."""
    tools: Mapping[str, Any] = field(default_factory=dict)
    """The turn's tools (`__tools__`): name → `{spec, callable}`, as Open WebUI passes them."""


@runtime_checkable
class Tool(Protocol):
    """A callable tool. Whatever it returns is normalised by `core.tools.results`."""

    @property
    def spec(self) -> ToolSpec: ...

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> Any: ...


def tools_by_name(groups: Iterable[tuple[str, Iterable[Tool]]]) -> dict[str, Tool]:
    """Tools keyed by the name the model calls them by: the one place names are checked.

    `groups` pairs each batch of tools with where it came from (a file, a module,
    `Relay`'s list); a name given twice is a `ConfigError` naming both places,
    since the model could not tell the two tools apart.
    """
    found: dict[str, Tool] = {}
    where: dict[str, str] = {}
    for source, tools in groups:
        for item in tools:
            name = item.spec.name
            if name in found:
                first = where[name]
                if first == source:
                    raise ConfigError(f"{source!r} defines two tools named {name!r}")
                raise ConfigError(f"tools: {name!r} is defined by both {first!r} and {source!r}")
            found[name] = item
            where[name] = source
    return found


@runtime_checkable
class ToolSource(Protocol):
    """Where a set of tools lives: an MCP server, an OpenAPI server, a tool file.

    `list()` may start the source (lazily) and is called before every turn, so
    it answers from a cache while nothing changed; a source that cannot start
    raises, and the engine reports it and goes on with the other tools.
    """

    name: str

    async def list(self) -> Sequence[Tool]: ...

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> Any: ...

    async def aclose(self) -> None: ...


class EventSink(Protocol):
    """Receives the turn's events in order (UI, SSE, Redis log, a list in tests)."""

    async def emit(self, event: Event) -> None: ...


class ChatStore(Protocol):
    """Saves assistant turns: once at the end (and on error/cancel), never per token."""

    async def save_turn(self, chat_id: str, message_id: str, turn: Mapping[str, Any]) -> None: ...

    async def load_messages(self, chat_id: str) -> list[Message]: ...


ToolLike = Tool | ToolSource | Callable[..., Any] | str | PathLike[str]
"""What a user may list in `Relay(model, tools=[…])`. The engine's `Relay` takes
`Tool`s and `ToolSource`s; `toolrelay.Relay` also turns functions and tool-file
paths into them (the engine knows no adapters)."""
