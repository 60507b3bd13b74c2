"""Servers for the reliability suite: in a thread (fault injection) or a child process (kills).

Backends come in the pairs a deployment uses: SQLite with the in-process bus
(the default) and PostgreSQL with Redis (many workers), plus the two mixed
pairs where a test is about one side only. PostgreSQL databases are created
per test; Redis is shared, keys are per chat (random ids). A missing service
fails the test, it never skips.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.adapters.stores.conftest import _pg_execute
from tests.server.conftest import Running, ServerThread, make_settings, running, upstream
from toolrelay.testing.fake_server import FakeModelServer

REDIS_URL = "redis://127.0.0.1:6379/0"

__all__ = ["BACKENDS", "REDIS_URL", "database", "events_url", "running", "upstream"]

BACKENDS = [
    pytest.param(("sqlite", "memory"), id="sqlite-memory"),
    pytest.param(
        ("postgres", "redis"), id="postgres-redis", marks=[pytest.mark.postgres, pytest.mark.redis]
    ),
    pytest.param(("sqlite", "redis"), id="sqlite-redis", marks=pytest.mark.redis),
    pytest.param(("postgres", "memory"), id="postgres-memory", marks=pytest.mark.postgres),
]


@contextmanager
def database(kind: str, tmp_path: Path) -> Iterator[str]:
    """A database URL for `kind`, empty, dropped afterwards (PostgreSQL)."""
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'toolrelay.db'}"
        return
    name = f"toolrelay_rel_{secrets.token_hex(5)}"
    asyncio.run(_pg_execute(f'CREATE DATABASE "{name}"'))
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        asyncio.run(_pg_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def events_url(kind: str) -> str | None:
    return REDIS_URL if kind == "redis" else None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Running]:
    """The test server (uvicorn in a thread) in front of its own real-socket fake model server."""
    with FakeModelServer() as fake:
        settings = make_settings(tmp_path, fake)
        with ServerThread(settings) as base_url:
            yield Running(base_url, fake, settings)


@pytest.fixture(params=["sqlite", "postgres"])
def served_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Running]:
    """The test server on each SQL backend (PostgreSQL: a fresh database, dropped after)."""
    with FakeModelServer() as fake, database(request.param, tmp_path) as url:
        settings = make_settings(tmp_path, fake, database_url=url)
        with ServerThread(settings) as base_url:
            yield Running(base_url, fake, settings)
