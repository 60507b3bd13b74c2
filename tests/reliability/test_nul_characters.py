"""NUL characters in what a client or a model sends are stored, on both SQL backends
(issue 24 item 8).

PostgreSQL refuses U+0000 in text (`CharacterNotInRepertoireError`): a `/v1`
request with one was answered but its request-log entry was dropped. Messages
and turns are JSON, which keeps NUL escaped (`\\u0000`): their content comes
back exactly. The plain text columns (a chat's title, the search index, a whole
tool output) get each NUL replaced by U+FFFD on PostgreSQL; SQLite keeps it.
"""

from __future__ import annotations

import pytest

from tests.adapters.stores.conftest import postgres_database
from tests.server.conftest import Running
from tests.server.observe.test_request_log import ask, logged
from tests.server.test_openai_api import text_reply
from toolrelay.adapters.stores import NewChat
from toolrelay.adapters.stores.sql import SQLStore

CHAT = "/v1/chat/completions"


def test_a_v1_request_with_nul_is_logged(served_db: Running) -> None:
    served_db.upstream.route(CHAT, text_reply("fine\x00answer"))
    with served_db.client() as client:
        ask(client, "nul\x00here")
        [chat] = logged(client, 1)
        saved = client.get(f"/api/chats/{chat['id']}").json()["messages"]
        assert [m["content"] for m in saved] == ["nul\x00here", "fine\x00answer"]
        assert chat["title"] in ("nul\x00here", "nul\ufffdhere")
        found = client.get("/api/chats", params={"source": "api", "q": "here"}).json()
        assert [c["id"] for c in found["data"]] == [chat["id"]]


@pytest.mark.anyio
@pytest.mark.postgres
async def test_postgres_keeps_every_write_with_nul() -> None:
    async with postgres_database() as url:
        store = await SQLStore.open(url)
        try:
            user = await store.create_user("n\x00ul")
            chat = await store.create_chat(user.id, title="t\x00itle")
            await store.update_chat(chat.id, title="ti\x00tle", tags=["a\x00b"])
            await store.add_message(chat.id, {"role": "user", "content": "q\x00"})
            turn = {
                "content": "an\x00swer",
                "status": "completed",
                "output": [],
                "whole_outputs": {"item_1": "whole\x00output"},
            }
            await store.save_turn(chat.id, "msg_1", turn)
            await store.checkpoint_turn(chat.id, "msg_1", turn)
            await store.add_chats(
                [NewChat("api_1", user.id, "lo\x00g", None, ["x\x00"], [], "msg_2", turn)]
            )
            messages = await store.get_messages(chat.id)
            assert [m.content for m in messages] == ["q\x00", "an\x00swer"]
            got = await store.get_chat(chat.id, user_id=user.id)
            assert got is not None and got.title == "ti\ufffdtle"
            assert await store.get_tool_output(chat.id, "item_1") == "whole\ufffdoutput"
        finally:
            await store.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
