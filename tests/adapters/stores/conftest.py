"""Fixtures running the same store tests on SQLite, PostgreSQL and memory.

PostgreSQL is expected at 127.0.0.1:5432 (user postgres, trust auth, database
`test`); each test gets its own freshly created database, dropped afterwards.
When the server is not reachable the PostgreSQL cases fail, they never skip.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest

from toolrelay.adapters.stores import Store
from toolrelay.adapters.stores.memory import MemoryStore
from toolrelay.adapters.stores.sql import SQLStore

PG_ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/test"
PG_UNREACHABLE = (
    "PostgreSQL not reachable at 127.0.0.1:5432 — start it (the test command does) "
    "with user postgres, trust auth and a database named `test`"
)
START = datetime(2024, 1, 1, tzinfo=UTC)


class FakeClock:
    """Each reading is one second after the previous one: ordering tests need distinct times."""

    def __init__(self) -> None:
        self.current = START

    def __call__(self) -> datetime:
        self.current += timedelta(seconds=1)
        return self.current


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


_RUN = secrets.token_hex(4)
_COUNTER = itertools.count()


async def _pg_execute(sql: str) -> None:
    try:
        connection = await asyncpg.connect(PG_ADMIN_DSN, timeout=5)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    else:
        problem = ""
    if problem:
        pytest.fail(f"{PG_UNREACHABLE} ({problem})", pytrace=False)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


@asynccontextmanager
async def postgres_database() -> AsyncIterator[str]:
    """A freshly created, uniquely named database, dropped (even if still connected) after."""
    name = f"toolrelay_test_{_RUN}_{next(_COUNTER)}"
    await _pg_execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        await _pg_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgres"])
async def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """An empty database URL on each SQL backend."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'nested' / 'dir' / 'toolrelay.sqlite'}"
    else:
        async with postgres_database() as url:
            yield url


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["sqlite", "postgres", "memory"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[Store]:
    async with AsyncExitStack() as stack:
        opened: Store
        if request.param == "memory":
            opened = MemoryStore(clock=clock)
        elif request.param == "sqlite":
            url = f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"
            opened = await SQLStore.open(url, clock=clock)
        else:
            url = await stack.enter_async_context(postgres_database())
            opened = await SQLStore.open(url, clock=clock)
        stack.push_async_callback(opened.close)
        yield opened


@pytest.fixture
async def sql_store(sql_url: str, clock: FakeClock) -> AsyncIterator[SQLStore]:
    """A migrated SQLStore on each SQL backend, for tests that look inside the tables."""
    opened = await SQLStore.open(sql_url, clock=clock)
    try:
        yield opened
    finally:
        await opened.close()
