"""The `toolrelay` command: subcommands are registered from their own modules."""

from __future__ import annotations

from typing import Annotated

import typer

from toolrelay import __version__
from toolrelay.cli import admin, chat, chats, models, replay, serve, tools
from toolrelay.cli.help import PlainHelp

EXAMPLES = """Examples:

  toolrelay serve                       # the server and web page on http://127.0.0.1:8080

  toolrelay chat "hi" --base-url http://localhost:11434/v1 --model qwen3 --tools tools.py

  toolrelay chats list                  # conversations saved by the server and the CLI

  toolrelay keys create --user ann      # an API key for the server

Each command has its own --help.
"""

SERVE_EXAMPLES = """Examples:

  toolrelay serve

  OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-… toolrelay serve

  toolrelay serve --config toolrelay.toml --host 0.0.0.0 --port 9000
"""

REPLAY_EXAMPLES = """Examples:

  toolrelay replay tests/fixtures/streams/deepseek/reasoning-tool-call.sse

  curl -sN … | toolrelay replay - --format chat --json
"""

MODELS_EXAMPLES = """Examples:

  toolrelay models

  toolrelay models --config toolrelay.toml | cut -f1
"""

app = typer.Typer(
    name="toolrelay",
    help="An agent-loop engine for chat systems.",
    epilog=EXAMPLES,
    no_args_is_help=True,
    add_completion=False,
    cls=PlainHelp,
)
app.command("chat", epilog=chat.EXAMPLES)(chat.chat)
app.add_typer(chats.chats_app, name="chats")
app.command("models", epilog=MODELS_EXAMPLES)(models.models)
app.command("replay", epilog=REPLAY_EXAMPLES)(replay.replay)
app.command("serve", epilog=SERVE_EXAMPLES)(serve.serve)
app.add_typer(admin.db_app, name="db")
app.add_typer(admin.keys_app, name="keys")
app.add_typer(tools.tools_app, name="tools")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"toolrelay {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """An agent-loop engine for chat systems."""


if __name__ == "__main__":  # pragma: no cover
    app()
