"""`toolrelay chat "…"`: run one turn of the loop from the terminal and show it live.

Owns turning flags into a model client, tools and limits (a configured route,
or `--base-url` + `--model`), driving `Relay.stream`, and choosing the output:
JSON lines (`--json`), a live `rich` view on a terminal, or plain lines when
stdout is not one. The drawing itself is `cli.render.Renderer`.

Exit codes: 0 completed, 1 failed or capped, 2 bad configuration, 130 Ctrl-C
(the turn is cancelled: `Relay.stream` closes the upstream and saves the
partial turn before the interrupt propagates).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Annotated, Any, Protocol

import orjson
import typer
from rich.console import Console
from rich.live import Live
from rich.text import Text

from toolrelay.cli.render import Renderer
from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.engine.interfaces import Message, ModelClient, Tool, ToolSource
from toolrelay.engine.limits import RunLimits
from toolrelay.errors import ConfigError, ToolrelayError

__all__ = ["Api", "ChatSetup", "chat", "exit_code"]


class Api(StrEnum):
    chat = "chat"
    responses = "responses"
    ollama = "ollama"


@dataclass(slots=True)
class ChatSetup:
    """Everything one `chat` run needs; `close` releases the clients."""

    model: ModelClient
    tools: list[Tool | ToolSource]
    limits: RunLimits
    messages: list[Message]
    close: Callable[[], Awaitable[None]]
    filters: list[Any] = dataclasses.field(default_factory=list)
    approve: Callable[[str, Mapping[str, Any]], tuple[bool, str | None]] | None = None
    """Answers `tool:approval`: (approved, reason). None rejects."""


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


def chat(
    prompt: Annotated[str, typer.Argument(help="What to ask the model.")],
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", help="A configured route, or the model name with --base-url."
        ),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="Talk to this server directly.")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option("--api-key", envvar="OPENAI_API_KEY", show_envvar=True)
    ] = None,
    api: Annotated[Api, typer.Option("--api", help="Wire API with --base-url.")] = Api.chat,
    tools: Annotated[
        list[Path] | None,
        typer.Option("--tools", help="A Python or Open WebUI tool file (repeatable)."),
    ] = None,
    mcp: Annotated[
        list[str] | None,
        typer.Option(
            "--mcp", help='An MCP server: a command line ("npx -y pkg .") or an http(s) URL.'
        ),
    ] = None,
    openapi: Annotated[
        list[str] | None, typer.Option("--openapi", help="An OpenAPI tool server's base URL.")
    ] = None,
    system: Annotated[str | None, typer.Option("--system", help="A system prompt.")] = None,
    max_iterations: Annotated[
        int | None, typer.Option("--max-iterations", help="Tool-call rounds (-1: no cap).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every event as one JSON line.")
    ] = False,
    config: Annotated[Path | None, typer.Option("--config", help="A toolrelay.toml.")] = None,
    approve: Annotated[
        bool | None,
        typer.Option(
            "--approve/--reject",
            help="Answer tools that need approval without asking (default: ask on a terminal, "
            "else reject).",
        ),
    ] = None,
) -> None:
    """Ask the model once, run its tool calls, and show the loop as it happens."""
    err = Console(stderr=True, soft_wrap=True)
    try:
        setup = build_setup(
            prompt,
            model=model,
            base_url=base_url,
            api_key=api_key,
            api=api,
            tool_files=tools or [],
            servers=[*(("mcp", m) for m in mcp or []), *(("openapi", u) for u in openapi or [])],
            system=system,
            max_iterations=max_iterations,
            config=config,
        )
    except ConfigError as exc:
        err.print(Text.assemble(("error:", "red"), f" {exc}"))
        raise typer.Exit(2) from None
    output: Output = JSONOutput() if as_json else RichOutput(Console())
    setup.approve = approver(approve, interactive=sys.stdin.isatty() and not as_json)
    try:
        status = asyncio.run(drive(setup, output))
    except KeyboardInterrupt:
        err.print("[yellow]cancelled[/]")
        raise typer.Exit(130) from None
    except ToolrelayError as exc:
        err.print(Text.assemble(("error:", "red"), f" {exc}"))
        raise typer.Exit(1) from None
    raise typer.Exit(exit_code(status))


def exit_code(status: str | None) -> int:
    """0 only for a completed turn; no final event at all is a failure too."""
    return 0 if status == "completed" else 1


def build_setup(
    prompt: str,
    *,
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    api: Api,
    tool_files: Sequence[Path],
    system: str | None,
    servers: Sequence[tuple[str, str]] = (),
    max_iterations: int | None,
    config: Path | None,
) -> ChatSetup:
    """Flags → client, tools, limits and messages; `ConfigError` says what is wrong."""
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": prompt})
    file_tools = flag_sources(tool_files, servers)
    if base_url is not None:
        if not model:
            raise ConfigError("--model NAME is required with --base-url")
        from toolrelay.config import load_settings

        limits = _limits(load_settings(config).limits.to_run_limits(), max_iterations)
        client = direct_client(api, base_url=base_url, model=model, api_key=api_key)
        close = _closing(file_tools, client.aclose)
        return ChatSetup(client, file_tools, limits, messages, close)
    return _route_setup(model, config, file_tools, messages, max_iterations)


def flag_sources(
    tool_files: Sequence[Path], servers: Sequence[tuple[str, str]]
) -> list[Tool | ToolSource]:
    """`--tools`, `--mcp` and `--openapi` as tool sources (servers start on first use)."""
    import shlex

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


def _closing(
    tools: Sequence[Tool | ToolSource], then: Callable[[], Awaitable[None]]
) -> Callable[[], Awaitable[None]]:
    """Close the flag-made sources (ending MCP processes), then the rest."""

    async def close() -> None:
        for item in tools:
            if isinstance(item, ToolSource):
                await item.aclose()
        await then()

    return close


def direct_client(api: Api, *, base_url: str, model: str, api_key: str | None) -> ModelClient:
    """A client for `--base-url`, by wire API."""
    from toolrelay.adapters.models import Ollama, OpenAIChat, OpenAIResponses

    match api:
        case Api.chat:
            return OpenAIChat(base_url=base_url, model=model, api_key=api_key)
        case Api.responses:
            return OpenAIResponses(base_url=base_url, model=model, api_key=api_key)
        case Api.ollama:
            return Ollama(base_url=base_url, model=model, api_key=api_key)


def _route_setup(
    route: str | None,
    config: Path | None,
    file_tools: list[Tool | ToolSource],
    messages: list[Message],
    max_iterations: int | None,
) -> ChatSetup:
    """A route from the server config (the first one when `--model` is not given)."""
    from toolrelay.config import build_registry, load_settings, setup_hint

    registry = build_registry(load_settings(config))
    if not registry.routes:
        raise ConfigError(f"no model configured: pass --base-url URL --model NAME\n{setup_hint()}")
    name = route or next(iter(registry.routes))
    if name not in registry.routes:
        known = ", ".join(sorted(registry.routes))
        raise ConfigError(f"--model {name!r}: no such route (configured: {known})")
    tools = [*registry.tools_for(name), *file_tools]
    limits = _limits(registry.limits, max_iterations)
    return ChatSetup(registry.client_for(name), tools, limits, messages, registry.aclose)


def _limits(base: RunLimits, max_iterations: int | None) -> RunLimits:
    if max_iterations is None:
        return base
    return dataclasses.replace(base, max_iterations=max_iterations)


async def drive(setup: ChatSetup, output: Output) -> str | None:
    """Stream one turn into `output`; the final event's status, or None if none came."""
    from toolrelay.engine.relay import Relay

    relay = Relay(setup.model, setup.tools, limits=setup.limits, filters=setup.filters, tasks=())
    status: str | None = None
    try:
        with output:
            async for event in relay.stream(setup.messages):
                output.feed(event)
                if event.type == ev.TOOL_APPROVAL:
                    await _answer_approval(relay, setup, event)
                if event.type == ev.CHAT_COMPLETION and event.data.get("done"):
                    status = str(event.data.get("status", "completed"))
    finally:
        await setup.close()
    return status


