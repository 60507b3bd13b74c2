"""`toolrelay chat` with no prompt on a terminal: an interactive session.

Owns the read-ask loop: a line is a prompt (one turn of the same
conversation, shown live), `/model [NAME]` shows or switches the model,
`/help` lists the commands, `/exit` or Ctrl-D leaves. Ctrl-C during a turn
stops that turn (its partial answer is saved, as the server saves a
cancelled turn) and the session goes on; Ctrl-C at the prompt clears the line.

One `asyncio.Runner` serves the whole session, so the relay's tool servers
start once; its SIGINT handling is what turns Ctrl-C into a cancelled turn.
Line editing and the prompt history (kept in the data directory) come from
the standard `readline` module where it exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from toolrelay.cli.conversation import ChatRun
from toolrelay.cli.outputs import Output
from toolrelay.errors import ConfigError, ToolrelayError

__all__ = ["interactive"]

PROMPT = "› "
HELP = "/model [NAME] shows or switches the model · /exit or Ctrl-D leaves · Ctrl-C stops a turn"
HISTORY_LINES = 1000


def interactive(
    open_run: Callable[[], Coroutine[Any, Any, ChatRun]],
    make_output: Callable[[], Output],
    console: Console,
    history: Path | None,
) -> int:
    """Run the session until `/exit` or end of input; the exit code (0)."""
    with asyncio.Runner() as runner, _line_history(history):
        run = runner.run(open_run())
        try:
            console.print(Text(_banner(run), style="dim"))
            if run.warning:
                console.print(Text(run.warning, style="yellow"))
            while (line := _read()) is not None:
                if line.startswith("/"):
                    if not _command(line, run, runner, console):
                        break
                elif line:
                    _ask(line, run, runner, make_output(), console)
        finally:
            runner.run(run.aclose())
    return 0


def _banner(run: ChatRun) -> str:
    saved = f"saved in {run.where}" if run.where else "not saved"
    which = f"conversation {run.chat_id}" if run.chat_id else "new conversation"
    return f"model {run.model_name} · {which}, {saved} · /help"


def _read() -> str | None:
    """A line from the user; None at end of input. Ctrl-C gives an empty line."""
    try:
        return input(PROMPT).strip()
    except EOFError:
        sys.stdout.write("\n")  # ends the prompt's line
        return None
    except KeyboardInterrupt:
        sys.stdout.write("\n")
        return ""


def _ask(line: str, run: ChatRun, runner: asyncio.Runner, output: Output, console: Console) -> None:
    try:
        runner.run(run.turn(line, output))
    except KeyboardInterrupt:
        console.print("[yellow]cancelled[/]")
    except ToolrelayError as exc:
        console.print(Text.assemble(("error:", "red"), f" {exc}"))


def _command(line: str, run: ChatRun, runner: asyncio.Runner, console: Console) -> bool:
    """Run a `/command`; False ends the session."""
    name, _, arg = line.partition(" ")
    arg = arg.strip()
    if name in ("/exit", "/quit"):
        return False
    if name == "/model" and arg:
        try:
            runner.run(run.switch(arg))
        except ConfigError as exc:
            console.print(Text.assemble(("error:", "red"), f" {exc}"))
            return True
        console.print(f"model: {escape(run.model_name)}", highlight=False)
    elif name == "/model":
        console.print(f"model: {escape(run.model_name)}", highlight=False)
    elif name == "/help":
        console.print(HELP, highlight=False)
    else:
        console.print(f"unknown command {escape(name)}: {HELP}", highlight=False)
    return True


@contextlib.contextmanager
def _line_history(path: Path | None) -> Iterator[None]:
    """Up-arrow history through `readline`, read from and written back to `path`."""
    try:
        import readline
    except ImportError:  # pragma: no cover - Windows without pyreadline
        yield
        return
    if path is not None and path.is_file():
        with contextlib.suppress(OSError):
            readline.read_history_file(path)
    try:
        yield
    finally:
        if path is not None and path.parent.is_dir():
            readline.set_history_length(HISTORY_LINES)
            with contextlib.suppress(OSError):
                readline.write_history_file(path)
