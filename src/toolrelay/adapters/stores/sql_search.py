"""A page of a chat search that costs about what a page of the list does, however many match.

The list is read in its index's order (`sql_index.RECENT`); a search must return
its matches in that order too, and the two indexes (the list's, the words') do
not share one. So a search goes three ways, one after the other:

1. **Walk** the user's list from the cursor, `WALK` chats, testing their text:
   their docs (title, messages) are looked up by chat (`ix_search_docs_chat_id`)
   and their folded words tested for a word starting with each term
   (`listing.matches`, what `MemoryStore` does). A word found in many chats fills
   the page here.
2. Else, unless fewer than `RARE` docs match (counted in the words' index, which
   stops there), **walk on through the words' index**: the next `DEEP` chats of the
   list tested in one query (`sql_index.holds_terms`: SQLite looks each chat's docs
   up in the FTS5 match set, PostgreSQL each chat in a hash of the matching chats).
   A word in a few percent of the chats fills the page here, having read about
   `limit / share` chats of the list and its matches once.
3. Else **from the matches** after the walk's end: their chats read by primary
   key and sorted by the list's key (beyond `FEW`, joined in SQL): a rare word
   costs its matches only.

Nothing counts every match. The total is exact when the page came from the matches
(counting them costs what finding them did) or the walk saw the end of the list;
when the walk filled the page first it is -1 (not counted: `total_capped` in the
API). Before, a word in 5 % of 50,000 chats took 53-64 ms (every one of its
matches read by key: its doc, then its chat) and one in every chat 0.2-1 s (a
`count(*)` of all of them).
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
    holds_terms,
    matching_chats,
    matching_docs,
)

__all__ = ["DEEP", "RARE", "WALK", "search_page"]

RARE = 500
"""Matching docs below which a search takes its page from the matches at once."""
WALK = 200
"""Chats of the list a search tests by their text first (a word found in many chats)."""
DEEP = 2000
"""Chats of the list after the walk a search tests through the words' index."""
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
    cursor, more = after, True
    if offset == 0:
        walked, found, ended = await _walk(session, owned, after, terms, sqlite, limit)
        if ended or len(found) >= limit:
            rows = await _rows(session, found[:limit])
            if not count or not ended:  # the page filled before the end: not counted
                return rows, -1
            if after is None:  # the whole list walked
                return rows, len(found)
        # on through the index from the walk's end (an ended walk: for the total only)
        cursor = ChatCursor(walked[1], walked[2], walked[0]) if walked is not None else after
        more = not ended
    want = max(limit - len(found), 0) if more else 0
    ids = matching_chats(terms, sqlite).distinct().limit(FEW + 1)
    matched = list(await session.scalars(ids))
    if len(matched) <= FEW and offset == 0:  # few: sorted here, read by primary key
        owned_keys = await _owned_keys(session, matched, user_id, id_prefix, exclude_prefix)
        total = len(owned_keys) if count else -1
        if cursor is not None:
            owned_keys = [key for key in owned_keys if key < cursor.key()]
        found += [key[2] for key in owned_keys[:want]]
        return await _rows(session, found[:limit]), total
    among = from_matches(terms, sqlite)
    rest = select(ChatRow.id).select_from(among).where(owned)
    if cursor is not None:
        rest = rest.where(after_cursor(cursor))
    page = rest.order_by(*RECENT).limit(want)
    if offset > 0:
        page = page.offset(offset)
    found += list(await session.scalars(page))
    total = -1
    if count:
        counted = select(func.count()).select_from(among).where(owned)
        total = int(await session.scalar(counted) or 0)
    return await _rows(session, found[:limit]), total


async def _few(session: AsyncSession, terms: list[str], sqlite: bool) -> bool:
    """Whether fewer than `RARE` docs match (counted in the words' index, up to RARE)."""
    return len((await session.execute(matching_docs(terms, sqlite, RARE))).all()) < RARE


async def _walk(
    session: AsyncSession,
    owned: Any,
    after: ChatCursor | None,
    terms: list[str],
    sqlite: bool,
    limit: int,
) -> tuple[Any, list[str], bool]:
    """The list from `after`, walked: `WALK` chats tested by their text, then, unless
    few docs match, `DEEP` more through the words' index while the page is not full. The key (id, updated, created)
    of the last chat walked, the matches (up to `limit` past the text walk), and whether
    the list ended inside the walk."""
    keys = select(ChatRow.id, ChatRow.updated_at, ChatRow.created_at).where(owned)
    if after is not None:
        keys = keys.where(after_cursor(after))
    walked = (await session.execute(keys.order_by(*RECENT).limit(WALK))).all()
    hits = await _holding(session, [row[0] for row in walked], terms, sqlite)
    found = [row[0] for row in walked if row[0] in hits]
    last = walked[-1] if walked else None
    if last is None or len(walked) < WALK or len(found) >= limit:
        return last, found, len(walked) < WALK
    if await _few(session, terms, sqlite):  # the rest from the matches at once
        return last, found, False
    keys = select(ChatRow.id, ChatRow.updated_at, ChatRow.created_at).where(
        owned, after_cursor(ChatCursor(last[1], last[2], last[0]))
    )
    run = keys.order_by(*RECENT).limit(DEEP).subquery()
    recent = (run.c.updated_at.desc(), run.c.created_at.desc(), run.c.id.desc())
    held = select(run.c.id).where(holds_terms(run.c.id, terms, sqlite))
    wanted = limit - len(found)
    deeper: list[str] = list(await session.scalars(held.order_by(*recent).limit(wanted)))
    end = (await session.execute(keys.order_by(*RECENT).offset(DEEP - 1).limit(1))).first()
    # ended: every match after `after` found (not cut off at the page's end)
    return end or last, found + deeper, end is None and len(deeper) < wanted


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
