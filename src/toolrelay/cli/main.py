"""The `toolrelay` command: subcommands are registered from their own modules."""

from __future__ import annotations

import typer

from toolrelay.cli import admin, chat, replay

app = typer.Typer(
    name="toolrelay",
    help="An agent-loop engine for chat systems.",
    no_args_is_help=True,
    add_completion=False,
)
app.command("chat")(chat.chat)
app.command("replay")(replay.replay)
app.command("serve")(admin.serve)
app.add_typer(admin.db_app, name="db")
app.add_typer(admin.keys_app, name="keys")


if __name__ == "__main__":  # pragma: no cover
    app()
