"""`--config FILE` / `--no-config`, and the line that says which file was read.

Without either flag the CLI reads `./toolrelay.toml` when it exists (or
`TOOLRELAY_CONFIG`): a file the user may not have in mind, whose env vars
can then fail a command that never needed them. So every command that reads
the settings says on stderr which file it read, and `--no-config` reads none:
the flags and the environment alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from toolrelay.errors import ConfigError

if TYPE_CHECKING:
    from toolrelay.config import Settings
    from toolrelay.config.settings import ConfigChoice

__all__ = ["NoConfig", "config_choice", "say_config"]

NoConfig = Annotated[
    bool,
    typer.Option(
        "--no-config",
        help="Read no config file (not ./toolrelay.toml either): the flags and the "
        "environment alone.",
    ),
]


def config_choice(config: Path | None, no_config: bool) -> ConfigChoice:
    """The two flags as `load_settings` takes them; both at once is a mistake."""
    if no_config and config is not None:
        raise ConfigError("--config and --no-config cannot be used together")
    return False if no_config else config


def say_config(settings: Settings, console: Console | None = None) -> None:
    """`config: PATH` on stderr when a file was read (none: nothing to say)."""
    path = settings.config_file
    if path is None:
        return
    out = console or Console(stderr=True, soft_wrap=True)
    out.print(
        f"config: {path} (--no-config ignores it)", markup=False, highlight=False, style="dim"
    )
