"""Whole tool results cut for the model: kept once per item, per chat, gone with the chat."""

from __future__ import annotations

import pytest

from toolrelay.adapters.stores import Store

pytestmark = pytest.mark.anyio


async def test_whole_outputs_are_kept_apart_and_go_with_their_chat(store: Store) -> None:
    alice = (await store.create_user("alice")).id
    chat = await store.create_chat(alice)
    other = await store.create_chat(alice)
    item = {"type": "function_call_output", "id": "fco_1", "call_id": "c", "output": "cut"}
    turn = {"output": [item], "content": "", "whole_outputs": {"fco_1": "whole " * 1000}}
    await store.save_turn(chat.id, "msg_1", turn)
    await store.save_turn(chat.id, "msg_1", turn)  # saved again (follow-ups): kept once
    assert await store.get_tool_output(chat.id, "fco_1") == "whole " * 1000
    assert await store.get_tool_output(other.id, "fco_1") is None  # another chat's is not served
    [saved] = await store.get_messages(chat.id)
    assert saved.output == [item]  # the turn holds the cut item only
    with pytest.raises(TypeError, match="whole_outputs"):
        await store.save_turn(chat.id, "msg_2", {"output": [], "whole_outputs": {"x": 3}})
    assert await store.delete_chat(chat.id, user_id=alice)
    assert await store.get_tool_output(chat.id, "fco_1") is None
