"""What the SQL store keeps beside its rows: the chat search index, kept tool outputs.

`SQLStore` (`sql.py`) calls these inside its transactions. Search docs are the
folded words of each message and title (`listing.search_text`); SQLite matches
them through the FTS5 table `search_fts`, PostgreSQL through the `tsv` column's GIN
index (migration 0003). Whole tool results cut for the model are written once per
output item (migration 0004). The chat list's order is one index, whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Select,
    and_,
    bindparam,
    delete,
    func,
    insert,
    join,
    literal_column,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import Join

from toolrelay.adapters.stores.listing import ChatCursor, fts5_query, search_text, tsquery
from toolrelay.adapters.stores.models import ChatRow, SearchDocRow, ToolOutputRow, UTCDateTime

__all__ = [
    "RECENT",
    "matching_chats",
    "after_cursor",
    "chat_filter",
    "doc_row",
    "from_matches",
    "holds_terms",
    "matching_docs",
    "index_message",
    "index_title",
    "keep_outputs",
]

RECENT = (ChatRow.updated_at.desc(), ChatRow.created_at.desc(), ChatRow.id.desc())
"""The chat list's order; index `ix_chats_user_recent` holds it whole."""


def chat_filter(
    user_id: str, terms: list[str] | None, id_prefix: str | None, exclude_prefix: bool, sqlite: bool
) -> ColumnElement[bool]:
    """The user's chats, narrowed by id prefix and by words of the title or a message."""
    clauses: list[ColumnElement[bool]] = [ChatRow.user_id == user_id]
    if id_prefix:
        prefixed = ChatRow.id.startswith(id_prefix, autoescape=True)
        clauses.append(~prefixed if exclude_prefix else prefixed)
    if terms is not None:
        clauses.append(ChatRow.id.in_(matching_chats(terms, sqlite)))
    return and_(*clauses)


def matching_chats(terms: list[str], sqlite: bool) -> Select[Any]:
    """Ids of chats with a message or title holding every term, through the search index
    (migration 0003); no terms (a query of punctuation only) matches nothing."""
    if not terms:
        return select(SearchDocRow.chat_id).where(literal_column("1") == 0)
    if sqlite:
        hits = text(
            "search_docs.id IN (SELECT rowid FROM search_fts WHERE search_fts MATCH :terms)"
        )
        return select(SearchDocRow.chat_id).where(hits.bindparams(terms=fts5_query(terms)))
    return select(SearchDocRow.chat_id).where(_tsv_match(terms))


def matching_docs(terms: list[str], sqlite: bool, most: int) -> Select[Any]:
    """At most `most` matching docs, found in the words' index alone (one row each): how
    many there are, cheaply, when they are few."""
    if sqlite:
        hits = text("SELECT rowid FROM search_fts WHERE search_fts MATCH :terms LIMIT :most")
        found = hits.bindparams(terms=fts5_query(terms), most=most).columns()
        return select(literal_column("1")).select_from(found.subquery())
    return select(SearchDocRow.id).where(_tsv_match(terms)).limit(most)


def holds_terms(chat_id: ColumnElement[Any], terms: list[str], sqlite: bool) -> ColumnElement[bool]:
    """Whether the chat `chat_id` names has a doc holding every term, tested for each of
    a run of the list's chats. PostgreSQL: the chat is in the set of matching chats (one
    hash of them). SQLite: one of the chat's docs (found by chat, `ix_search_docs_chat_id`)
    is in the set of matching docs (FTS5 rowids, read once); the unary `+` keeps SQLite
    from probing the chat's docs once per matching doc instead."""
    if not sqlite:
        return chat_id.in_(matching_chats(terms, sqlite))
    docs = text(
        "+search_docs.id IN (SELECT rowid FROM search_fts WHERE search_fts MATCH :terms)"
    ).bindparams(terms=fts5_query(terms))
    return select(SearchDocRow.id).where(SearchDocRow.chat_id == chat_id, docs).exists()


def _tsv_match(terms: list[str]) -> ColumnElement[bool]:
    return literal_column("search_docs.tsv").op("@@")(
        func.to_tsquery(literal_column("'simple'"), bindparam("terms", tsquery(terms)))
    )


def from_matches(terms: list[str], sqlite: bool) -> Join:
    """Chats joined to their distinct matching ids, found through the words' index."""
    matched = matching_chats(terms, sqlite).distinct().subquery()
    return join(ChatRow, matched, ChatRow.id == matched.c.chat_id)


def after_cursor(cursor: ChatCursor) -> ColumnElement[bool]:
    """Chats after `cursor` in the list's order (newest first): one index range."""
    key: tuple[Any, ...] = (
        bindparam("after_updated", cursor.updated_at, type_=UTCDateTime),
        bindparam("after_created", cursor.created_at, type_=UTCDateTime),
        bindparam("after_id", cursor.id),
    )
    return tuple_(ChatRow.updated_at, ChatRow.created_at, ChatRow.id) < tuple_(*key)


def doc_row(chat_id: str, message_id: str | None, content: Any) -> dict[str, Any]:
    return {"chat_id": chat_id, "message_id": message_id, "body": search_text(content)}


async def index_title(session: AsyncSession, chat_id: str, title: str | None) -> None:
    """The chat's title doc, replaced (a chat without a title has none)."""
    await session.execute(
        delete(SearchDocRow).where(
            SearchDocRow.chat_id == chat_id, SearchDocRow.message_id.is_(None)
        )
    )
    if title:
        await session.execute(insert(SearchDocRow), [doc_row(chat_id, None, title)])


async def keep_outputs(
    session: AsyncSession,
    chat_id: str,
    message_id: str,
    whole: Mapping[str, str],
    now: datetime,
) -> None:
    """The whole texts of the turn's cut results, written once (a second save skips them)."""
    if not whole:
        return
    known = select(ToolOutputRow.id).where(ToolOutputRow.id.in_(list(whole)))
    stored = set(await session.scalars(known))
    rows = [
        {"id": i, "chat_id": chat_id, "message_id": message_id, "body": b, "created_at": now}
        for i, b in whole.items()
        if i not in stored
    ]
    if rows:
        await session.execute(insert(ToolOutputRow), rows)


async def index_message(session: AsyncSession, chat_id: str, message_id: str, content: Any) -> None:
    """The message's search doc, written or replaced."""
    body = search_text(content)
    changed = await session.execute(
        update(SearchDocRow).where(SearchDocRow.message_id == message_id).values(body=body)
    )
    if not getattr(changed, "rowcount", 0):
        await session.execute(
            insert(SearchDocRow), [{"chat_id": chat_id, "message_id": message_id, "body": body}]
        )
