"""Long chats over the API: pages of messages, a paged snapshot, the 202 before the history."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tests.patience import HANG
from tests.server.conftest import Running
from tests.server.test_chats_api import CHAT, new_chat, read_events, wait_saved
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.engine.interfaces import Message
from toolrelay.server.routes.chats import SNAPSHOT_MESSAGES
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import chat_chunks


async def _fill(url: str, chat_id: str, count: int) -> list[str]:
    store = await SQLStore.open(url, migrate=False)
    try:
        return [
            await store.add_message(chat_id, {"role": "user", "content": f"m{i}"})
            for i in range(count)
        ]
    finally:
        await store.close()


def test_a_long_chat_is_read_in_pages(running: Running) -> None:
    count = SNAPSHOT_MESSAGES + 150
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        ids = asyncio.run(_fill(running.settings.database_url, chat_id, count))

        whole = client.get(f"/api/chats/{chat_id}")
        assert whole.headers["content-type"] == "application/json"
        assert [m["id"] for m in whole.json()["messages"]] == ids
        assert whole.json()["more"] is False

        seen: list[str] = []
        query = "?limit=100"
        while True:
            page = client.get(f"/api/chats/{chat_id}{query}").json()
            seen = [m["id"] for m in page["messages"]] + seen
            if not page["more"]:
                break
            query = f"?limit=100&before={page['messages'][0]['id']}"
        assert seen == ids
        assert client.get(f"/api/chats/{chat_id}?limit=0").status_code == 400

        ((_, snapshot),) = read_events(client, chat_id, limit=1)
        assert snapshot["type"] == "chat:snapshot"
        assert [m["id"] for m in snapshot["data"]["messages"]] == ids[-SNAPSHOT_MESSAGES:]
        assert snapshot["data"]["more"] is True


def test_the_202_comes_before_the_history_is_read(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history is read by the turn, in the background: a read held up holds up no POST."""
    read = SQLStore.load_messages
    gate = threading.Event()
    asked = threading.Event()
    waited_out: list[bool] = []

    async def held(self: SQLStore, chat_id: str) -> list[Message]:
        asked.set()
        if not await asyncio.to_thread(gate.wait, HANG):
            waited_out.append(True)  # nobody opened the gate: the POST waited for this read
        return await read(self, chat_id)

    monkeypatch.setattr(SQLStore, "load_messages", held)
    running.upstream.route(CHAT, SSEReply(chat_chunks(text="Fine.")))
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "hello"})
        assert posted.status_code == 202
        assert asked.wait(HANG)
        assert not gate.is_set()  # answered while the history was still being read
        gate.set()
        saved: dict[str, Any] = wait_saved(client, chat_id)
        assert saved["content"] == "Fine."
        assert not waited_out
        assert running.upstream.requests[-1].json["messages"][-1]["content"] == "hello"


def test_the_final_event_refers_to_the_items_sent(running: Running) -> None:
    """On the chat's stream the answer's text goes out in its deltas and its item, not a
    third time in `chat:completion`."""
    pieces = [f"word{i} " for i in range(500)]
    running.upstream.route(CHAT, SSEReply(chat_chunks(text=pieces)))
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "talk"})
        saved = wait_saved(client, chat_id)
        events = [e for _, e in read_events(client, chat_id, last=0)]
    done = [e["data"]["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done[-1]["content"][0]["text"] == "".join(pieces) == saved["content"]
    (final,) = [e["data"] for e in events if e["type"] == "chat:completion" and e["data"]["done"]]
    assert final["output"] == [
        {"id": done[-1]["id"], "type": "message", "status": "completed", "ref": True}
    ]
    assert "content" not in final and final["status"] == "completed"
