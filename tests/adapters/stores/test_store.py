"""The Store API, run identically against SQLite, PostgreSQL and memory (see conftest)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from toolrelay.adapters.stores import NotFoundError, Store
from toolrelay.core.formats.transcript import to_chat_messages

pytestmark = pytest.mark.anyio

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def at(seconds: int) -> datetime:
    """The FakeClock's n-th reading."""
    return T0 + timedelta(seconds=seconds)


TOOL_TURN_OUTPUT: list[dict[str, Any]] = [
    {
        "type": "reasoning",
        "id": "rs_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "need weather"}],
        "summary": [],
    },
    {
        "type": "message",
        "id": "msg_a",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Let me check."}],
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    },
    {
        "type": "function_call_output",
        "id": "fco_1",
        "call_id": "call_1",
        "output": "sunny, 21C",
        "status": "completed",
    },
    {
        "type": "message",
        "id": "msg_b",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "It is sunny in Paris."}],
    },
]


def completed_turn(text: str = "done", **extra: Any) -> dict[str, Any]:
    turn: dict[str, Any] = {
        "output": [
            {
                "type": "message",
                "id": "msg_x",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text}],
            }
        ],
        "content": text,
        "usage": {"input_tokens": 10, "output_tokens": 3},
        "status": "completed",
        "error": None,
        "timings": {"total_s": 1.5},
        "model": "gpt-test",
        "follow_ups": ["Why?"],
    }
    turn.update(extra)
    return turn


async def test_users_are_created_and_counted(store: Store) -> None:
    assert await store.count_users() == 0
    alice = await store.create_user("alice", is_admin=True)
    bob = await store.create_user("bob")
    assert (alice.name, alice.is_admin, alice.created_at) == ("alice", True, at(1))
    assert (bob.name, bob.is_admin) == ("bob", False)
    assert alice.id.startswith("user_") and alice.id != bob.id
    assert await store.count_users() == 2
    assert await store.list_users() == [alice, bob]  # oldest first


async def test_generated_key_authenticates_its_user(store: Store) -> None:
    alice = await store.create_user("alice")
    record, key = await store.create_api_key(alice.id, name="laptop")
    assert re.fullmatch(r"tr-[A-Za-z0-9_-]{40}", key)
    assert (record.user_id, record.name, record.prefix) == (alice.id, "laptop", "tr-")
    assert record.revoked_at is None
    assert await store.user_for_key(key) == alice
    assert await store.user_for_key(key + "x") is None
    assert await store.user_for_key("") is None
    assert await store.list_api_keys(alice.id) == [record]


async def test_revoked_key_is_rejected(store: Store) -> None:
    alice = await store.create_user("alice")
    record, key = await store.create_api_key(alice.id)
    other, other_key = await store.create_api_key(alice.id)
    assert await store.revoke_api_key(record.id) is True
    assert await store.revoke_api_key(record.id) is False
    assert await store.revoke_api_key("key_unknown") is False
    assert await store.user_for_key(key) is None
    assert await store.user_for_key(other_key) == alice
    listed = await store.list_api_keys()
    assert [(k.id, k.revoked_at) for k in listed] == [(record.id, at(4)), (other.id, None)]


async def test_key_with_given_value_is_idempotent_per_user(store: Store) -> None:
    admin = await store.create_user("admin", is_admin=True)
    bob = await store.create_user("bob")
    first = await store.create_api_key_with_value(admin.id, "admin-secret-value", name="env")
    again = await store.create_api_key_with_value(admin.id, "admin-secret-value")
    assert again == first
    assert first.prefix == ""  # no character of a secret is stored
    assert await store.user_for_key("admin-secret-value") == admin
    with pytest.raises(ValueError, match="another user"):
        await store.create_api_key_with_value(bob.id, "admin-secret-value")
    with pytest.raises(NotFoundError):
        await store.create_api_key_with_value("user_missing", "k")
    assert await store.list_api_keys(bob.id) == []


async def test_users_cannot_see_or_delete_each_others_chats(store: Store) -> None:
    alice = await store.create_user("alice")
    bob = await store.create_user("bob")
    chat = await store.create_chat(alice.id, title="secret", model="m1")
    assert await store.get_chat(chat.id, user_id=alice.id) == chat
    assert await store.get_chat(chat.id, user_id=bob.id) is None
    assert await store.list_chats(bob.id) == ([], 0)
    assert await store.delete_chat(chat.id, user_id=bob.id) is False
    assert await store.get_chat(chat.id, user_id=alice.id) == chat
    assert await store.delete_chat(chat.id, user_id=alice.id) is True
    assert await store.get_chat(chat.id, user_id=alice.id) is None
    assert await store.delete_chat(chat.id, user_id=alice.id) is False


