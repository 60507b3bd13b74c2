"""Flags of `toolrelay chat` turned into a model client, tools and limits.

Owns the three ways to name a model: a route of the server config
(`--model ROUTE`, the first route by default), a server given directly
(`--base-url URL --model NAME`), and, when `OPENAI_BASE_URL` is set, any
other `--model NAME` as that server's upstream model. Every problem is a
`ConfigError` whose message the command prints on one line (exit 2).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolrelay.core.stream.think_tags import TagConfig
from toolrelay.engine.interfaces import ModelClient, Tool, ToolSource
from toolrelay.engine.limits import RunLimits
from toolrelay.errors import ConfigError

if TYPE_CHECKING:
    from toolrelay.config import Settings
    from toolrelay.config.settings import ConfigChoice

__all__ = [
    "Api",
    "ChatSetup",
    "ModelChoice",
    "approver",
    "build_setup",
    "close_sources",
    "configured_files",
    "flag_sources",
]


class Api(StrEnum):
    chat = "chat"
    responses = "responses"
    ollama = "ollama"


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """How the user named the model (the flags); `with_model` is `/model NAME`."""

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    api: Api = Api.chat
    config: ConfigChoice = None
    """`--config FILE`, `--no-config` (False) or neither (None)."""
    max_iterations: int | None = None
    code: bool = False
    """`--code`: the model may run Python in a sandboxed Jupyter kernel."""
    record: Path | None = None
    """`--record DIR`: every exchange with the model server written there as a fixture."""

    def with_model(self, model: str) -> ModelChoice:
        return dataclasses.replace(self, model=model)


@dataclass(slots=True)
class ChatSetup:
    """Everything one `chat` run needs; `close` releases the clients."""

    model: ModelClient
    tools: list[Tool | ToolSource]
    limits: RunLimits
    close: Callable[[], Awaitable[None]]
    name: str
    """What the saved turn records as its model: the route, or the upstream model name."""
    filters: list[Any] = dataclasses.field(default_factory=list)
    approve: Callable[[str, Mapping[str, Any]], tuple[bool, str | None]] | None = None
    """Answers `tool:approval`: (approved, reason). None rejects."""
    text_tool_calls: bool = False
    """The route's `text_tool_calls`: calls the model writes as text run as real calls."""
    tool_choice_step: bool = False
    """The route's `tool_choice_step`: the model first picks the tools a turn is offered."""
    max_tools_per_call: int = 2
    tags: TagConfig = dataclasses.field(default_factory=TagConfig)
    """The route's `reasoning_tags`: which inline tags become reasoning."""


def approver(
    decision: bool | None, *, interactive: bool
) -> Callable[[str, Mapping[str, Any]], tuple[bool, str | None]]:
    """`--approve` / `--reject`, else a y/n question on a terminal, else a rejection."""

    def answer(name: str, arguments: Mapping[str, Any]) -> tuple[bool, str | None]:
        if decision is not None:
            return decision, None if decision else "rejected with --reject"
        if not interactive:
            return False, "no terminal to ask for approval (use --approve)"
        from rich.prompt import Confirm

        shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
        return Confirm.ask(f"Run [bold]{name}[/]({shown})?", default=False), None

    return answer


def build_setup(choice: ModelChoice, file_tools: list[Tool | ToolSource]) -> ChatSetup:
    """The model the flags name, with its tools and limits; `ConfigError` says what is wrong.

    `file_tools` (from `flag_sources`) are offered too; the caller closes them
    (`close_sources`), so a `/model` switch keeps them running.
    """
    if choice.base_url is not None:
        if not choice.model:
            raise ConfigError("--model NAME is required with --base-url")
        from toolrelay.config import load_settings
        from toolrelay.config.registry import builtin_source

        settings = load_settings(choice.config)
        base = settings.limits.to_run_limits()
        builtin = builtin_source(settings.builtin_tools)
        client = direct_client(
            choice.api,
            base_url=choice.base_url,
            model=choice.model,
            api_key=choice.api_key,
            record=choice.record,
        )
        limits = _limits(base, choice.max_iterations)
        tools = [*file_tools, *([] if builtin is None else [builtin])]
        return ChatSetup(client, tools, limits, client.aclose, choice.model)
    return _route_setup(choice, file_tools)


def flag_sources(
    tool_files: Sequence[Path], servers: Sequence[tuple[str, str]]
) -> list[Tool | ToolSource]:
    """`--tools`, `--mcp` and `--openapi` as tool sources (servers start on first use)."""
    from toolrelay.config.tool_servers import ToolServer, build_source

    found: list[Tool | ToolSource] = []
    for path in tool_files:
        found.append(build_source(ToolServer(name=path.stem, kind="python", path=str(path))))
    for kind, value in servers:
        if kind == "openapi":
            server = ToolServer(name=value, kind="openapi", url=value)
        elif value.startswith(("http://", "https://")):
            server = ToolServer(name=value, kind="mcp-http", url=value)
        else:
            argv = shlex.split(value)
            if not argv:
                raise ConfigError("--mcp needs a command")
            server = ToolServer(name=value, kind="mcp-stdio", command=argv[0], args=argv[1:])
        found.append(build_source(server))
    return found


