"""The `toolrelay` command: subcommands are registered from their own modules."""

from __future__ import annotations

from typing import Annotated

import typer

from toolrelay import __version__
from toolrelay.cli import admin, chat, chats, models, replay, serve, tools

app = typer.Typer(
    name="toolrelay",
    help="An agent-loop engine for chat systems.",
    no_args_is_help=True,
    add_completion=False,
)
app.command("chat", epilog=chat.EXAMPLES)(chat.chat)
app.add_typer(chats.chats_app, name="chats")
app.command("models")(models.models)
app.command("replay")(replay.replay)
app.command("serve")(serve.serve)
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
