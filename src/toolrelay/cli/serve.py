"""`toolrelay serve`: check everything that can be checked, then start the server.

Owns the start-up order that keeps every configuration problem to one line
and exit code 2: the server extra is installed, the settings load, the
drivers they name are installed, the data dir can be created, and the
registry (model clients, tools, filters, API keys from the environment) is
built. Only then is uvicorn started with that registry. This is the one
CLI module that imports `toolrelay.server`, lazily, to start it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolrelay.cli.admin import ConfigPath, fail
from toolrelay.cli.extras import SERVER, require, require_for_urls
from toolrelay.errors import ConfigError

__all__ = ["serve"]


def serve(
    host: Annotated[str | None, typer.Option("--host", help="Default: the settings'.")] = None,
    port: Annotated[int | None, typer.Option("--port", help="Default: the settings'.")] = None,
    config: ConfigPath = None,
) -> None:
    """Run the HTTP server (OpenAI-compatible API, chat API, web page)."""
    from toolrelay.config import build_registry, load_settings

    try:
        require("toolrelay serve", "server", SERVER)
        settings = load_settings(config)
        require_for_urls(settings.database_url, settings.events_url)
        _make_dir(settings.data_dir)
        registry = build_registry(settings)
    except ConfigError as exc:
        raise fail(str(exc)) from None

    import uvicorn

    from toolrelay.server.app import create_app

    uvicorn.run(
        create_app(settings, registry=registry),
        host=host or settings.host,
        port=port if port is not None else settings.port,
    )


def _make_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"data_dir: cannot create {str(path)!r}: {exc.strerror}") from None
