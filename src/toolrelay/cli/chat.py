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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

from toolrelay.cli.chat_setup import Api, ModelChoice, approver, configured_files, flag_sources
from toolrelay.cli.config_flag import NoConfig, config_choice, say_config
from toolrelay.cli.conversation import LAST, ChatRun, Resume
from toolrelay.cli.outputs import JSONOutput, Output, RawOutput, RichOutput
from toolrelay.errors import ConfigError, ToolrelayError

if TYPE_CHECKING:
    from toolrelay.config.settings import ConfigChoice

__all__ = ["chat", "choose_output", "exit_code", "read_prompt"]

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
            metavar="PROMPT",
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
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", metavar="FILE", help="A toolrelay.toml (default: ./toolrelay.toml)."
        ),
    ] = None,
    no_config: NoConfig = False,
    approve: Annotated[
        bool | None,
        typer.Option(
            "--approve/--reject",
            help="Answer tools that need approval without asking (default: ask on a terminal, "
            "else reject).",
        ),
    ] = None,
    resume_last: Annotated[
        bool,
        typer.Option("--continue", "-c", help="Continue the most recent conversation."),
    ] = False,
    cid: Annotated[
        str | None,
        typer.Option(
            "--cid", help="Continue this conversation (an id from 'toolrelay chats list')."
        ),
    ] = None,
    no_save: Annotated[
        bool,
        typer.Option("--no-save", "-n", help="Do not save the conversation in the data directory."),
    ] = False,
    record: Annotated[
        Path | None,
        typer.Option(
            "--record",
            metavar="DIR",
            help="Write every exchange with the model server into DIR as test fixtures "
            "(secrets scrubbed; docs/development.md).",
        ),
    ] = None,
    code: Annotated[
        bool,
        typer.Option(
            "--code",
            help="Let the model run Python in a sandboxed Jupyter kernel (execute_code; "
            "limits from \\[code_interpreter]).",  # escaped: rich reads [x] as markup
        ),
    ] = False,
) -> None:
    """Ask the model, run its tool calls, and show the loop as it happens.

    With no prompt on a terminal it opens an interactive session: each line is a
    turn, /model NAME switches the model, /exit or Ctrl-D leaves, Ctrl-C stops
    the running turn. Conversations are saved in the server's database (see
    'toolrelay chats'; -c continues the last one).
    """
    err = Console(stderr=True, soft_wrap=True)
    servers = [*(("mcp", m) for m in mcp or []), *(("openapi", u) for u in openapi or [])]
    session = prompt is None and sys.stdin.isatty() and not as_json
    resume = Resume(chat_id=LAST if resume_last else cid, save=not no_save)
    ask = approver(approve, interactive=sys.stdin.isatty() and not as_json)
    try:
        cfg = config_choice(config, no_config)
        choice = ModelChoice(model, base_url, api_key, api, cfg, max_iterations, code, record)
        text = "" if session else read_prompt(prompt)
        files = _new_files(tools or [], choice, err)
        file_tools = flag_sources(files, servers)
    except ConfigError as exc:
        raise _fail(err, exc, 2) from None

    async def open_run() -> ChatRun:
        return await ChatRun.open(choice, file_tools, system=system, resume=resume, approve=ask)

    try:
        if session:
            from toolrelay.cli.session import interactive

            output = lambda: choose_output(as_json=False, raw=raw)  # noqa: E731
            raise typer.Exit(interactive(open_run, output, Console(), _history_file(cfg)))
        status = asyncio.run(_one_turn(open_run, text, choose_output(as_json=as_json, raw=raw)))
    except ConfigError as exc:
        raise _fail(err, exc, 2) from None
    except KeyboardInterrupt:
        err.print("[yellow]cancelled[/]")
        raise typer.Exit(130) from None
    except ToolrelayError as exc:
        raise _fail(err, exc, 1) from None
    raise typer.Exit(exit_code(status))


async def _one_turn(
    open_run: Callable[[], Awaitable[ChatRun]], text: str, output: Output
) -> str | None:
    run = await open_run()
    if run.warning:
        Console(stderr=True, soft_wrap=True).print(run.warning, style="yellow", markup=False)
    try:
        return await run.turn(text, output)
    finally:
        await run.aclose()


def _fail(err: Console, exc: Exception, code: int) -> typer.Exit:
    err.print(Text.assemble(("error:", "red"), f" {exc}"))
    return typer.Exit(code)


def _history_file(config: ConfigChoice) -> Path | None:
    """The prompt history lives next to the database (when the data directory exists)."""
    from toolrelay.config import load_settings

    try:
        return load_settings(config).data_dir / "chat_history"
    except ConfigError:
        return None


def _new_files(files: list[Path], choice: ModelChoice, err: Console) -> list[Path]:
    """Says which config file was read; the `--tools` files it does not load already
    (the same file twice would hide each of its tools behind itself)."""
    from toolrelay.config import load_settings

    try:
        settings = load_settings(choice.config)
    except ConfigError:
        return files  # said when the model is built, with the rest of the setup
    say_config(settings, err)
    if choice.base_url is not None:  # --base-url: the config's tools are not offered
        return files
    loaded = configured_files(settings)
    for path in files:
        if path.resolve() in loaded:
            err.print(f"{path}: already loaded by the config", markup=False, style="dim")
    return [path for path in files if path.resolve() not in loaded]


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
