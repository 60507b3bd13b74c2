"""What the SQL store's parts share: the attributes `SQLStore` sets, and rows made records.

`SQLStore` (`sql.py`) is put together from mixins, one per job (`sql_users`,
`sql_chats`, `sql_messages`, `sql_runs`, `sql_spend`); each inherits `SQLParts`,
which names what the store provides (its engine, session maker, clock, write
transaction) so every mixin type-checks alone. `SQLStore` is `uninterruptible`
(`whole`), which wraps the mixins' methods too (once: the mixins are not). Records are built from rows by
one function, `record`, field by field by name: the columns of a table are
named as its record's fields, so a field added to both needs no converter.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from toolrelay.adapters.stores.base import NotFoundError, StoredMessage
from toolrelay.adapters.stores.history_cache import HistoryCache
from toolrelay.adapters.stores.models import ChatRow, MessageRow, UserRow

__all__ = [
    "MESSAGE_COLUMNS",
    "SQLParts",
    "chat_row",
    "message_row",
    "record",
    "require_user",
    "stored",
]

R = TypeVar("R")
_ABSENT: Any = object()


class SQLParts:
    """What `SQLStore` sets up for its mixins (declared here, assigned in `SQLStore`)."""

    _engine: AsyncEngine
    _sessions: async_sessionmaker[AsyncSession]
    _now: Callable[[], datetime]
    _histories: HistoryCache
    _immediate: bool
    """True on SQLite: one writer, `BEGIN IMMEDIATE`, FTS5 search, incremental vacuum."""
    _writer: contextlib.AbstractAsyncContextManager[Any] | asyncio.Lock

    def _write(self) -> contextlib.AbstractAsyncContextManager[AsyncSession]:
        raise NotImplementedError


@functools.cache
def _names(kind: Any) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(kind))


def record(kind: type[R], row: Any, **fixed: Any) -> R:
    """A `kind` record (a dataclass) from `row` (an ORM object or a Core row): each field
    read from the attribute of its name, except those given in `fixed` (a NULL made an
    empty list, a JSON value copied)."""
    names: tuple[str, ...] = _names(kind)  # type: ignore[arg-type]  # a class is hashable
    values = {name: getattr(row, name, _ABSENT) for name in names if name not in fixed}
    given = {name: value for name, value in values.items() if value is not _ABSENT}
    return kind(**given, **fixed)  # a field the row lacks keeps its default (or fails)


_M = MessageRow.__table__.c
MESSAGE_COLUMNS = tuple(_M[name] for name in _names(StoredMessage) if name in _M)
"""A `StoredMessage`'s columns (`siblings` is worked out, not stored), `parent_id`
last: a read of these as Core rows builds no ORM object."""


def stored(row: Any) -> StoredMessage:
    """A record from a Core row of `MESSAGE_COLUMNS`."""
    return record(StoredMessage, row, output=row.output or [], follow_ups=row.follow_ups or [])


def message_row(
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


async def chat_row(session: AsyncSession, chat_id: str) -> ChatRow:
    row = await session.get(ChatRow, chat_id)
    if row is None:
        raise NotFoundError(f"chat {chat_id!r} not found")
    return row


async def require_user(session: AsyncSession, user_id: str) -> None:
    if await session.get(UserRow, user_id) is None:
        raise NotFoundError(f"user {user_id!r} not found")