async def test_create_chat_fields_and_given_id(store: Store) -> None:
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id, title="t", model="m", chat_id="chat_fixed")
    assert (chat.id, chat.user_id, chat.title, chat.model, chat.tags) == (
        "chat_fixed",
        alice.id,
        "t",
        "m",
        [],
    )
    assert chat.created_at == chat.updated_at == at(2)
    with pytest.raises(ValueError, match="already exists"):
        await store.create_chat(alice.id, chat_id="chat_fixed")
    with pytest.raises(NotFoundError):
        await store.create_chat("user_missing")


async def test_list_chats_pages_newest_updated_first(store: Store) -> None:
    alice = await store.create_user("alice")
    bob = await store.create_user("bob")
    chats = [await store.create_chat(alice.id, title=f"c{i}") for i in range(5)]
    await store.create_chat(bob.id)
    await store.add_message(chats[1].id, {"role": "user", "content": "bump"})

    page, total = await store.list_chats(alice.id, limit=2)
    assert total == 5
    assert [c.title for c in page] == ["c1", "c4"]
    page, total = await store.list_chats(alice.id, limit=2, offset=2)
    assert ([c.title for c in page], total) == (["c3", "c2"], 5)
    page, total = await store.list_chats(alice.id, limit=2, offset=4)
    assert ([c.title for c in page], total) == (["c0"], 5)
    assert await store.list_chats(alice.id, offset=10) == ([], 5)


async def test_update_chat_sets_only_given_fields(store: Store) -> None:
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id, title="old")
    await store.update_chat(chat.id, tags=["a", "b"])
    updated = await store.get_chat(chat.id, user_id=alice.id)
    assert updated is not None
    assert (updated.title, updated.tags, updated.updated_at) == ("old", ["a", "b"], at(3))
    await store.update_chat(chat.id, title="new")
    updated = await store.get_chat(chat.id, user_id=alice.id)
    assert updated is not None
    assert (updated.title, updated.tags, updated.updated_at) == ("new", ["a", "b"], at(4))
    with pytest.raises(NotFoundError):
        await store.update_chat("chat_missing", title="x")


