"""`toolrelay tools list`: what a config's tools and tool servers offer, and how they are."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from toolrelay.cli.config_flag import NoConfig, config_choice, say_config
from toolrelay.errors import ConfigError

tools_app = typer.Typer(
    help="Tools and tool servers.",
    no_args_is_help=True,
    epilog="Examples:\n\n  toolrelay tools list --config toolrelay.toml",
)


@tools_app.command(
    "list",
    epilog="Examples:\n\n  toolrelay tools list\n\n  toolrelay tools list --config toolrelay.toml",
)
def list_tools(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", metavar="FILE", help="A toolrelay.toml (default: ./toolrelay.toml)."
        ),
    ] = None,
    no_config: NoConfig = False,
) -> None:
    """Start every configured tool server and list its tools (name, source, status)."""
    from toolrelay.config import build_registry, load_settings

    err = Console(stderr=True, soft_wrap=True)
    try:
        settings = load_settings(config_choice(config, no_config))
        say_config(settings, err)
        registry = build_registry(settings, clients=False)  # no model, so no API key needed
    except ConfigError as exc:
        err.print(Text.assemble(("error:", "red"), f" {exc}"))
        raise typer.Exit(2) from None

    async def describe() -> list[tuple[str, str, str]]:
        try:
            infos = await registry.describe_tools()
        finally:
            await registry.aclose()
        return [(i.name, i.source, i.status) for i in infos]

    rows = asyncio.run(describe())
    table = Table("tool", "source", "status")
    for name, source, status in rows:
        table.add_row(name or "-", source, status)
    Console(soft_wrap=True).print(table)
    if any(status != "ok" for _, _, status in rows):
        raise typer.Exit(1)
