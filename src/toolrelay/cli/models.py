"""`toolrelay models`: the model routes a config (and the environment) gives.

Owns listing what `toolrelay chat --model NAME` and the server's `model`
field accept: each route's name, API kind, upstream model and server URL,
as tab-separated lines. With nothing configured that is the embedded model's
route `local` (a running server's, when `TOOLRELAY_KEY` is a key of it: the
one thing asked); without the `[local]` extra, how to add a model (exit 1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.console import Console

from toolrelay.cli.admin import ConfigPath, fail
from toolrelay.cli.config_flag import NoConfig, config_choice, say_config
from toolrelay.errors import ConfigError

if TYPE_CHECKING:
    from toolrelay.config import Settings

__all__ = ["models"]


def models(config: ConfigPath = None, no_config: NoConfig = False) -> None:
    """List the configured model routes (name, kind, upstream model, base URL)."""
    from toolrelay.config import load_settings, setup_hint

    try:
        settings = load_settings(config_choice(config, no_config))
    except ConfigError as exc:
        raise fail(str(exc)) from None
    say_config(settings)
    if not settings.models and settings.local and _embedded(settings):
        return
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


def _embedded(settings: Settings) -> bool:
    """Nothing configured: route `local`, as `toolrelay chat` and `serve` would use it — the
    running server's (`TOOLRELAY_KEY`) or started in the CLI's process when used."""
    import os

    from toolrelay.cli.embedded import KEY_ENV, running_server
    from toolrelay.config.local import ROUTE, not_installed, weights_for

    url = running_server(settings, os.environ.get(KEY_ENV))
    if url is None and not_installed(settings):
        return False
    where = url or "(embedded: started in the command's process when used)"
    note = f"no model configured: route {ROUTE!r} is " + (
        f"the embedded model of the server at {url}" if url else "the embedded model"
    )
    Console(stderr=True, soft_wrap=True).print(note, markup=False, highlight=False, style="dim")
    typer.echo("name\tkind\tmodel\tbase_url")
    typer.echo(f"{ROUTE}\topenai-chat\t{ROUTE if url else weights_for(settings).name}\t{where}")
    return True
