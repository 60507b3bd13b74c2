"""Chat search by words and keyset paging, on SQLite, PostgreSQL and memory alike."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from alembic import command
from sqlalchemy import text

from toolrelay.adapters.stores import Chat, Store, sql_search
from toolrelay.adapters.stores.listing import ChatCursor, search_terms, search_text
from toolrelay.adapters.stores.sql import SQLStore, _alembic_config, create_engine

pytestmark = pytest.mark.anyio


async def _found(store: Store, user: str, query: str) -> list[str | None]:
    chats, total = await store.list_chats(user, query=query)
    assert total == len(chats)
    return [c.title for c in chats]


def test_search_text_folds_case_and_accents_and_keeps_only_words() -> None:
    assert search_text("Café au LAIT, s'il-vous_plaît!") == "cafe au lait s il vous plait"
    assert search_text([{"type": "text", "text": "Ünïcode"}, {"type": "image_url"}]) == "unicode"
    assert search_text({"not": "content"}) == ""
    assert search_text("x" * 65 + " kept") == "kept"  # no base64-long words in the index
    assert search_terms("  Pa  pa PARIS ") == ["pa", "paris"]


async def test_words_match_as_prefixes_in_one_message_or_the_title(store: Store) -> None:
    alice = (await store.create_user("alice")).id
    paris = await store.create_chat(alice, title="Trip to Paris")
    await store.add_message(paris.id, {"role": "user", "content": "Is the Café open on Sunday?"})
    parts = await store.create_chat(alice, title="picture")
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}
    await store.add_message(
        parts.id, {"role": "user", "content": [{"type": "text", "text": "Describe zebras"}, image]}
    )
    assert await _found(store, alice, "par") == ["Trip to Paris"]  # the start of a word
    assert await _found(store, alice, "aris") == []  # not inside one
    assert await _found(store, alice, "cafe SUN") == ["Trip to Paris"]  # any case, no accents
    assert await _found(store, alice, "café") == ["Trip to Paris"]
    assert await _found(store, alice, "paris cafe") == []  # title and message are apart
    assert await _found(store, alice, "zebra") == ["picture"]  # a text part
    assert await _found(store, alice, "qujd") == []  # not the image's data


async def test_search_follows_renames_overwrites_and_deletes(store: Store) -> None:
    alice = (await store.create_user("alice")).id
    chat = await store.create_chat(alice, title="first name")
    await store.update_chat(chat.id, title="second name")
    assert await _found(store, alice, "first") == []
    assert await _found(store, alice, "second") == ["second name"]
    await store.save_turn(chat.id, "msg_a", {"output": [], "content": "draft answer"})
    await store.save_turn(chat.id, "msg_a", {"output": [], "content": "final reply"})
    assert await _found(store, alice, "draft") == []
    assert await _found(store, alice, "final") == ["second name"]
    assert await store.delete_chat(chat.id, user_id=alice)
    assert await _found(store, alice, "final") == []


async def _pages(store: Store, user: str, limit: int, **options: object) -> list[list[str]]:
    pages: list[list[str]] = []
    after: ChatCursor | None = None
    while True:
        page, _ = await store.list_chats(user, limit=limit, after=after, **options)  # type: ignore[arg-type]
        if not page:
            return pages
        pages.append([c.id for c in page])
        after = ChatCursor.decode(ChatCursor.after(page[-1]).encode())  # as a client sends it


async def test_cursor_pages_list_every_chat_once_newest_first(store: Store) -> None:
    alice = (await store.create_user("alice")).id
    made: list[Chat] = [await store.create_chat(alice, title=f"c{i}") for i in range(7)]
    newest_first = [c.id for c in reversed(made)]
    assert await _pages(store, alice, 3) == [newest_first[:3], newest_first[3:6], newest_first[6:]]
    first, total = await store.list_chats(alice, limit=3)
    await store.update_chat(made[0].id, title="moved up")  # the oldest becomes the newest
    rest, _ = await store.list_chats(alice, limit=10, after=ChatCursor.after(first[-1]))
    assert [c.id for c in rest] == newest_first[3:6]  # it is not met again further down
    assert (total, (await store.list_chats(alice, count=False))[1]) == (7, -1)
    searched = await _pages(store, alice, 2, query="c")
    assert searched == [newest_first[0:2], newest_first[2:4], newest_first[4:6]]  # not "moved"


def test_a_cursor_that_was_not_handed_out_is_refused() -> None:
    for bad in ("", "not-base64!", "WzFd", ChatCursor.after.__name__):
        with pytest.raises(ValueError, match="not a chat list cursor"):
            ChatCursor.decode(bad)


async def test_every_search_plan_finds_the_same_chats(
    sql_store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However a search goes (a walk of the list by text; then through the words' index
    unless few docs match; then the rest from the matches): the same chats, in the
    same order, and the total counted or said not to be (-1)."""
    alice = (await sql_store.create_user("alice")).id
    for i in range(12):
        chat = await sql_store.create_chat(alice, title=f"chat {i}", chat_id=f"chat_{i:02d}")
        await sql_store.add_message(chat.id, {"role": "user", "content": f"common {i % 3}"})
    queries = ["common", "common 1", "chat 1", "nothing"]

    async def answers() -> list[tuple[list[str], int]]:
        found = []
        for query in queries:
            page, total = await sql_store.list_chats(alice, limit=3, query=query)
            rest, _ = await sql_store.list_chats(
                alice, limit=50, query=query, after=ChatCursor.after(page[-1]) if page else None
            )
            found.append(([c.id for c in page + rest], total))
        return found

    few = await answers()  # the walk by text finds them all
    plans = [("WALK", 1), ("RARE", 0), ("DEEP", 2), ("DEEP", 1), ("FEW", 0)]
    for name, value in plans:  # then from the matches; through the index first; in SQL
        monkeypatch.setattr(sql_search, name, value)
        found = await answers()
        assert [ids for ids, _ in found] == [ids for ids, _ in few], name
        assert all(total in (exact, -1) for (_, total), (_, exact) in zip(found, few, strict=True))
    assert [total for _, total in few] == [12, 4, 3, 0]


