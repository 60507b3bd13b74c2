"""The embedded model for the CLI when no model is configured, as `toolrelay serve` has it.

Owns the choice `toolrelay chat` makes with nothing configured: a toolrelay
server already running at the settings' host and port that serves route
`local` is used when `TOOLRELAY_KEY` holds a key for it (one llama.cpp on a
2-core machine, not two); otherwise the embedded model starts in this process
(weights checked, first run: assembled with a progress bar) and stops with
the command. Either way one line on stderr says which, and how to use a
real model instead. `toolrelay serve` starts its model through
`start_embedded` too.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from toolrelay.errors import ConfigError

if TYPE_CHECKING:
    from toolrelay.config import Registry, Settings
    from toolrelay.config.local import LocalModel

__all__ = ["KEY_ENV", "Embedded", "embedded_route", "running_server", "start_embedded"]

KEY_ENV = "TOOLRELAY_KEY"
"""An API key of the running server (`toolrelay keys create`): lets the CLI use its model."""
PROBE_S = 2.0
"""How long the CLI waits for a running server to list its models (it answers at once)."""
REAL_MODEL = (
    "a real model: --base-url URL --model NAME, OPENAI_BASE_URL, or [[models]] in toolrelay.toml"
)


@dataclass
class Embedded:
    """The route `local` the CLI added, what to say about it, and how to stop it."""

    notice: str
    close: Callable[[], None]
    text_tool_calls: bool
    """In this process the CLI recovers calls written as text; a server does it itself."""


def running_server(settings: Settings, key: str | None) -> str | None:
    """The `/v1` URL of a toolrelay server at the settings' address serving route `local`
    for `key`; None when there is no key, no server, or it serves no `local`."""
    if not key:
        return None
    host = "127.0.0.1" if settings.host in ("", "0.0.0.0", "::") else settings.host
    url = f"http://{host}:{settings.port}/v1"
    request = urllib.request.Request(f"{url}/models", headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_S) as answer:
            listed = json.loads(answer.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None
    data = listed.get("data") if isinstance(listed, dict) else None
    ids = {m.get("id") for m in data if isinstance(m, dict)} if isinstance(data, list) else set()
    return url if "local" in ids else None


def embedded_route(settings: Settings, registry: Registry) -> Embedded:
    """Add route `local` to `registry`: the running server's, else the model in this process.

    `ConfigError` when the embedded model is off (`local = false`) or not installed.
    """
    from toolrelay.config import ModelRoute, setup_hint
    from toolrelay.config.local import ROUTE, install_hint, not_installed

    if not settings.local:
        raise ConfigError(f"no model configured: pass --base-url URL --model NAME\n{setup_hint()}")
    url = running_server(settings, os.environ.get(KEY_ENV))
    if url is not None:
        route = ModelRoute(name=ROUTE, base_url=url, model=ROUTE, api_key_env=KEY_ENV)
        registry.add_route(route)
        notice = (
            f"no model configured: using the embedded model of the toolrelay server at {url} "
            f"(route {ROUTE!r}, {KEY_ENV}); for {REAL_MODEL}"
        )
        return Embedded(notice, lambda: None, text_tool_calls=False)
    missing = not_installed(settings)
    if missing:
        hint = install_hint(missing, settings)
        raise ConfigError(f"no model configured, and {hint}\n{setup_hint()}")
    _, local = start_embedded(settings)
    try:
        registry.add_route(local.route())
    except BaseException:
        local.close()
        raise
    weights = local.weights.name
    notice = (
        f"no model configured: running the embedded model {weights} in this process "
        f"(loaded in {local.server.load_s:.1f} s; a running 'toolrelay serve' is used instead "
        f"when {KEY_ENV} holds one of its keys); for {REAL_MODEL}"
    )
    return Embedded(notice, local.close, text_tool_calls=True)


def start_embedded(settings: Settings) -> tuple[Settings, LocalModel]:
    """The embedded model, with a progress bar while its weights are put together."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    from toolrelay.config.local import start_local

    console = Console(stderr=True)
    bar = Progress(
        "{task.description}", BarColumn(), DownloadColumn(), TimeRemainingColumn(), console=console
    )
    task = bar.add_task("assembling the embedded model", total=None)

    def on_assemble(path: Path) -> None:
        console.print(f"toolrelay: first run: putting the embedded model together in {path}")
        bar.start()

    def progress(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    try:
        settings, local = start_local(settings, progress=progress, on_assemble=on_assemble)
    finally:
        if bar.live.is_started:
            bar.stop()
    return settings, local
