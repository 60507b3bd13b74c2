"""A page of a chat search that costs about what a page of the list does, however many match.

The list is read in its index's order (`sql_index.RECENT`); a search must return
its matches in that order too, and the two indexes (the list's, the words') do
not share one. So a search goes two ways, one after the other:

1. **Walk** the user's list from the cursor, `WALK` chats at most, and keep those
   whose docs (title, messages) hold every term: the docs are looked up by chat
   (`ix_search_docs_chat_id`) and their folded words tested as text, a word starting
   with each term (`listing.matches`, what `MemoryStore` does). A word found in many
   chats fills the page here, having read about `limit / share` chats.
2. Else, from where the walk stopped, **match through the words' index** (SQLite
   FTS5, PostgreSQL's GIN over `tsv`), join the matching chats, sort those and take
   the rest of the page: a rare word costs its matches only.

Nothing counts every match. The total is exact when the page came from the index
(its matches are counted, which costs what finding them did) or the walk reached
the end of the list; when the walk filled the page first it is -1 (not counted:
`total_capped` in the API). Before, a word in every one of 50,000 chats took
0.2 s on SQLite and 1 s on PostgreSQL (the page's join and a `count(*)` went
through every match).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, literal, select
from sqlalchemy.ext.asyncio import AsyncSession

from toolrelay.adapters.stores.listing import ChatCursor
from toolrelay.adapters.stores.models import ChatRow, SearchDocRow
from toolrelay.adapters.stores.sql_index import (
    RECENT,
    after_cursor,
    chat_filter,
    from_matches,
    matching_chats,
)

__all__ = ["WALK", "search_page"]

WALK = 200
"""Chats of the list a search tests before it turns to the words' index."""
FEW = 5000
"""Matching chats the index hands over as a list of ids (sorted by the list's index);
beyond it, the chats are joined to the matches in SQL."""


async def search_page(
    session: AsyncSession,
    user_id: str,
    terms: list[str],
    *,
    sqlite: bool,
    limit: int,
    offset: int = 0,
    id_prefix: str | None = None,
    exclude_prefix: bool = False,
    after: ChatCursor | None = None,
    count: bool = True,
) -> tuple[list[ChatRow], int]:
    """The page of the user's chats matching every term, and their total (-1: too many
    to count here, or `count=False`). An OFFSET page goes by the index alone."""
    limit = max(limit, 0)
    owned = chat_filter(user_id, None, id_prefix, exclude_prefix, sqlite)
    if not terms or limit == 0:
        return [], 0 if terms == [] else -1
    found: list[str] = []
    cursor = after
    if offset == 0:
        keys = select(ChatRow.id, ChatRow.updated_at, ChatRow.created_at).where(owned)
        if after is not None:
            keys = keys.where(after_cursor(after))
        walked = (await session.execute(keys.order_by(*RECENT).limit(WALK))).all()
        hits = await _holding(session, [row[0] for row in walked], terms, sqlite)
        found = [row[0] for row in walked if row[0] in hits]
        ended = len(walked) < WALK  # the list ends inside the walk
        if ended or len(found) >= limit:
            rows = await _rows(session, found[:limit])
            if not count or not ended:  # the page filled before the end: not counted
                return rows, -1
            if after is None:  # the whole list walked
                return rows, len(found)
        # on through the index from the walk's end (an ended walk: for the total only)
        cursor = ChatCursor(walked[-1][1], walked[-1][2], walked[-1][0]) if walked else after
    ids = matching_chats(terms, sqlite).distinct().limit(FEW + 1)
    matched = list(await session.scalars(ids))
    if len(matched) <= FEW and offset == 0:  # few: sorted here, read by primary key
        owned_keys = await _owned_keys(session, matched, user_id, id_prefix, exclude_prefix)
        total = len(owned_keys) if count else -1
        if cursor is not None:
            owned_keys = [key for key in owned_keys if key < cursor.key()]
        found += [key[2] for key in owned_keys[: max(limit - len(found), 0)]]
        return await _rows(session, found[:limit]), total
    among = from_matches(terms, sqlite)
    rest = select(ChatRow.id).select_from(among).where(owned)
    if cursor is not None:
        rest = rest.where(after_cursor(cursor))
    page = rest.order_by(*RECENT).limit(max(limit - len(found), 0))
    if offset > 0:
        page = page.offset(offset)
    found += list(await session.scalars(page))
    total = -1
    if count:
        counted = select(func.count()).select_from(among).where(owned)
        total = int(await session.scalar(counted) or 0)
    return await _rows(session, found[:limit]), total


async def _owned_keys(
    session: AsyncSession,
    chat_ids: list[str],
    user_id: str,
    id_prefix: str | None,
    exclude_prefix: bool,
) -> list[tuple[Any, Any, str]]:
    """The list keys (updated, created, id) of those of these chats the user owns (and
    the prefix admits), newest first: read by primary key only, filtered and sorted
    here, so no planner walks the user's whole list instead."""
    if not chat_ids:
        return []
    query = select(ChatRow.user_id, ChatRow.updated_at, ChatRow.created_at, ChatRow.id)
    rows = (await session.execute(query.where(ChatRow.id.in_(chat_ids)))).all()
    keys = [
        (updated, created, chat_id)
        for owner, updated, created, chat_id in rows
        if owner == user_id and (not id_prefix or chat_id.startswith(id_prefix) != exclude_prefix)
    ]
    return sorted(keys, reverse=True)


async def _holding(
    session: AsyncSession, chat_ids: list[str], terms: list[str], sqlite: bool
) -> set[str]:
    """Which of these chats have a doc with a word starting with each term: their docs
    found by chat, tested as text (each doc is its words, folded, joined by spaces)."""
    if not chat_ids:
        return set()
    padded: Any = literal(" ") + SearchDocRow.body
    find = func.instr if sqlite else func.strpos
    clauses = [find(padded, f" {term}") > 0 for term in terms]
    query = select(SearchDocRow.chat_id).where(SearchDocRow.chat_id.in_(chat_ids), *clauses)
    return set(await session.scalars(query.distinct()))


async def _rows(session: AsyncSession, ids: list[str]) -> list[ChatRow]:
    if not ids:
        return []
    rows = await session.scalars(select(ChatRow).where(ChatRow.id.in_(ids)).order_by(*RECENT))
    return list(rows)
