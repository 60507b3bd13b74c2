"""A made title is written only while the chat has none (SQLite, PostgreSQL, memory)."""

from __future__ import annotations

import pytest

from toolrelay.adapters.stores import Store

pytestmark = pytest.mark.anyio


async def test_a_made_title_names_an_untitled_chat_once(store: Store) -> None:
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    assert await store.title_if_untitled(chat.id, "Baking bread") is True
    assert await store.title_if_untitled(chat.id, "Something else") is False
    named = await store.get_chat(chat.id, user_id=alice.id)
    assert named is not None and named.title == "Baking bread"
    assert named.updated_at > chat.updated_at
    found, _ = await store.list_chats(alice.id, query="bread")  # the search index knows it
    assert [c.id for c in found] == [chat.id]


async def test_a_given_or_renamed_title_is_never_overwritten(store: Store) -> None:
    alice = await store.create_user("alice")
    given = await store.create_chat(alice.id, title="Mine")
    renamed = await store.create_chat(alice.id)
    await store.update_chat(renamed.id, title="Renamed")
    assert await store.title_if_untitled(given.id, "Made") is False
    assert await store.title_if_untitled(renamed.id, "Made") is False
    titles = {c.id: c.title for c in (await store.list_chats(alice.id))[0]}
    assert titles == {given.id: "Mine", renamed.id: "Renamed"}
    found, _ = await store.list_chats(alice.id, query="made")
    assert found == []


async def test_a_missing_chat_gets_no_title(store: Store) -> None:
    assert await store.title_if_untitled("chat_missing", "Made") is False
