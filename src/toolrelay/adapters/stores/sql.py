"""`SQLStore`: the `Store` API on SQLAlchemy async (SQLite by default, or PostgreSQL).

Owns the engine, its SQLite pragmas (WAL, foreign keys, a busy timeout) and
running Alembic migrations from inside the package (`upgrade`). Every public
method is one short transaction; `save_turn` upserts the assistant message and
touches the chat in the same one, so a failure leaves the previous state intact.

Under load SQLite allows one writer at a time and answers "database is locked"
to a writer that waits past the busy timeout. So on SQLite every write goes
through one asyncio lock (one writer per process; readers run beside it in
WAL mode), and between processes (`serve --workers N`, the CLI) SQLite's lock
does, waited for up to the busy timeout. Each write transaction begins with
`BEGIN IMMEDIATE`, taking that lock before it reads anything: a transaction
that read first holds a snapshot, and if another process wrote meanwhile
SQLite fails its write at once ("database is locked", no wait) instead of
waiting (tests/reliability/test_sqlite_processes.py). PostgreSQL
has no such limit; its pool is sized by the caller (`pool_size`,
`max_overflow`, `pool_timeout`), from settings in the server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
from alembic import command
from alembic.config import Config
from sqlalchemy import event, select, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import StaticPool

from toolrelay.adapters.stores.history_cache import HistoryCache
from toolrelay.adapters.stores.records import Clock, utc_now
from toolrelay.adapters.stores.sql_chats import ChatRows
from toolrelay.adapters.stores.sql_messages import MessageRows
from toolrelay.adapters.stores.sql_runs import RunRows
from toolrelay.adapters.stores.sql_spend import SpendRows
from toolrelay.adapters.stores.sql_tree import TreeRows
from toolrelay.adapters.stores.sql_users import UserRows
from toolrelay.adapters.stores.whole import uninterruptible

__all__ = ["MIGRATIONS_DIR", "SQLStore", "upgrade"]

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000
_BEGIN_IMMEDIATE = text("BEGIN IMMEDIATE")


def _alembic_config(connection: Connection) -> Config:
    """Alembic configured in code: no alembic.ini, scripts found inside the package."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def _upgrade_connection(connection: Connection) -> None:
    command.upgrade(_alembic_config(connection), "head")


async def _migrate(engine: AsyncEngine) -> None:
    """Alembic is sync: run it on the async engine's connection through `run_sync`."""
    async with engine.begin() as connection:
        await connection.run_sync(_upgrade_connection)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """WAL lets readers run during a write; SQLite enforces foreign keys only when asked.
    A new database gets incremental auto-vacuum (it must be set before the first table):
    deleting chats can then give their pages back (`SQLStore.reclaim`)."""
    cursor = dbapi_connection.cursor()
    # first: the pragmas after it wait for a lock another connection holds, not fail
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def _json_dumps(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8")


def create_engine(
    url: str,
    *,
    pool_size: int | None = None,
    max_overflow: int | None = None,
    pool_timeout: float | None = None,
) -> AsyncEngine:
    """An async engine for `url`; for a SQLite file, its directory is created first.

    The pool options size the connection pool (None keeps SQLAlchemy's); an
    in-memory SQLite database has one shared connection instead.
    """
    parsed = make_url(url)
    kwargs: dict[str, Any] = {"json_serializer": _json_dumps, "json_deserializer": orjson.loads}
    pool = {"pool_size": pool_size, "max_overflow": max_overflow, "pool_timeout": pool_timeout}
    pooled = {k: v for k, v in pool.items() if v is not None}
    if parsed.get_backend_name() != "sqlite":
        return create_async_engine(url, pool_pre_ping=True, **kwargs, **pooled)
    database = parsed.database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        kwargs.update(pooled)
    else:
        kwargs["poolclass"] = StaticPool  # one shared in-memory database
    engine = create_async_engine(url, **kwargs)
    event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


def upgrade(url: str) -> None:
    """Migrate the database at `url` to head (for `toolrelay db upgrade`; no running loop)."""

    async def run() -> None:
        engine = create_engine(url)
        try:
            await _migrate(engine)
        finally:
            await engine.dispose()

    asyncio.run(run())


@uninterruptible
class SQLStore(UserRows, ChatRows, MessageRows, TreeRows, RunRows, SpendRows):
    """One async engine, a session per call; records out, rows never leave the `sql_*`
    modules (one per job, `sql_rows`).
    A call runs to its end even when its caller is cancelled (`whole`)."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Clock = utc_now,
        history_cache_bytes: int = 32 * 1024 * 1024,
    ) -> None:
        """`history_cache_bytes`: the settled histories kept between turns, in all
        (`history_cache`; 0 keeps none)."""
        self._engine = engine
        self._histories = HistoryCache(history_cache_bytes)
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._now = clock
        one_writer = self._immediate = engine.dialect.name == "sqlite"
        self._writer: contextlib.AbstractAsyncContextManager[Any] = (
            asyncio.Lock() if one_writer else contextlib.nullcontext()
        )

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        migrate: bool = True,
        clock: Clock = utc_now,
        pool_size: int | None = None,
        max_overflow: int | None = None,
        pool_timeout: float | None = None,
        history_cache_bytes: int = 32 * 1024 * 1024,
    ) -> SQLStore:
        """Connect to `url` (e.g. `sqlite+aiosqlite:///data/db.sqlite`), migrating to head."""
        engine = create_engine(
            url, pool_size=pool_size, max_overflow=max_overflow, pool_timeout=pool_timeout
        )
        if migrate:
            try:
                await _migrate(engine)
            except BaseException:
                await engine.dispose()
                raise
        return cls(engine, clock=clock, history_cache_bytes=history_cache_bytes)

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    async def close(self) -> None:
        await self._engine.dispose()

    async def ping(self) -> None:
        """One `SELECT 1` on a pooled connection; raises when the database is unreachable."""
        async with self._engine.connect() as connection:
            await connection.execute(select(1))

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncSession]:
        """A write transaction; on SQLite, one at a time, holding the database's write lock
        from its first statement (see the module docstring)."""
        async with self._writer, self._sessions.begin() as session:
            if self._immediate:
                await session.execute(_BEGIN_IMMEDIATE)
            yield session