async def _answer_approval(relay: Any, setup: ChatSetup, event: Event) -> None:
    data = event.data
    if setup.approve is None:
        relay.approve(data["id"], False, reason="nobody to ask")
        return
    arguments = data.get("arguments") or {}
    ok, reason = await asyncio.to_thread(setup.approve, str(data.get("name")), arguments)
    relay.approve(data["id"], ok, reason=reason)


class Output(Protocol):
    """Where events go: a context manager that is fed every event."""

    def __enter__(self) -> Output: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def feed(self, event: Event) -> None: ...


class JSONOutput:
    """`--json`: each event as one `{"type", "data"}` line on stdout, nothing else."""

    def __enter__(self) -> JSONOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stdout.flush()

    def feed(self, event: Event) -> None:
        out = sys.stdout.buffer
        out.write(orjson.dumps(event.to_dict(), default=str) + b"\n")
        out.flush()


class RichOutput:
    """A `Live` view on a terminal; elsewhere each block is printed once it is complete."""

    def __init__(self, console: Console, renderer: Renderer | None = None) -> None:
        self.console = console
        self.renderer = renderer or Renderer()
        self.live: Live | None = None

    def __enter__(self) -> RichOutput:
        if self.console.is_terminal:
            self.live = Live(
                self.renderer.render(),
                console=self.console,
                refresh_per_second=12,
                transient=True,
            )
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)
            self.live = None
        self._print_finished()

    def feed(self, event: Event) -> None:
        self.renderer.feed(event)
        self._print_finished()
        if self.live is not None:
            self.live.update(self.renderer.render())

    def _print_finished(self) -> None:
        console = self.live.console if self.live is not None else self.console
        for renderable in self.renderer.take_finished():
            console.print(renderable)