async def test_the_migration_puts_pending_words_in_postgres_index(sql_url: str) -> None:
    """0010: PostgreSQL's words index takes docs at once (no pending list that every
    search reads whole), and the docs pending before it are moved in; both dialects find
    the chats written before it."""
    when = datetime(2026, 1, 1, tzinfo=UTC)
    engine = create_engine(sql_url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(
                lambda c: command.upgrade(_alembic_config(c), "0009_message_tree")
            )
            await connection.execute(
                text(
                    "INSERT INTO users (id, name, is_admin, created_at) VALUES ('u', 'a', :f, :t)"
                ),
                {"f": False, "t": when},
            )
            await connection.execute(
                text(
                    "INSERT INTO chats (id, user_id, title, tags, created_at, updated_at)"
                    " VALUES ('c1', 'u', 'Trip to Paris', '[]', :t, :t)"
                ),
                {"t": when},
            )
            await connection.execute(
                text("INSERT INTO search_docs (chat_id, body) VALUES ('c1', 'trip to paris')")
            )
    finally:
        await engine.dispose()
    store = await SQLStore.open(sql_url)  # migrates to head
    try:
        chats, total = await store.list_chats("u", query="pari")
        assert ([c.id for c in chats], total) == (["c1"], 1)
        if not sql_url.startswith("postgresql"):
            return
        async with store.engine.begin() as connection:
            options = await connection.scalar(
                text("SELECT reloptions FROM pg_class WHERE relname = 'ix_search_docs_tsv'")
            )
            pending = await connection.scalar(
                text("SELECT gin_clean_pending_list('ix_search_docs_tsv'::regclass)")
            )
        assert (options, pending) == (["fastupdate=off"], 0)
    finally:
        await store.close()
