"""Long chats: messages read a page at a time, and the history kept between turns.

`get_messages(limit=, before=)` on every backend; `SQLStore.load_messages` keeps the
settled part of a chat's history (`stores.history_cache`) and must answer exactly
what a fresh read answers, whatever changed in between: a turn saved, an old
message rewritten (by this store, or by another process's), a chat deleted, a
caller that changed what it was given.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolrelay.adapters.stores import Store
from toolrelay.adapters.stores.sql import SQLStore

from .conftest import FakeClock

pytestmark = pytest.mark.anyio


def _answer(text: str, status: str = "completed") -> dict[str, Any]:
    item = {
        "type": "message",
        "id": f"item_{text}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return {"output": [item], "content": text, "status": status}


async def _chat(store: Store, turns: int) -> tuple[str, list[str]]:
    user = await store.create_user("u")
    chat = await store.create_chat(user.id)
    ids = []
    for i in range(turns):
        ids.append(await store.add_message(chat.id, {"role": "user", "content": f"q{i}"}))
        await store.save_turn(chat.id, f"msg_a{i}", _answer(f"a{i}"))
        ids.append(f"msg_a{i}")
    return chat.id, ids


async def test_pages_of_messages_end_where_asked(store: Store) -> None:
    chat_id, ids = await _chat(store, 5)  # 10 messages
    assert [m.id for m in await store.get_messages(chat_id)] == ids
    assert [m.id for m in await store.get_messages(chat_id, limit=3)] == ids[-3:]
    page = await store.get_messages(chat_id, before=ids[4], limit=3)
    assert [m.id for m in page] == ids[1:4]
    assert [m.id for m in await store.get_messages(chat_id, before=ids[2], limit=5)] == ids[:2]
    assert [m.id for m in await store.get_messages(chat_id, before=ids[3])] == ids[:3]
    assert await store.get_messages(chat_id, before="msg_unknown", limit=3) == []
    assert await store.get_messages(chat_id, limit=0) == []
    assert (await store.get_messages(chat_id, limit=2))[-1].content == "a4"


def _texts(history: list[dict[str, Any]]) -> list[Any]:
    return [m.get("content") for m in history]


async def test_kept_history_answers_as_a_fresh_read(sql_url: str, clock: FakeClock) -> None:
    store = await SQLStore.open(sql_url, clock=clock)
    fresh = await SQLStore.open(sql_url, clock=clock, migrate=False, history_cache_bytes=0)
    try:
        chat_id, ids = await _chat(store, 3)
        first = await store.load_messages(chat_id)
        assert first == await fresh.load_messages(chat_id)
        assert _texts(first) == ["q0", "a0", "q1", "a1", "q2", "a2"]

        # a caller changing what it got changes nothing kept
        first[0]["content"] = "changed"
        first.append({"role": "user", "content": "stray"})
        assert _texts(await store.load_messages(chat_id))[:1] == ["q0"]

        # a new turn: the user message, its answer in progress (not kept), then saved
        await store.add_message(chat_id, {"role": "user", "content": "q3"})
        await store.save_turn(chat_id, "msg_a3", _answer("", status="in_progress"))
        await store.add_message(chat_id, {"role": "user", "content": "q4"})
        assert await store.load_messages(chat_id) == await fresh.load_messages(chat_id)
        await store.save_turn(chat_id, "msg_a3", _answer("a3"))
        loaded = await store.load_messages(chat_id)
        assert loaded == await fresh.load_messages(chat_id)
        assert _texts(loaded)[-3:] == ["q3", "a3", "q4"]

        # an old answer rewritten by this store
        await store.save_turn(chat_id, "msg_a0", _answer("a0 again"))
        assert _texts(await store.load_messages(chat_id))[1] == "a0 again"

        # ... and by another process (another store on the same database)
        await fresh.save_turn(chat_id, "msg_a1", _answer("a1 elsewhere"))
        assert _texts(await store.load_messages(chat_id))[3] == "a1 elsewhere"
        assert await store.load_messages(chat_id) == await fresh.load_messages(chat_id)
    finally:
        await fresh.close()
        await store.close()


async def test_a_deleted_chat_keeps_no_history(sql_store: SQLStore) -> None:
    chat_id, _ = await _chat(sql_store, 2)
    user_id = (await sql_store.list_users())[0].id
    assert len(await sql_store.load_messages(chat_id)) == 4
    assert await sql_store.delete_chat(chat_id, user_id=user_id)
    assert await sql_store.load_messages(chat_id) == []
    again = await sql_store.create_chat(user_id, chat_id=chat_id)
    await sql_store.add_message(again.id, {"role": "user", "content": "new start"})
    assert _texts(await sql_store.load_messages(chat_id)) == ["new start"]


def _tool_turn(call_id: str, result: str) -> dict[str, Any]:
    call = {"type": "function_call", "id": f"fc_{result}", "call_id": call_id}
    call |= {"name": "x", "arguments": "{}", "status": "completed"}
    out = {"type": "function_call_output", "id": f"fo_{result}", "call_id": call_id}
    out |= {"output": result, "status": "completed"}
    return {"output": [call, out], "content": "", "status": "completed"}


async def test_a_call_id_reused_after_the_kept_part_is_made_unique(
    sql_url: str, clock: FakeClock
) -> None:
    """Kimi restarts `functions.x:0` each round: read in parts, as read whole."""
    store = await SQLStore.open(sql_url, clock=clock)
    fresh = await SQLStore.open(sql_url, clock=clock, migrate=False, history_cache_bytes=0)
    try:
        user = await store.create_user("u")
        chat_id = (await store.create_chat(user.id)).id
        await store.add_message(chat_id, {"role": "user", "content": "one"})
        await store.save_turn(chat_id, "msg_1", _tool_turn("functions.x:0", "r1"))
        await store.load_messages(chat_id)  # kept up to here
        await store.add_message(chat_id, {"role": "user", "content": "two"})
        await store.save_turn(chat_id, "msg_2", _tool_turn("functions.x:0", "r2"))
        loaded = await store.load_messages(chat_id)
        assert loaded == await fresh.load_messages(chat_id)
        ids = [m["tool_call_id"] for m in loaded if m["role"] == "tool"]
        assert len(set(ids)) == 2
        assert await store.load_messages(chat_id) == loaded  # and from the kept part again
    finally:
        await fresh.close()
        await store.close()