def configured_files(settings: Settings) -> set[Path]:
    """The Python tool files the settings load (`tools` and `[[tool_servers]]`), resolved."""
    from toolrelay.config.sources import is_file_ref

    paths = [Path(ref) for ref in settings.tools if is_file_ref(ref)]
    paths += [Path(s.path) for s in settings.tool_servers if s.kind == "python" and s.path]
    return {path.expanduser().resolve() for path in paths}


async def close_sources(tools: Sequence[Tool | ToolSource]) -> None:
    """Close the flag-made sources (ending MCP processes)."""
    for item in tools:
        if isinstance(item, ToolSource):
            await item.aclose()


def direct_client(
    api: Api, *, base_url: str, model: str, api_key: str | None, record: Path | None = None
) -> ModelClient:
    """A client for `--base-url`, by wire API (`record`: `--record DIR`)."""
    from toolrelay.adapters.http.record import Recorder
    from toolrelay.adapters.models import HTTPOptions, Ollama, OpenAIChat, OpenAIResponses

    recorder = None if record is None else Recorder(record, secrets=[api_key or ""])
    http = HTTPOptions(record=recorder)
    match api:
        case Api.chat:
            return OpenAIChat(base_url=base_url, model=model, api_key=api_key, http=http)
        case Api.responses:
            return OpenAIResponses(base_url=base_url, model=model, api_key=api_key, http=http)
        case Api.ollama:
            return Ollama(base_url=base_url, model=model, api_key=api_key, http=http)


def _route_setup(choice: ModelChoice, file_tools: list[Tool | ToolSource]) -> ChatSetup:
    """A route from the server config (the first one when `--model` is not given).

    A name no route has is, with `OPENAI_BASE_URL` set, a model of that server.
    """
    from toolrelay.config import build_registry, load_settings

    settings = load_settings(choice.config)
    if choice.record is not None:
        settings = settings.model_copy(update={"record": choice.record})
    registry = build_registry(settings)
    limits = _limits(registry.limits, choice.max_iterations)
    name = choice.model
    upstream = os.environ.get("OPENAI_BASE_URL", "").strip()
    if name and name not in registry.routes and upstream:
        key = choice.api_key or os.environ.get("OPENAI_API_KEY") or None
        client = direct_client(
            Api.chat, base_url=upstream, model=name, api_key=key, record=choice.record
        )

        async def close() -> None:
            await client.aclose()
            await registry.aclose()

        tools = [*_all_tools(registry), *file_tools]
        return ChatSetup(client, tools, limits, close, name)
    embedded = None
    if not registry.routes:  # as `serve`: the embedded model (`cli.embedded`)
        from toolrelay.cli.embedded import embedded_route

        embedded = embedded_route(settings, registry)  # nothing of the registry runs yet
        from rich.console import Console

        Console(stderr=True, soft_wrap=True).print(
            embedded.notice, markup=False, highlight=False, style="dim"
        )
    name = name or next(iter(registry.routes))
    if name not in registry.routes:
        known = ", ".join(sorted(registry.routes))
        raise ConfigError(
            f"--model {name!r}: no such route (configured: {known}; "
            "set OPENAI_BASE_URL to use any model of that server)"
        )
    tools = [*registry.tools_for(name), *file_tools]
    client = registry.client_for(name)
    route = registry.routes[name]
    close = registry.aclose
    if embedded is not None:
        stop = embedded.close

        async def close() -> None:
            try:
                await registry.aclose()
            finally:
                stop()

    return ChatSetup(
        client,
        tools,
        limits,
        close,
        name,
        text_tool_calls=route.text_tool_calls and (embedded is None or embedded.text_tool_calls),
        # the embedded model of a running server: its turns' step is the server's to take
        tool_choice_step=route.tool_choice_step and (embedded is None or embedded.text_tool_calls),
        max_tools_per_call=route.max_tools_per_call,
        tags=route.tag_config(),
    )


def _all_tools(registry: Any) -> list[Tool | ToolSource]:
    """Every configured tool and tool server, and the built-ins (as views: closing a turn
    never stops them)."""
    return [*registry.tools.values(), *registry.all_sources()]


def _limits(base: RunLimits, max_iterations: int | None) -> RunLimits:
    if max_iterations is None:
        return base
    return dataclasses.replace(base, max_iterations=max_iterations)
