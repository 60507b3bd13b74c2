"""The settings' environment, scoped to a block: a test sees only the variables it names."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from toolrelay.config.settings import Settings, load_settings

_NAMES = ("DATABASE_URL", "REDIS_URL", "CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS")
_PREFIXES = ("TOOLRELAY_", "OPENAI_", "OLLAMA_")


def _ours(name: str) -> bool:
    upper = name.upper()
    return upper in _NAMES or upper.startswith(_PREFIXES)


@contextmanager
def scoped_env(values: Mapping[str, str]) -> Iterator[None]:
    """Within the block the settings' variables are exactly `values`; restored after."""
    saved = {name: value for name, value in os.environ.items() if _ours(name)}
    for name in saved:
        del os.environ[name]
    os.environ.update(values)
    try:
        yield
    finally:
        for name in [n for n in os.environ if _ours(n)]:
            del os.environ[name]
        os.environ.update(saved)


def load(config: Path | None = None, *, env: Mapping[str, str] | None = None) -> Settings:
    """`load_settings(config)` with exactly `env` as the settings' environment."""
    with scoped_env(env or {}):
        return load_settings(config)