async def test_messages_are_kept_in_creation_order(store: Store) -> None:
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    parts = [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    first = await store.add_message(chat.id, {"role": "system", "content": "be brief"})
    second = await store.add_message(chat.id, {"role": "user", "content": parts})
    messages = await store.get_messages(chat.id)
    assert [(m.id, m.role, m.content) for m in messages] == [
        (first, "system", "be brief"),
        (second, "user", parts),
    ]
    assert [m.created_at for m in messages] == [at(3), at(4)]
    assert messages[0].output == [] and messages[0].status is None
    with pytest.raises(NotFoundError):
        await store.add_message("chat_missing", {"role": "user", "content": "x"})
    with pytest.raises(ValueError, match="tool"):
        await store.add_message(chat.id, {"role": "tool", "content": "x"})


async def test_save_turn_upserts_the_assistant_message(store: Store) -> None:
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    await store.add_message(chat.id, {"role": "user", "content": "hi"})
    await store.save_turn(
        chat.id, "msg_turn", {"output": [], "content": "", "status": "in_progress"}
    )
    partial = (await store.get_messages(chat.id))[1]
    assert (partial.id, partial.role, partial.status, partial.content) == (
        "msg_turn",
        "assistant",
        "in_progress",
        "",
    )
    turn = completed_turn("hello there")
    await store.save_turn(chat.id, "msg_turn", turn)

    messages = await store.get_messages(chat.id)
    assert [m.id for m in messages][1:] == ["msg_turn"]
    saved = messages[1]
    assert saved.output == turn["output"]
    assert (saved.content, saved.status, saved.error, saved.model) == (
        "hello there",
        "completed",
        None,
        "gpt-test",
    )
    assert saved.usage == {"input_tokens": 10, "output_tokens": 3}
    assert saved.timings == {"total_s": 1.5}
    assert saved.follow_ups == ["Why?"]
    assert (saved.created_at, saved.updated_at) == (at(4), at(5))
    refreshed = await store.get_chat(chat.id, user_id=alice.id)
    assert refreshed is not None and refreshed.updated_at == at(5)


async def test_failed_save_turn_keeps_the_previous_row(store: Store) -> None:
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    await store.save_turn(chat.id, "msg_turn", completed_turn("kept"))
    before = await store.get_messages(chat.id)
    chat_before = await store.get_chat(chat.id, user_id=alice.id)

    bad = completed_turn("lost", timings={"started": object()})
    with pytest.raises(TypeError):
        await store.save_turn(chat.id, "msg_turn", bad)
    with pytest.raises(ValueError, match="status"):
        await store.save_turn(chat.id, "msg_turn", completed_turn("lost", status="weird"))
    with pytest.raises(TypeError):
        await store.save_turn(chat.id, "msg_new", completed_turn(output=[{"x": {1, 2}}]))

    assert await store.get_messages(chat.id) == before
    assert await store.get_chat(chat.id, user_id=alice.id) == chat_before


async def test_save_turn_refuses_unknown_chat_and_foreign_message(store: Store) -> None:
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    other = await store.create_chat(alice.id)
    user_message = await store.add_message(chat.id, {"role": "user", "content": "hi"})
    await store.save_turn(chat.id, "msg_turn", completed_turn())
    with pytest.raises(NotFoundError):
        await store.save_turn("chat_missing", "msg_new", completed_turn())
    with pytest.raises(NotFoundError):
        await store.save_turn(other.id, "msg_turn", completed_turn("hijack"))
    with pytest.raises(NotFoundError):
        await store.save_turn(chat.id, user_message, completed_turn("overwrite user"))
    assert await store.get_messages(other.id) == []
    assert [m.content for m in await store.get_messages(chat.id)] == ["hi", "done"]


async def test_load_messages_expands_tool_turns(store: Store) -> None:
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    await store.add_message(chat.id, {"role": "system", "content": "be brief"})
    await store.add_message(chat.id, {"role": "user", "content": "weather in Paris?"})
    await store.save_turn(
        chat.id,
        "msg_1",
        {"output": TOOL_TURN_OUTPUT, "content": "It is sunny in Paris.", "status": "completed"},
    )
    await store.add_message(chat.id, {"role": "user", "content": "thanks"})
    await store.save_turn(
        chat.id, "msg_2", {"output": [], "content": "you're welcome", "status": "failed"}
    )
    await store.save_turn(chat.id, "msg_3", {"output": [], "content": "", "status": "cancelled"})

    assert await store.load_messages(chat.id) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"},
        {"role": "assistant", "content": "It is sunny in Paris."},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "you're welcome"},
    ]
    # the expansion is exactly the transcript module's, not a private copy of it
    assert (await store.load_messages(chat.id))[2:5] == to_chat_messages(TOOL_TURN_OUTPUT)


async def test_delete_chat_removes_its_messages(store: Store) -> None:
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    kept = await store.create_chat(alice.id)
    await store.add_message(chat.id, {"role": "user", "content": "hi"})
    await store.save_turn(chat.id, "msg_turn", completed_turn())
    kept_id = await store.add_message(kept.id, {"role": "user", "content": "stay"})
    assert await store.delete_chat(chat.id, user_id=alice.id) is True
    assert await store.get_messages(chat.id) == []
    assert await store.load_messages(chat.id) == []
    assert [m.id for m in await store.get_messages(kept.id)] == [kept_id]
    # the id is free again: the old assistant message really is gone
    again = await store.create_chat(alice.id, chat_id=chat.id)
    await store.save_turn(again.id, "msg_turn", completed_turn("fresh"))
    assert [m.content for m in await store.get_messages(again.id)] == ["fresh"]


async def test_returned_values_do_not_alias_stored_state(store: Store) -> None:
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    turn = completed_turn("original")
    await store.save_turn(chat.id, "msg_turn", turn)
    turn["output"][0]["content"][0]["text"] = "mutated after save"
    fetched = (await store.get_messages(chat.id))[0]
    fetched.output.append({"type": "junk"})
    assert (await store.get_messages(chat.id))[0].output == completed_turn("original")["output"]


@pytest.mark.anyio
async def test_user_named_finds_the_oldest(store: Any) -> None:
    assert await store.user_named("nobody") is None
    first = await store.create_user("ann")
    await store.create_user("ann")
    await store.create_user("bob")
    found = await store.user_named("ann")
    assert found is not None and found.id == first.id
