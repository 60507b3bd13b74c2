"""`toolrelay models`: the model routes a config (and the environment) gives.

Owns listing what `toolrelay chat --model NAME` and the server's `model`
field accept: each route's name, API kind, upstream model and server URL,
as tab-separated lines. Nothing is contacted; a missing configuration says
how to add one (exit 1).
"""

from __future__ import annotations

import typer
from rich.console import Console

from toolrelay.cli.admin import ConfigPath, fail
from toolrelay.cli.config_flag import NoConfig, config_choice, say_config
from toolrelay.errors import ConfigError

__all__ = ["models"]


def models(config: ConfigPath = None, no_config: NoConfig = False) -> None:
    """List the configured model routes (name, kind, upstream model, base URL)."""
    from toolrelay.config import load_settings, setup_hint

    try:
        settings = load_settings(config_choice(config, no_config))
    except ConfigError as exc:
        raise fail(str(exc)) from None
    say_config(settings)
    if not settings.models:
        local = (
            "('toolrelay serve' serves its embedded model as route 'local' meanwhile, with the "
            "[local] extra; local = false turns that off)\n"
            if settings.local
            else ""
        )
        Console(stderr=True, soft_wrap=True).print(
            f"no model configured.\n{local}{setup_hint()}", markup=False, highlight=False
        )
        raise typer.Exit(1)
    typer.echo("name\tkind\tmodel\tbase_url")
    for route in settings.models:
        typer.echo(f"{route.name}\t{route.kind}\t{route.model}\t{route.base_url}")
