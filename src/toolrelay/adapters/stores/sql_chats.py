"""The SQL store's chats: create, read, list and search, rename, delete, prune.

A mixin of `SQLStore` (`sql.py`). The list is read in its index's order
(`sql_index.RECENT`), a page after a cursor (`ChatCursor`), not an OFFSET; a search
matches through the database's own index (`sql_index`). Deleting chats gives their
pages back on SQLite (`reclaim`).
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import delete, func, select, update

from toolrelay.adapters.stores.base import Chat
from toolrelay.adapters.stores.listing import ChatCursor, search_terms
from toolrelay.adapters.stores.models import ChatRow
from toolrelay.adapters.stores.sql_index import RECENT, after_cursor, chat_filter, index_title
from toolrelay.adapters.stores.sql_rows import SQLParts, chat_row, record, require_user
from toolrelay.adapters.stores.sql_search import search_page
from toolrelay.core.ids import new_id

__all__ = ["COMPACT_AFTER", "ChatRows"]

log = logging.getLogger(__name__)

COMPACT_AFTER = 100
"""Chats pruned at once from which the search index is compacted (`ChatRows.reclaim`)."""
_COMPACT = "INSERT INTO search_fts(search_fts) VALUES ('optimize');"


def _chat(row: ChatRow) -> Chat:
    return record(Chat, row, tags=list(row.tags or []))


class ChatRows(SQLParts):
    """`Store`'s chat methods over `chats` (their messages cascade on delete)."""

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
            await require_user(session, user_id)
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
        total is -1, not counted; a search's total is -1 too when its matches are too
        many to count cheaply, `sql_search`)."""
        terms = search_terms(query) if query else None
        async with self._sessions() as session:
            if terms is not None:
                rows, total = await search_page(
                    session,
                    user_id,
                    terms,
                    sqlite=self._immediate,
                    limit=limit,
                    offset=offset,
                    id_prefix=id_prefix,
                    exclude_prefix=exclude_prefix,
                    after=after,
                    count=count,
                )
                return [_chat(row) for row in rows], total
            owned = chat_filter(user_id, None, id_prefix, exclude_prefix, self._immediate)
            page = select(ChatRow).where(owned).order_by(*RECENT).limit(max(limit, 0))
            if after is not None:
                page = page.where(after_cursor(after))
            if offset > 0:
                page = page.offset(offset)
            rows = list(await session.scalars(page))
            total = -1
            if count:
                counted = select(func.count()).select_from(ChatRow).where(owned)
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
            row = await chat_row(session, chat_id)
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
