"""Which optional extra a command needs, said in one line instead of a traceback.

A plain `pip install toolrelay` gives the library and `toolrelay chat`;
`serve`, `db` and `keys` need `toolrelay[server]`, a PostgreSQL URL needs
`toolrelay[postgres]`, a Redis events URL `toolrelay[redis]`. Checked with
`importlib.util.find_spec`, so nothing is imported to find out.
"""

from __future__ import annotations

import importlib.util

from toolrelay.errors import ConfigError

__all__ = ["SERVER", "missing_extra", "require"]

SERVER = ("fastapi", "uvicorn", "sqlalchemy", "alembic", "aiosqlite", "prometheus_client")
POSTGRES = ("asyncpg",)
REDIS = ("redis",)
OTEL = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")


def missing_extra(modules: tuple[str, ...]) -> list[str]:
    """The modules of `modules` that are not installed."""
    return [name for name in modules if not _installed(name)]


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


def require(what: str, extra: str, modules: tuple[str, ...]) -> None:
    """`ConfigError` naming the extra to install when any of `modules` is missing."""
    missing = missing_extra(modules)
    if missing:
        raise ConfigError(
            f"{what} needs the {extra} extra ({', '.join(missing)} not installed): "
            f"pip install 'toolrelay[{extra}]'"
        )


def require_for_urls(database_url: str, events_url: str | None) -> None:
    """The drivers the configured database and event log need."""
    if database_url.startswith("postgresql"):
        require("a PostgreSQL database_url", "postgres", POSTGRES)
    if events_url is not None and events_url.startswith(("redis://", "rediss://", "unix://")):
        require("a Redis events_url", "redis", REDIS)  # memory and ipc:// need no extra
