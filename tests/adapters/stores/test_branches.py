"""Issue 29 item 8: a chat's messages as a tree with a current branch (`stores.tree`),
on SQLite, PostgreSQL and memory alike (conftest's `store`), and the migration that
gives existing chats their parents."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from alembic import command
from sqlalchemy import text

from toolrelay.adapters.stores import NotFoundError, Store
from toolrelay.adapters.stores.sql import SQLStore, _alembic_config, create_engine
from toolrelay.adapters.stores.tree import branch_ids, newest_leaf, sibling_ids

pytestmark = pytest.mark.anyio


def _answer(text: str) -> dict[str, Any]:
    parts = [{"type": "output_text", "text": text}]
    item = {"type": "message", "id": f"it_{text}", "role": "assistant", "content": parts}
    return {"output": [item], "content": text, "status": "completed"}


async def _line(store: Store) -> tuple[str, list[str]]:
    """A chat: question, answer, question, answer (a line, never branched)."""
    user = await store.create_user("alice")
    chat = await store.create_chat(user.id)
    ids = [await store.add_message(chat.id, {"role": "user", "content": "Q1"})]
    await store.save_turn(chat.id, "a1", _answer("A1"))
    ids += ["a1", await store.add_message(chat.id, {"role": "user", "content": "Q2"})]
    await store.save_turn(chat.id, "a2", _answer("A2"))
    return chat.id, [*ids, "a2"]


def _texts(history: list[Any]) -> list[str]:
    return [str(m.get("content")) for m in history]


async def test_a_line_names_its_parents_and_has_no_siblings(store: Store) -> None:
    chat_id, ids = await _line(store)
    messages = await store.get_messages(chat_id)
    assert [m.id for m in messages] == ids
    assert [m.parent_id for m in messages] == [None, *ids[:-1]]
    assert all(m.siblings == () for m in messages)


async def test_regenerating_adds_an_answer_beside_the_last(store: Store) -> None:
    chat_id, ids = await _line(store)
    q2 = ids[2]
    new = await store.add_branch(
        chat_id, {"role": "assistant", "content": ""}, parent_id=q2, message_id="a2b"
    )
    assert new == "a2b"
    await store.save_turn(chat_id, "a2b", _answer("A2 again"))
    messages = await store.get_messages(chat_id)
    assert [m.id for m in messages] == [*ids[:3], "a2b"]
    assert messages[-1].siblings == ("a2", "a2b") and messages[-1].parent_id == q2
    assert _texts(await store.load_messages(chat_id)) == ["Q1", "A1", "Q2", "A2 again"]
    # a new question goes at the current branch's end
    q3 = await store.add_message(chat_id, {"role": "user", "content": "Q3"})
    await store.save_turn(chat_id, "a3", _answer("A3"))
    assert [m.id for m in await store.get_messages(chat_id)] == [*ids[:3], "a2b", q3, "a3"]
    # back to the first answer: its branch ends there
    assert await store.switch_branch(chat_id, "a2") == "a2"
    assert _texts(await store.load_messages(chat_id)) == ["Q1", "A1", "Q2", "A2"]
    # and to the other: down to its newest leaf
    assert await store.switch_branch(chat_id, "a2b") == "a3"
    assert [m.id for m in await store.get_messages(chat_id, limit=2)] == [q3, "a3"]
    assert [m.id for m in await store.get_messages(chat_id, before=q3, limit=1)] == ["a2b"]


async def test_editing_a_question_branches_from_its_parent(store: Store) -> None:
    chat_id, ids = await _line(store)
    q2b = await store.add_branch(chat_id, {"role": "user", "content": "Q2'"}, parent_id=ids[1])
    await store.save_turn(chat_id, "a2c", _answer("A2'"))
    messages = await store.get_messages(chat_id)
    assert [m.id for m in messages] == [*ids[:2], q2b, "a2c"]
    assert messages[2].siblings == (ids[2], q2b) and messages[3].siblings == ()
    assert _texts(await store.load_messages(chat_id)) == ["Q1", "A1", "Q2'", "A2'"]
    first = await store.add_branch(chat_id, {"role": "user", "content": "Q1'"}, parent_id=None)
    assert [m.id for m in await store.get_messages(chat_id)] == [first]
    assert (await store.get_messages(chat_id))[0].siblings == (ids[0], first)
    assert await store.switch_branch(chat_id, ids[0]) == "a2c"  # its newest child, down


async def test_branching_refuses_what_is_not_in_the_chat(store: Store) -> None:
    chat_id, _ = await _line(store)
    other = await store.create_chat((await store.create_user("bob")).id)
    elsewhere = await store.add_message(other.id, {"role": "user", "content": "x"})
    with pytest.raises(NotFoundError):
        await store.add_branch(chat_id, {"role": "user", "content": "y"}, parent_id=elsewhere)
    with pytest.raises(NotFoundError):
        await store.add_branch("nope", {"role": "user", "content": "y"}, parent_id=None)
    assert await store.switch_branch(chat_id, elsewhere) is None
    assert await store.switch_branch("nope", elsewhere) is None


def test_the_tree_helpers() -> None:
    parents: dict[str, str | None] = {"q": None, "a": "q", "b": "q", "c": "b", "d": "d"}
    assert branch_ids(parents, "c") == ["q", "b", "c"]
    assert branch_ids(parents, "d") == ["d"]  # a damaged chain ends, never loops
    assert branch_ids(parents, "x") == []
    assert sibling_ids(parents) == {"a": ("a", "b"), "b": ("a", "b")}
    assert newest_leaf(parents, "q") == "c" and newest_leaf(parents, "a") == "a"


async def test_the_migration_gives_existing_messages_their_parents(sql_url: str) -> None:
    """Chats written before 0009 are lines: each message's parent is the one before it."""
    when = datetime(2026, 1, 1, tzinfo=UTC)
    engine = create_engine(sql_url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(
                lambda c: command.upgrade(_alembic_config(c), "0008_user_valves")
            )
            await connection.execute(
                text(
                    "INSERT INTO users (id, name, is_admin, created_at) VALUES ('u', 'a', :f, :t)"
                ),
                {"f": False, "t": when},
            )
            for chat in ("c1", "c2"):
                await connection.execute(
                    text(
                        "INSERT INTO chats (id, user_id, tags, created_at, updated_at)"
                        " VALUES (:c, 'u', '[]', :t, :t)"
                    ),
                    {"c": chat, "t": when},
                )
            for mid, chat, role in [("m1", "c1", "user"), ("m2", "c2", "user"),
                                    ("m3", "c1", "assistant"), ("m4", "c1", "user")]:  # fmt: skip
                await connection.execute(
                    text(
                        "INSERT INTO messages (id, chat_id, role, content, output, follow_ups,"
                        " created_at, updated_at) VALUES (:m, :c, :r, '\"x\"', '[]', '[]', :t, :t)"
                    ),
                    {"m": mid, "c": chat, "r": role, "t": when},
                )
    finally:
        await engine.dispose()
    store = await SQLStore.open(sql_url)  # migrates to head
    try:
        found = await store.get_messages("c1")
        assert [(m.id, m.parent_id) for m in found] == [("m1", None), ("m3", "m1"), ("m4", "m3")]
        assert [(m.id, m.parent_id) for m in await store.get_messages("c2")] == [("m2", None)]
        regenerated = await store.add_branch("c1", {"role": "assistant"}, parent_id="m1")
        assert [m.id for m in await store.get_messages("c1")] == ["m1", regenerated]
    finally:
        await store.close()
