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
import dataclasses
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from alembic import command
from alembic.config import Config
from sqlalchemy import (
    delete,
    event,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import StaticPool

from toolrelay.adapters.stores import (
    ApiKey,
    Chat,
    Clock,
    NewChat,
    NotFoundError,
    StoredMessage,
    User,
    generate_key,
    hash_key,
    key_matches,
    key_tail,
    message_content,
    public_prefix,
    turn_fields,
    utc_now,
)
from toolrelay.adapters.stores.history_cache import HistoryCache, Kept
from toolrelay.adapters.stores.listing import ChatCursor, search_terms
from toolrelay.adapters.stores.models import (
    ApiKeyRow,
    ChatRow,
    MessageRow,
    RevokedSessionRow,
    SearchDocRow,
    ToolOutputRow,
    UserRow,
    UserValvesRow,
)
from toolrelay.adapters.stores.records import history_of
from toolrelay.adapters.stores.sql_index import (
    RECENT,
    after_cursor,
    chat_filter,
    doc_row,
    few_matches,
    from_matches,
    index_message,
    index_title,
    keep_outputs,
)
from toolrelay.adapters.stores.sql_runs import RunRows
from toolrelay.adapters.stores.sql_spend import SpendRows
from toolrelay.adapters.stores.sql_tree import TreeRows, current_of, place
from toolrelay.adapters.stores.tree import branch_ids, sibling_ids
from toolrelay.adapters.stores.whole import uninterruptible
from toolrelay.core.ids import new_id
from toolrelay.engine.interfaces import Message

__all__ = ["MIGRATIONS_DIR", "SQLStore", "upgrade"]

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000
_BEGIN_IMMEDIATE = text("BEGIN IMMEDIATE")
COMPACT_AFTER = 100
"""Chats pruned at once from which the search index is compacted (`SQLStore.reclaim`)."""
_COMPACT = "INSERT INTO search_fts(search_fts) VALUES ('optimize');"


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


def _page(
    messages: list[StoredMessage], before: str | None, limit: int | None
) -> list[StoredMessage]:
    """`get_messages`'s `before` and `limit` on a list already read."""
    if before is not None:
        ids = [m.id for m in messages]
        messages = messages[: ids.index(before)] if before in ids else []
    if limit is not None:
        messages = messages[max(len(messages) - limit, 0) :] if limit > 0 else []
    return messages


def _user(row: UserRow) -> User:
    return User(id=row.id, name=row.name, is_admin=row.is_admin, created_at=row.created_at)


def _api_key(row: ApiKeyRow) -> ApiKey:
    return ApiKey(
        id=row.id,
        user_id=row.user_id,
        name=row.name,
        prefix=row.prefix,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
        tail=row.tail or "",
    )


def _chat(row: ChatRow) -> Chat:
    return Chat(
        id=row.id,
        user_id=row.user_id,
        title=row.title,
        tags=list(row.tags or []),
        model=row.model,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


_M = MessageRow.__table__.c
_MESSAGE_COLUMNS = (
    _M.id,
    _M.chat_id,
    _M.role,
    _M.content,
    _M.output,
    _M.usage,
    _M.status,
    _M.error,
    _M.timings,
    _M.model,
    _M.follow_ups,
    _M.created_at,
    _M.updated_at,
    _M.parent_id,
)
"""A `StoredMessage`'s columns, in its fields' order (`_stored`)."""


def _stored(row: Any) -> StoredMessage:
    """A record from a Core row of `_MESSAGE_COLUMNS`."""
    (mid, chat_id, role, content, output, usage, status, error, timings, model, follow_ups,
     created_at, updated_at, parent_id) = row  # fmt: skip
    return StoredMessage(
        id=mid,
        chat_id=chat_id,
        role=role,
        content=content,
        output=output or [],
        usage=usage,
        status=status,
        error=error,
        timings=timings,
        model=model,
        follow_ups=follow_ups or [],
        created_at=created_at,
        updated_at=updated_at,
        parent_id=parent_id,
    )


async def _chat_row(session: AsyncSession, chat_id: str) -> ChatRow:
    row = await session.get(ChatRow, chat_id)
    if row is None:
        raise NotFoundError(f"chat {chat_id!r} not found")
    return row


def _message_row(
    chat_id: str, message_id: str, role: str, now: datetime, **fields: Any
) -> dict[str, Any]:
    """A `messages` row for a bulk insert (every column given: executemany wants one shape)."""
    row: dict[str, Any] = {
        "id": message_id,
        "chat_id": chat_id,
        "role": role,
        "content": None,
        "output": [],
        "usage": None,
        "status": None,
        "error": None,
        "timings": None,
        "model": None,
        "follow_ups": [],
        "created_at": now,
        "updated_at": now,
        "parent_id": None,
    }
    row.update(fields)
    return row


async def _require_user(session: AsyncSession, user_id: str) -> None:
    if await session.get(UserRow, user_id) is None:
        raise NotFoundError(f"user {user_id!r} not found")


@uninterruptible
class SQLStore(RunRows, SpendRows, TreeRows):
    """One async engine, a session per call; records out, rows never leave this module.
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

    # users and API keys

    async def create_user(self, name: str, *, is_admin: bool = False) -> User:
        row = UserRow(id=new_id("user"), name=name, is_admin=is_admin, created_at=self._now())
        async with self._write() as session:
            session.add(row)
        return _user(row)

    async def user_named(self, name: str) -> User | None:
        """The oldest user called `name`, if any (names are not unique)."""
        async with self._sessions() as session:
            query = select(UserRow).where(UserRow.name == name).order_by(UserRow.created_at)
            row = await session.scalar(query.limit(1))
        return None if row is None else _user(row)

    async def create_api_key(self, user_id: str, *, name: str = "") -> tuple[ApiKey, str]:
        key = generate_key()
        return await self.create_api_key_with_value(user_id, key, name=name), key

    async def create_api_key_with_value(self, user_id: str, key: str, *, name: str = "") -> ApiKey:
        """Store a given key (TOOLRELAY_ADMIN_KEY); the same key for the same user is a no-op."""
        if not key:
            raise ValueError("an API key cannot be empty")
        digest = hash_key(key)
        async with self._write() as session:
            await _require_user(session, user_id)
            existing = await session.scalar(select(ApiKeyRow).where(ApiKeyRow.key_hash == digest))
            if existing is not None:
                if existing.user_id != user_id:
                    raise ValueError("this API key already belongs to another user")
                return _api_key(existing)
            row = ApiKeyRow(
                id=new_id("key"),
                user_id=user_id,
                name=name,
                prefix=public_prefix(key),
                key_hash=digest,
                created_at=self._now(),
                revoked_at=None,
                tail=key_tail(key),
            )
            session.add(row)
        return _api_key(row)

    async def user_for_key(self, key: str) -> User | None:
        """The key's owner, or None when the key is unknown or revoked."""
        if not key:
            return None
        query = (
            select(ApiKeyRow.key_hash, UserRow)
            .join(UserRow, UserRow.id == ApiKeyRow.user_id)
            .where(ApiKeyRow.key_hash == hash_key(key), ApiKeyRow.revoked_at.is_(None))
        )
        async with self._sessions() as session:
            found = (await session.execute(query)).first()
        if found is None or not key_matches(found[0], key):
            return None
        return _user(found[1])

    async def user_for_key_id(self, key_id: str) -> User | None:
        """The owner of the key with this id, or None when it is unknown or revoked."""
        query = (
            select(UserRow)
            .join(ApiKeyRow, UserRow.id == ApiKeyRow.user_id)
            .where(ApiKeyRow.id == key_id, ApiKeyRow.revoked_at.is_(None))
        )
        async with self._sessions() as session:
            row = await session.scalar(query)
        return None if row is None else _user(row)

    async def find_api_key(self, key: str) -> ApiKey | None:
        """The record of this key, revoked or not."""
        query = select(ApiKeyRow).where(ApiKeyRow.key_hash == hash_key(key))
        async with self._sessions() as session:
            row = await session.scalar(query)
        return None if row is None else _api_key(row)

    async def list_api_keys(self, user_id: str | None = None) -> list[ApiKey]:
        query = select(ApiKeyRow).order_by(ApiKeyRow.created_at, ApiKeyRow.id)
        if user_id is not None:
            query = query.where(ApiKeyRow.user_id == user_id)
        async with self._sessions() as session:
            return [_api_key(row) for row in await session.scalars(query)]

    async def revoke_api_key(self, key_id: str) -> bool:
        """True when this call revoked the key; False if unknown or already revoked."""
        query = (
            update(ApiKeyRow)
            .where(ApiKeyRow.id == key_id, ApiKeyRow.revoked_at.is_(None))
            .values(revoked_at=self._now())
        )
        async with self._write() as session:
            result = await session.execute(query)
        return bool(getattr(result, "rowcount", 0))

    async def user_for_session(self, key_id: str, session_id: str) -> User | None:
        """The owner of the session's key while the key is active and the session was not
        signed out: one query."""
        revoked = select(RevokedSessionRow.id).where(RevokedSessionRow.id == session_id)
        query = (
            select(UserRow)
            .join(ApiKeyRow, UserRow.id == ApiKeyRow.user_id)
            .where(ApiKeyRow.id == key_id, ApiKeyRow.revoked_at.is_(None), ~revoked.exists())
        )
        async with self._sessions() as session:
            row = await session.scalar(query)
        return None if row is None else _user(row)

    async def revoke_session(self, session_id: str, expires: datetime) -> None:
        """Record the sign-out (again: a no-op); rows of sessions past their expiry go."""
        async with self._write() as session:
            await session.execute(
                delete(RevokedSessionRow).where(RevokedSessionRow.expires_at <= self._now())
            )
            if await session.get(RevokedSessionRow, session_id) is None:
                session.add(RevokedSessionRow(id=session_id, expires_at=expires))

    async def get_user_valves(self, user_id: str, tool_id: str) -> dict[str, Any] | None:
        """The user's own valve values for the tool, or None when never set."""
        async with self._sessions() as session:
            row = await session.get(UserValvesRow, (user_id, tool_id))
        return None if row is None else dict(row.values)

    async def set_user_valves(self, user_id: str, tool_id: str, values: Mapping[str, Any]) -> None:
        """Store (replace) the user's valve values for the tool, checked by the caller."""
        async with self._write() as session:
            await _require_user(session, user_id)
            row = await session.get(UserValvesRow, (user_id, tool_id))
            if row is None:
                row = UserValvesRow(user_id=user_id, tool_id=tool_id)
                session.add(row)
            row.values = dict(values)
            row.updated_at = self._now()

    async def count_users(self) -> int:
        async with self._sessions() as session:
            return int(await session.scalar(select(func.count()).select_from(UserRow)) or 0)

    async def list_users(self) -> list[User]:
        async with self._sessions() as session:
            rows = await session.scalars(select(UserRow).order_by(UserRow.created_at, UserRow.id))
            return [_user(row) for row in rows]

    # chats

    async def create_chat(
        self,
        user_id: str,
        *,
        title: str | None = None,
        model: str | None = None,
        chat_id: str | None = None,
    ) -> Chat:
        now = self._now()
        row = ChatRow(
            id=chat_id or new_id("chat"),
            user_id=user_id,
            title=title,
            tags=[],
            model=model,
            created_at=now,
            updated_at=now,
        )
        async with self._write() as session:
            await _require_user(session, user_id)
            if await session.get(ChatRow, row.id) is not None:
                raise ValueError(f"chat {row.id!r} already exists")
            session.add(row)
            if title:
                await session.flush()
                await index_title(session, row.id, title)
        return _chat(row)

    async def get_chat(self, chat_id: str, *, user_id: str) -> Chat | None:
        """None when the chat does not exist or belongs to another user: no existence leak."""
        query = select(ChatRow).where(ChatRow.id == chat_id, ChatRow.user_id == user_id)
        async with self._sessions() as session:
            row = await session.scalar(query)
        return None if row is None else _chat(row)

    async def list_chats(
        self,
        user_id: str,
        *,
        limit: int = 50,
        offset: int = 0,
        query: str | None = None,
        id_prefix: str | None = None,
        exclude_prefix: bool = False,
        after: ChatCursor | None = None,
        count: bool = True,
    ) -> tuple[list[Chat], int]:
        """One page of the user's chats, most recently updated first, and their total
        (`query`: words of the title or a message, `listing`; `id_prefix`: ids starting
        with it; `after`: the page after the one that cursor ended; `count=False`: the
        total is -1, not counted)."""
        terms = search_terms(query) if query else None
        async with self._sessions() as session:
            source: Any = ChatRow
            if terms and self._immediate and await few_matches(session, terms):
                source, terms = from_matches(terms), None  # the join does the matching
            owned = chat_filter(user_id, terms, id_prefix, exclude_prefix, self._immediate)
            page = select(ChatRow).select_from(source).where(owned).order_by(*RECENT)
            page = page.limit(max(limit, 0))
            if after is not None:
                page = page.where(after_cursor(after))
            if offset > 0:
                page = page.offset(offset)
            rows = list(await session.scalars(page))
            total = -1
            if count:
                counted = select(func.count()).select_from(source).where(owned)
                total = int(await session.scalar(counted) or 0)
        return [_chat(row) for row in rows], total

    async def prune_chats(
        self, *, id_prefix: str, older_than: datetime | None = None, keep: int | None = None
    ) -> int:
        """Delete the matching chats (their messages cascade) in one transaction."""
        matching = ChatRow.id.startswith(id_prefix, autoescape=True)
        gone = 0
        async with self._write() as session:
            if older_than is not None:
                old = delete(ChatRow).where(matching, ChatRow.created_at < older_than)
                gone += int(getattr(await session.execute(old), "rowcount", 0) or 0)
            if keep is not None:
                extra = (
                    select(ChatRow.id)
                    .where(matching)
                    .order_by(ChatRow.created_at.desc(), ChatRow.id.desc())
                    .offset(max(keep, 0))
                )
                ids = list(await session.scalars(extra))
                if ids:
                    result = await session.execute(delete(ChatRow).where(ChatRow.id.in_(ids)))
                    gone += int(getattr(result, "rowcount", 0) or 0)
        if gone:
            await self.reclaim(compact=gone >= COMPACT_AFTER)
        return gone

    async def delete_chat(self, chat_id: str, *, user_id: str) -> bool:
        """Deletes the chat if the user owns it; its messages go with it (ON DELETE CASCADE)."""
        query = delete(ChatRow).where(ChatRow.id == chat_id, ChatRow.user_id == user_id)
        async with self._write() as session:
            result = await session.execute(query)
        self._histories.drop(chat_id)
        gone = bool(getattr(result, "rowcount", 0))
        if gone:
            await self.reclaim()
        return gone

    async def reclaim(self, *, compact: bool = False) -> None:
        """Give the pages of deleted rows back to the file system (SQLite with incremental
        auto-vacuum: new databases, or after `toolrelay db vacuum`); PostgreSQL's
        autovacuum needs no help. `compact` first rewrites the search index without the
        deleted docs' entries (FTS5 keeps them until its segments merge): after a prune
        of many chats. A failure here costs space, never the delete."""
        if not self._immediate:
            return
        try:
            async with self._writer, self._engine.connect() as connection:
                raw = (await connection.get_raw_connection()).driver_connection
                assert raw is not None, "a pooled connection has its driver's"
                # the pragma frees one page per step of its statement: a script runs it to
                # its end (a plain execute steps once, one page)
                await raw.executescript(
                    (_COMPACT if compact else "") + "PRAGMA incremental_vacuum;"
                )
        except Exception as exc:  # the rows are gone already; the space comes back later
            log.warning("incremental vacuum failed: %s", exc)

    async def update_chat(
        self, chat_id: str, *, title: str | None = None, tags: list[str] | None = None
    ) -> None:
        """Set the given fields (None leaves one alone) and mark the chat as updated."""
        async with self._write() as session:
            row = await _chat_row(session, chat_id)
            if title is not None:
                row.title = title
                await index_title(session, chat_id, title)
            if tags is not None:
                row.tags = [str(tag) for tag in tags]
            row.updated_at = self._now()

    async def title_if_untitled(self, chat_id: str, title: str) -> bool:
        """Name a chat that has no title, in one conditional statement: a title set
        meanwhile (a user's rename) is never overwritten. True when it was set."""
        async with self._write() as session:
            result = await session.execute(
                update(ChatRow)
                .where(ChatRow.id == chat_id, ChatRow.title.is_(None))
                .values(title=title, updated_at=self._now())
            )
            if not getattr(result, "rowcount", 0):
                return False
            await index_title(session, chat_id, title)
        return True

    # messages

    async def add_message(self, chat_id: str, message: Mapping[str, Any]) -> str:
        role, content = message_content(message)
        now = self._now()
        async with self._write() as session:
            chat = await _chat_row(session, chat_id)
            mid = new_id("msg")
            row = MessageRow(
                id=mid,
                chat_id=chat_id,
                role=role,
                content=content,
                output=[],
                follow_ups=[],
                created_at=now,
                updated_at=now,
                parent_id=await place(session, chat, mid),
            )
            session.add(row)
            chat.updated_at = now
            await session.flush()
            await session.execute(insert(SearchDocRow), [doc_row(chat_id, row.id, content)])
        return row.id

    async def add_chats(self, chats: Sequence[NewChat]) -> None:
        """Whole new chats in one transaction, as bulk inserts (`Store.add_chats`): the
        request log writes a burst of ended turns this way, not four transactions each."""
        if not chats:
            return
        now = self._now()
        chat_rows: list[dict[str, Any]] = []
        message_rows: list[dict[str, Any]] = []
        doc_rows: list[dict[str, Any]] = []
        for chat in chats:  # every value checked and copied before anything is written
            chat_rows.append(
                {
                    "id": chat.id,
                    "user_id": chat.user_id,
                    "title": chat.title,
                    "tags": [str(tag) for tag in chat.tags],
                    "model": chat.model,
                    "created_at": now,
                    "updated_at": now,
                }
            )
            if chat.title:
                doc_rows.append(doc_row(chat.id, None, chat.title))
            parent: str | None = None  # a line: each message's parent is the one before
            for message in chat.messages:
                role, content = message_content(message)
                message_id = new_id("msg")
                message_rows.append(
                    _message_row(chat.id, message_id, role, now, content=content, parent_id=parent)
                )
                doc_rows.append(doc_row(chat.id, message_id, content))
                parent = message_id
            fields = turn_fields(chat.turn)
            doc_rows.append(doc_row(chat.id, chat.turn_id, fields.content))
            message_rows.append(
                _message_row(
                    chat.id,
                    chat.turn_id,
                    "assistant",
                    now,
                    parent_id=parent,
                    **fields.columns(),
                )
            )
        users = {chat.user_id for chat in chats}
        async with self._write() as session:
            found = set(await session.scalars(select(UserRow.id).where(UserRow.id.in_(users))))
            if users - found:
                raise NotFoundError(f"users not found: {sorted(users - found)}")
            await session.execute(insert(ChatRow), chat_rows)
            await session.execute(insert(MessageRow), message_rows)
            await session.execute(insert(SearchDocRow), doc_rows)
            for chat in chats:
                whole = turn_fields(chat.turn).whole_outputs
                await keep_outputs(session, chat.id, chat.turn_id, whole, now)

    async def save_turn(self, chat_id: str, message_id: str, turn: Mapping[str, Any]) -> None:
        """Insert or overwrite assistant message `message_id`, all in one transaction."""
        fields = turn_fields(turn)
        now = self._now()
        async with self._write() as session:
            chat = await _chat_row(session, chat_id)
            row = await session.scalar(select(MessageRow).where(MessageRow.id == message_id))
            if row is None:
                parent = await place(session, chat, message_id)
                row = MessageRow(
                    id=message_id,
                    chat_id=chat_id,
                    role="assistant",
                    created_at=now,
                    parent_id=parent,
                )
                session.add(row)
            elif row.chat_id != chat_id or row.role != "assistant":
                raise NotFoundError(f"no assistant message {message_id!r} in chat {chat_id!r}")
            else:
                kept = self._histories.get(chat_id)
                if kept is not None and row.seq <= kept.seq:  # rewriting a kept message
                    self._histories.drop(chat_id)
            for column, value in fields.columns().items():
                setattr(row, column, value)
            row.updated_at = now
            chat.updated_at = now
            await session.flush()
            await index_message(session, chat_id, message_id, fields.content)
            await keep_outputs(session, chat_id, message_id, fields.whole_outputs, now)

    async def checkpoint_turn(self, chat_id: str, message_id: str, turn: Mapping[str, Any]) -> bool:
        """Overwrite the turn only while it is `in_progress`: a late checkpoint never wins."""
        fields = turn_fields(turn)
        query = (
            update(MessageRow)
            .where(
                MessageRow.id == message_id,
                MessageRow.chat_id == chat_id,
                MessageRow.role == "assistant",
                MessageRow.status == "in_progress",
            )
            .values(**fields.columns(checkpoint=True), updated_at=self._now())
        )
        async with self._write() as session:
            result = await session.execute(query)
        return bool(getattr(result, "rowcount", 0))

    async def in_progress_turns(self, *, chat_id: str | None = None) -> list[StoredMessage]:
        """Assistant turns not finished yet (running somewhere, or orphaned by a crash)."""
        query = select(*_MESSAGE_COLUMNS).where(_M.role == "assistant", _M.status == "in_progress")
        if chat_id is not None:
            query = query.where(_M.chat_id == chat_id)
        async with self._engine.connect() as connection:
            rows = await connection.execute(query.order_by(_M.seq))
            return [_stored(row) for row in rows]

    async def get_messages(
        self, chat_id: str, *, before: str | None = None, limit: int | None = None
    ) -> list[StoredMessage]:
        """Rows read as plain tuples (SQLAlchemy Core), never as ORM objects: a long
        chat's thousands of rows cost their decoding, not an identity map's bookkeeping.
        A page (`limit`) is read newest first through the (chat_id, seq) index. A
        branched chat's current branch is picked from all its rows (`stores.tree`)."""
        async with self._engine.connect() as connection:
            current = await current_of(connection, chat_id)
            if current is not None:
                return _page(await self._branch(connection, chat_id, current), before, limit)
        query = select(*_MESSAGE_COLUMNS).where(_M.chat_id == chat_id)
        if before is not None:
            anchor = select(_M.seq).where(_M.id == before, _M.chat_id == chat_id)
            query = query.where(_M.seq < anchor.scalar_subquery())
        if limit is None:
            query = query.order_by(_M.seq)
        else:
            query = query.order_by(_M.seq.desc()).limit(max(limit, 0))
        async with self._engine.connect() as connection:
            rows = [_stored(row) for row in await connection.execute(query)]
        return rows if limit is None else rows[::-1]

    async def _branch(self, connection: Any, chat_id: str, current: str) -> list[StoredMessage]:
        """The current branch's messages, each with its siblings."""
        query = select(*_MESSAGE_COLUMNS).where(_M.chat_id == chat_id).order_by(_M.seq)
        rows = {row[0]: row for row in await connection.execute(query)}
        parents = {mid: row[-1] for mid, row in rows.items()}
        siblings = sibling_ids(parents)
        return [
            dataclasses.replace(_stored(rows[mid]), siblings=siblings.get(mid, ()))
            for mid in branch_ids(parents, current)
        ]

    async def load_messages(self, chat_id: str) -> list[Message]:
        """The history for the next turn: the kept settled part (`history_cache`), checked
        by one indexed aggregate, and the rows after it, three columns each, no record
        built. A chat read for the first time is read whole; a branched chat's current
        branch is read whole each time (`stores.tree`), never kept."""
        kept = self._histories.get(chat_id)
        async with self._engine.connect() as connection:
            current = await current_of(connection, chat_id)
            if current is not None:
                branch = await self._branch(connection, chat_id, current)
                return history_of([(m.role, m.content, m.output) for m in branch])
            if kept is not None:
                check = select(func.count(), func.max(_M.updated_at)).where(
                    _M.chat_id == chat_id, _M.seq <= kept.seq
                )
                if tuple((await connection.execute(check)).one()) != (kept.count, kept.stamp):
                    kept = None
            query = select(_M.seq, _M.role, _M.content, _M.output, _M.status, _M.updated_at)
            query = query.where(_M.chat_id == chat_id).order_by(_M.seq)
            if kept is not None:
                query = query.where(_M.seq > kept.seq)
            rows = (await connection.execute(query)).all()
        settled = next((i for i, row in enumerate(rows) if row[4] == "in_progress"), len(rows))
        counts = (dict(kept.calls), dict(kept.outputs)) if kept is not None else ({}, {})
        head = history_of([(row[1], row[2], row[3]) for row in rows[:settled]], counts)
        calls, outputs = dict(counts[0]), dict(counts[1])  # where the settled part ends
        tail = history_of([(row[1], row[2], row[3]) for row in rows[settled:]], counts)
        known: list[Message] = orjson.loads(kept.history) if kept is not None else []
        if settled:
            stamps = [row[5] for row in rows[:settled]]
            if kept is not None and kept.stamp is not None:
                stamps.append(kept.stamp)
            self._histories.put(
                chat_id,
                Kept(
                    seq=rows[settled - 1][0],
                    count=(kept.count if kept is not None else 0) + settled,
                    stamp=max(stamps),
                    history=orjson.dumps([*known, *head]),
                    calls=calls,
                    outputs=outputs,
                ),
            )
        return [*known, *head, *tail]

    async def get_tool_output(self, chat_id: str, item_id: str) -> str | None:
        query = select(ToolOutputRow.body).where(
            ToolOutputRow.id == item_id, ToolOutputRow.chat_id == chat_id
        )
        async with self._sessions() as session:
            return await session.scalar(query)
