"""The `toolrelay` command: subcommands are registered from their own modules."""

from __future__ import annotations

import typer

from toolrelay.cli import replay

app = typer.Typer(
    name="toolrelay",
    help="An agent-loop engine for chat systems.",
    no_args_is_help=True,
    add_completion=False,
)
app.command("replay")(replay.replay)


if __name__ == "__main__":  # pragma: no cover
    app()
