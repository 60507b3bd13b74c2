"""`toolrelay chat "…"`: run one turn of the loop from the terminal and show it live.

Owns the command's flags, where the prompt comes from (the argument, or
stdin when it is `-` or missing and stdin is not a terminal), and the choice
of output: JSON lines (`--json`), the model's raw text on stdout when stdout
is not a terminal or with `--raw` (the rest on stderr), else a live `rich`
view. The model is chosen in `cli.chat_setup`, the drawing is
`cli.render.Renderer`, the streams are `cli.outputs`.

Exit codes: 0 completed, 1 failed or capped, 2 bad configuration, 130 Ctrl-C
(the turn is cancelled: `Relay.stream` closes the upstream and saves the
partial turn before the interrupt propagates).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from toolrelay.cli.chat_setup import (
    Api,
    ChatSetup,
    ModelChoice,
    approver,
    build_setup,
    flag_sources,
)
from toolrelay.cli.outputs import JSONOutput, Output, RawOutput, RichOutput
from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.engine.interfaces import Message
from toolrelay.errors import ConfigError, ToolrelayError

__all__ = ["chat", "drive", "exit_code", "read_prompt"]

EXAMPLES = """
Examples:

  toolrelay chat "what is 17*23?" --base-url http://localhost:11434/v1 --model qwen3

  echo "summarise this" | toolrelay chat --model gpt-mini > answer.md

  git diff | toolrelay chat - --system "Review this diff."

  toolrelay chat "and in Lyon?" -c            # continue the last conversation

  toolrelay chat "hi" --json | jq .type       # every event as one JSON line
"""


def chat(
    prompt: Annotated[
        str | None,
        typer.Argument(
            metavar="[PROMPT]",
            help="What to ask the model; '-' (or nothing, when stdin is not a terminal) "
            "reads it from stdin.",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="A configured route; with --base-url, or OPENAI_BASE_URL set, the "
            "upstream model's name.",
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="Talk to this OpenAI-style server directly."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="OPENAI_API_KEY",
            show_envvar=True,
            help="The model server's key (sent as 'Authorization: Bearer'), with "
            "--base-url or OPENAI_BASE_URL.",
        ),
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
    raw: Annotated[
        bool,
        typer.Option(
            "--raw",
            help="Only the model's text on stdout, unrendered (the default when stdout "
            "is not a terminal); tool calls and usage go to stderr.",
        ),
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
    """Ask the model, run its tool calls, and show the loop as it happens."""
    err = Console(stderr=True, soft_wrap=True)
    choice = ModelChoice(model, base_url, api_key, api, config, max_iterations)
    servers = [*(("mcp", m) for m in mcp or []), *(("openapi", u) for u in openapi or [])]
    try:
        text = read_prompt(prompt)
        setup = build_setup(choice, flag_sources(tools or [], servers))
    except ConfigError as exc:
        err.print(Text.assemble(("error:", "red"), f" {exc}"))
        raise typer.Exit(2) from None
    setup.approve = approver(approve, interactive=sys.stdin.isatty() and not as_json)
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": text})
    try:
        status = asyncio.run(drive(setup, messages, choose_output(as_json=as_json, raw=raw)))
    except KeyboardInterrupt:
        err.print("[yellow]cancelled[/]")
        raise typer.Exit(130) from None
    except ToolrelayError as exc:
        err.print(Text.assemble(("error:", "red"), f" {exc}"))
        raise typer.Exit(1) from None
    raise typer.Exit(exit_code(status))


def read_prompt(prompt: str | None) -> str:
    """The argument, or stdin for `-` (or no argument when stdin is not a terminal)."""
    if prompt is not None and prompt != "-":
        return prompt
    if prompt is None and sys.stdin.isatty():
        raise ConfigError("no prompt: give one (\"toolrelay chat 'hi'\") or pipe it on stdin")
    text = sys.stdin.read().rstrip("\n")
    if not text.strip():
        raise ConfigError("no prompt: stdin was empty")
    return text


def choose_output(*, as_json: bool, raw: bool) -> Output:
    """`--json`; raw text when asked or when stdout is not a terminal; else the rich view."""
    if as_json:
        return JSONOutput()
    if raw or not sys.stdout.isatty():
        return RawOutput(Console(stderr=True, soft_wrap=True))
    return RichOutput(Console())


def exit_code(status: str | None) -> int:
    """0 only for a completed turn; no final event at all is a failure too."""
    return 0 if status == "completed" else 1


async def drive(setup: ChatSetup, messages: list[Message], output: Output) -> str | None:
    """Stream one turn into `output`; the final event's status, or None if none came."""
    from toolrelay.engine.relay import Relay

    relay = Relay(setup.model, setup.tools, limits=setup.limits, filters=setup.filters, tasks=())
    try:
        return await run_turn(relay, setup, messages, output)
    finally:
        await setup.close()


async def run_turn(
    relay: Any, setup: ChatSetup, messages: list[Message], output: Output, **kwargs: Any
) -> str | None:
    """One turn of `relay` into `output`, answering approvals; its final status."""
    status: str | None = None
    with output:
        async for event in relay.stream(messages, **kwargs):
            output.feed(event)
            if event.type == ev.TOOL_APPROVAL:
                await _answer_approval(relay, setup, event)
            if event.type == ev.CHAT_COMPLETION and event.data.get("done"):
                status = str(event.data.get("status", "completed"))
    return status


async def _answer_approval(relay: Any, setup: ChatSetup, event: Event) -> None:
    data = event.data
    if setup.approve is None:
        relay.approve(data["id"], False, reason="nobody to ask")
        return
    arguments = data.get("arguments") or {}
    ok, reason = await asyncio.to_thread(setup.approve, str(data.get("name")), arguments)
    relay.approve(data["id"], ok, reason=reason)
