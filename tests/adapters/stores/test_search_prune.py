"""Searching chats and pruning the request log, on SQLite, PostgreSQL and memory."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.adapters.stores.conftest import START
from toolrelay.adapters.stores import NewChat, NotFoundError, Store

pytestmark = pytest.mark.anyio


async def _titles(store: Store, user: str, **options: object) -> list[str | None]:
    chats, total = await store.list_chats(user, **options)  # type: ignore[arg-type]
    assert total == len(chats)
    return [c.title for c in chats]


async def test_search_by_title_or_message_and_by_id_prefix(store: Store) -> None:
    alice = (await store.create_user("alice")).id
    bob = (await store.create_user("bob")).id
    weather = await store.create_chat(alice, title="Weather in Paris")
    await store.add_message(weather.id, {"role": "user", "content": "Rain tomorrow?"})
    logged = await store.create_chat(alice, title="sums", chat_id="api_0001")
    await store.add_message(logged.id, {"role": "user", "content": "What is 100% of 2_3?"})
    await store.save_turn(
        logged.id, "req_1", {"output": [], "content": "It is 23.", "status": "completed"}
    )
    await store.create_chat(bob, title="Weather in Rome")

    assert await _titles(store, alice, query="weather") == ["Weather in Paris"]  # not bob's
    assert await _titles(store, alice, query="RAIN") == ["Weather in Paris"]  # message, any case
    assert await _titles(store, alice, query="it is 23") == ["sums"]  # the assistant's answer
    assert await _titles(store, alice, query="100%") == ["sums"]  # punctuation is no word
    assert await _titles(store, alice, query="of 2_3") == ["sums"]
    assert await _titles(store, alice, query="2%3") == ["sums"]  # the words 2 and 3
    assert await _titles(store, alice, query="%") == []  # no word: nothing matches
    assert await _titles(store, alice, id_prefix="api_") == ["sums"]
    assert await _titles(store, alice, id_prefix="api_", exclude_prefix=True) == [
        "Weather in Paris"
    ]
    assert await _titles(store, alice, query="weather", id_prefix="api_") == []


async def test_prune_by_age_and_by_count_touches_only_the_prefix(store: Store) -> None:
    # the fake clock ticks one second per reading: chat i is created around START + 2i s
    user = (await store.create_user("u")).id
    made = [
        await store.create_chat(user, title=f"api {i}", chat_id=f"api_{i:04d}") for i in range(5)
    ]
    await store.add_message(made[0].id, {"role": "user", "content": "old"})
    keep_me = await store.create_chat(user, title="not logged")
    assert [c.created_at > START for c in made] == [True] * 5

    cutoff = made[2].created_at  # strictly older than chat 2: chats 0 and 1
    assert await store.prune_chats(id_prefix="api_", older_than=cutoff) == 2
    assert await _titles(store, user, id_prefix="api_") == ["api 4", "api 3", "api 2"]
    assert await store.get_messages(made[0].id) == []  # its messages went with it

    assert await store.prune_chats(id_prefix="api_", keep=1) == 2
    assert await _titles(store, user, id_prefix="api_") == ["api 4"]
    assert await store.prune_chats(id_prefix="api_", keep=1) == 0
    future = made[4].created_at + timedelta(days=1)
    assert await store.prune_chats(id_prefix="api_", older_than=future) == 1
    assert await _titles(store, user) == [keep_me.title]


def _logged(chat_id: str, user: str, turn_id: str, content: object = "hi") -> NewChat:
    turn = {"output": [], "content": "hello", "status": "completed", "model": "m"}
    return NewChat(
        id=chat_id,
        user_id=user,
        title="hi",
        model="fake",
        tags=["api"],
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": content}],
        turn_id=turn_id,
        turn=turn,
    )


async def test_add_chats_writes_whole_chats_in_order(store: Store) -> None:
    alice = (await store.create_user("alice")).id
    bob = (await store.create_user("bob")).id
    await store.add_chats([_logged("api_1", alice, "req_1"), _logged("api_2", bob, "req_2")])
    [chat], _ = await store.list_chats(bob)
    assert (chat.id, chat.title, chat.tags, chat.model) == ("api_2", "hi", ["api"], "fake")
    saved = await store.get_messages("api_1")
    assert [(m.role, m.content) for m in saved] == [
        ("system", "Be brief."),
        ("user", "hi"),
        ("assistant", "hello"),
    ]
    assert (saved[2].id, saved[2].status, saved[2].model) == ("req_1", "completed", "m")
    assert [c.id for c in (await store.list_chats(alice, query="hello"))[0]] == ["api_1"]


async def test_add_chats_writes_all_or_none(store: Store) -> None:
    alice = (await store.create_user("alice")).id
    unknown = [_logged("api_1", alice, "req_1"), _logged("api_2", "user_gone", "req_2")]
    with pytest.raises(NotFoundError):
        await store.add_chats(unknown)
    bad = [_logged("api_3", alice, "req_3"), _logged("api_4", alice, "req_4", content=3)]
    with pytest.raises(TypeError):
        await store.add_chats(bad)
    assert (await store.list_chats(alice))[1] == 0
