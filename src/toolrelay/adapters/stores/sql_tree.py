"""The SQL store's message tree (`stores.tree`): branching, switching, placing a message.

A mixin of `SQLStore` (`sql.py`). A chat that never
branched (`chats.current_id` NULL) is a line: a new message's parent is its last
message, found through the (chat_id, seq) index, and its reads are unchanged.
Branching sets `current_id`; from then on a new message goes at its end and
moves it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from toolrelay.adapters.stores.base import NotFoundError
from toolrelay.adapters.stores.models import ChatRow, MessageRow, SearchDocRow
from toolrelay.adapters.stores.records import message_content
from toolrelay.adapters.stores.sql_index import doc_row
from toolrelay.adapters.stores.sql_rows import SQLParts, chat_row
from toolrelay.adapters.stores.tree import newest_leaf
from toolrelay.core.ids import new_id

__all__ = ["TreeRows", "current_of", "parents_of", "place", "rows_by_id", "tree_of"]

_M = MessageRow.__table__.c
IN_BATCH = 1000
"""Ids per `IN (…)` list: well under every database's bound on bound parameters."""


async def place(session: AsyncSession, chat: ChatRow, message_id: str) -> str | None:
    """The parent of a message added at the end of the chat's current branch (call it
    before adding the row); a branched chat's end moves to the new message."""
    if chat.current_id is not None:
        parent: str | None = chat.current_id
        chat.current_id = message_id
        return parent
    last = select(MessageRow.id).where(MessageRow.chat_id == chat.id)
    return await session.scalar(last.order_by(MessageRow.seq.desc()).limit(1))


async def insert_message(
    session: AsyncSession,
    chat: ChatRow,
    mid: str,
    message: Mapping[str, Any],
    now: datetime,
    parent_id: str | None,
) -> None:
    """Add a user/system message under `parent_id` with its search document; the chat
    counts as updated."""
    role, content = message_content(message)
    row = MessageRow(
        id=mid,
        chat_id=chat.id,
        role=role,
        content=content,
        output=[],
        follow_ups=[],
        created_at=now,
        updated_at=now,
        parent_id=parent_id,
    )
    session.add(row)
    chat.updated_at = now
    await session.flush()
    await session.execute(insert(SearchDocRow), [doc_row(chat.id, mid, content)])


async def current_of(connection: AsyncConnection, chat_id: str) -> str | None:
    """The end of the chat's current branch; None while the chat is a line."""
    query = select(ChatRow.current_id).where(ChatRow.id == chat_id)
    return await connection.scalar(query)


async def tree_of(connection: AsyncConnection, chat_id: str) -> dict[str, str | None]:
    """Each message's parent, in creation order: the tree without the messages."""
    query = select(_M.id, _M.parent_id).where(_M.chat_id == chat_id).order_by(_M.seq)
    return {str(row[0]): row[1] for row in await connection.execute(query)}


async def rows_by_id(
    connection: AsyncConnection, columns: Sequence[Any], ids: list[str]
) -> dict[str, Any]:
    """Messages' rows by id (`columns` start with the id), `IN_BATCH` at a time."""
    found: dict[str, Any] = {}
    for start in range(0, len(ids), IN_BATCH):
        query = select(*columns).where(_M.id.in_(ids[start : start + IN_BATCH]))
        found.update((row[0], row) for row in await connection.execute(query))
    return found


async def parents_of(session: AsyncSession, chat_id: str) -> dict[str, str | None]:
    """Every message's parent, in creation order."""
    query = select(MessageRow.id, MessageRow.parent_id).where(MessageRow.chat_id == chat_id)
    rows = await session.execute(query.order_by(MessageRow.seq))
    return {mid: parent for mid, parent in rows}


class TreeRows(SQLParts):
    """`Store.add_branch` and `switch_branch`; `SQLStore` provides the rest."""

    async def add_branch(
        self,
        chat_id: str,
        message: Mapping[str, Any],
        *,
        parent_id: str | None,
        message_id: str | None = None,
    ) -> str:
        now = self._now()
        mid = message_id or new_id("msg")
        async with self._write() as session:
            chat = await chat_row(session, chat_id)
            if parent_id is not None:
                owner = select(MessageRow.chat_id).where(MessageRow.id == parent_id)
                if await session.scalar(owner) != chat_id:
                    raise NotFoundError(f"no message {parent_id!r} in chat {chat_id!r}")
            chat.current_id = mid
            await insert_message(session, chat, mid, message, now, parent_id)
        self._histories.drop(chat_id)
        return mid

    async def switch_branch(self, chat_id: str, message_id: str) -> str | None:
        async with self._write() as session:
            chat = await session.get(ChatRow, chat_id)
            if chat is None:
                return None
            parents = await parents_of(session, chat_id)
            if message_id not in parents:
                return None
            chat.current_id = leaf = newest_leaf(parents, message_id)
        self._histories.drop(chat_id)
        return leaf
