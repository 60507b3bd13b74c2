"""SQLAlchemy tables of the SQL store; migrations/versions/ creates the same schema.

Rows stay inside `sql.py`; callers get the frozen records from the package.
Timestamps are timezone-aware UTC on both backends (`UTCDateTime`), JSON columns
use SQLAlchemy's `JSON` type, which is TEXT on SQLite and `json` on PostgreSQL.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """SQLite keeps no zone: store UTC, and hand back aware UTC datetimes everywhere."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use timezone-aware UTC")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def _without_nul(value: str | None, dialect: Dialect) -> str | None:
    if value is None or dialect.name != "postgresql" or "\x00" not in value:
        return value
    return value.replace("\x00", "\ufffd")


class NulSafeText(TypeDecorator[str]):
    """TEXT that PostgreSQL accepts whatever a client sent: it refuses U+0000 in text
    (`CharacterNotInRepertoireError`), so each NUL is stored as U+FFFD there; SQLite keeps
    it. JSON columns need nothing: JSON writes NUL as `\\u0000`."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return _without_nul(value, dialect)


class NulSafeString(TypeDecorator[str]):
    """VARCHAR(n) with NUL stored as U+FFFD on PostgreSQL (`NulSafeText`)."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return _without_nul(value, dialect)


class Base(DeclarativeBase):
    pass


class UserRow(Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(NulSafeString(255))
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ApiKeyRow(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(NulSafeString(255), default="")
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    tail: Mapped[str] = mapped_column(String(8), default="", server_default="")


class RevokedSessionRow(Base):
    """A browser session signed out before it expired (`server.session`)."""

    __tablename__ = "revoked_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class ChatRow(Base):
    __tablename__ = "chats"
    __table_args__ = (Index("ix_chats_user_recent", "user_id", "updated_at", "created_at", "id"),)
    """The list's order, whole: a page (and a count by id prefix) reads only this index."""

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(64), ForeignKey("users.id", ondelete="CASCADE"))
    title: Mapped[str | None] = mapped_column(NulSafeText, nullable=True)
    tags: Mapped[list[str]] = mapped_column(JSON, default=list)
    model: Mapped[str | None] = mapped_column(NulSafeString(255), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    current_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The end of the current branch once the chat branched; None: a line (`stores.tree`)."""


class MessageRow(Base):
    """`seq` orders messages by creation even when two share a timestamp."""

    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_chat_seq", "chat_id", "seq"),)

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64), unique=True)
    chat_id: Mapped[str] = mapped_column(String(64), ForeignKey("chats.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(32))
    content: Mapped[Any] = mapped_column(JSON, nullable=True)
    output: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    usage: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    status: Mapped[str | None] = mapped_column(String(32), nullable=True)
    error: Mapped[Any] = mapped_column(JSON(none_as_null=True), nullable=True)
    timings: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    model: Mapped[str | None] = mapped_column(NulSafeString(255), nullable=True)
    follow_ups: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    parent_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The message before it in its branch; None for a chat's first (`stores.tree`)."""


class SearchDocRow(Base):
    """What chat search indexes: one row per message, and one per titled chat (no
    `message_id`), holding `listing.search_text` of it.

    The index itself is not modelled: on SQLite an FTS5 table `search_fts` over this
    one (kept in step by triggers), on PostgreSQL a generated `tsv` column with a GIN
    index (migration 0003). `SEARCH_SCHEMA` names them, for schema comparisons.
    """

    __tablename__ = "search_docs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    chat_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("chats.id", ondelete="CASCADE"), index=True
    )
    message_id: Mapped[str | None] = mapped_column(
        String(64), ForeignKey("messages.id", ondelete="CASCADE"), nullable=True, unique=True
    )
    body: Mapped[str] = mapped_column(NulSafeText)


class ToolOutputRow(Base):
    """The whole text of a tool result the model read cut (`core.tools.result_cap`), once."""

    __tablename__ = "tool_outputs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """The `function_call_output` item's id."""
    chat_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("chats.id", ondelete="CASCADE"), index=True
    )
    message_id: Mapped[str] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(NulSafeText)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class SpendRow(Base):
    """Tokens and cost of one user's (`scope` user) or one API key's (`scope` key: the
    key's hash) turns on one UTC day (`YYYY-MM-DD`): the daily budgets read it."""

    __tablename__ = "spend"

    scope: Mapped[str] = mapped_column(String(8), primary_key=True)
    subject: Mapped[str] = mapped_column(String(64), primary_key=True)
    day: Mapped[str] = mapped_column(String(10), primary_key=True)
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    turns: Mapped[int] = mapped_column(Integer, default=0)


SEARCH_SCHEMA: Final = frozenset(
    {"search_fts", "search_fts_data", "search_fts_idx", "search_fts_docsize", "search_fts_config"}
    | {"tsv", "ix_search_docs_tsv"}
)
"""Tables, columns and indexes of the search index that SQLAlchemy does not model."""


def modelled(name: str | None, kind: str, *_: Any) -> bool:
    """Alembic's `include_name`: everything but the unmodelled search index."""
    return name not in SEARCH_SCHEMA


class TurnRunRow(Base):
    """A turn that has not ended: what rebuilds it (`request`) and its last step boundary
    (`state`, `engine.checkpoint`), so another worker or a restarted server goes on from
    there. Deleted when the turn's final save is done."""

    __tablename__ = "turn_runs"

    message_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    chat_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("chats.id", ondelete="CASCADE"), index=True
    )
    owner: Mapped[str] = mapped_column(String(255))
    """The server (host, port, worker slot) running it: a restart takes its own back at once."""
    status: Mapped[str] = mapped_column(String(16))
    resumes: Mapped[int] = mapped_column(Integer, default=0)
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """Until when a library process holds it (`Relay.resume`); a server's lease is on its bus."""


class UserValvesRow(Base):
    """A user's own `UserValves` values for one Open WebUI tool file, by the tool
    server's name: every worker reads them, a restart keeps them."""

    __tablename__ = "user_valves"

    user_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    tool_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    values: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
