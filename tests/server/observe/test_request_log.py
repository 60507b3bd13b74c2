"""The request log: `/v1` turns saved as the caller's chats, listed, searched, pruned."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.patience import HANG
from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_openai_api import call_reply, text_reply
from toolrelay.adapters.stores import MemoryStore, NewChat
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.config.settings import Settings
from toolrelay.core.turn.status import TurnStatus
from toolrelay.engine.finish import RunResult
from toolrelay.server.api_log import ApiTurnLog
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import responses_events

CHAT = "/v1/chat/completions"


def logged(client: httpx2.Client, count: int, **params: Any) -> list[dict[str, Any]]:
    """The request log's chats once it holds `count`, each with its turn saved (the log
    writes in the background, after the answer: chat, messages, then the turn)."""
    deadline = time.monotonic() + HANG
    while True:
        page = client.get("/api/chats", params={"source": "api", **params}).json()
        chats = page["data"]
        if page["total"] == len(chats) == count and all(_complete(client, c["id"]) for c in chats):
            return list(page["data"])
        assert time.monotonic() < deadline, page
        time.sleep(0.02)


def _complete(client: httpx2.Client, chat_id: str) -> bool:
    messages = client.get(f"/api/chats/{chat_id}").json().get("messages") or []
    return bool(messages) and messages[-1]["role"] == "assistant"


def ask(client: httpx2.Client, text: str) -> httpx2.Response:
    body = {"model": "fake", "messages": [{"role": "user", "content": text}]}
    answer = client.post(CHAT, json=body)
    assert answer.status_code == 200, answer.text
    return answer


def test_v1_turns_are_saved_listed_and_searched(running: Running) -> None:
    running.upstream.route(CHAT, call_reply("add", {"a": 2, "b": 3}), text_reply("The sum is 5."))
    running.upstream.route(
        "/v1/responses", SSEReply(responses_events(text="Bonjour from responses."))
    )
    with running.client() as client:
        system = {"role": "system", "content": "Be brief."}
        body = {"model": "fake", "messages": [system, {"role": "user", "content": "What is 2+3?"}]}
        answer = client.post(CHAT, json=body)
        assert answer.status_code == 200, answer.text
        [chat] = logged(client, 1)
        assert (chat["title"], chat["tags"], chat["model"]) == ("What is 2+3?", ["api"], "fake")
        saved = client.get(f"/api/chats/{chat['id']}").json()["messages"]
        assert [(m["role"], m["content"]) for m in saved] == [
            ("system", "Be brief."),
            ("user", "What is 2+3?"),
            ("assistant", "The sum is 5."),
        ]
        turn = saved[-1]
        assert turn["id"] == answer.headers["x-request-id"]  # the id the log lines carry
        assert (turn["status"], turn["model"]) == ("completed", "fake")
        assert [i["type"] for i in turn["output"]] == [
            "function_call",
            "function_call_output",
            "message",
        ]
        assert turn["usage"]["input_tokens"] == 30

        responses = client.post(
            "/v1/responses", json={"model": "fake-responses", "input": "Say bonjour"}
        )
        assert responses.status_code == 200, responses.text
        both = logged(client, 2)
        assert [c["title"] for c in both] == ["Say bonjour", "What is 2+3?"]
        # searchable like any chat, and kept apart from the chat API's own chats
        assert [c["title"] for c in logged(client, 1, q="bonjour from")] == ["Say bonjour"]
        assert logged(client, 0, q="nothing like this") == []
        client.post("/api/chats", json={"title": "a chat of my own"})
        mine = client.get("/api/chats", params={"source": "chat"}).json()["data"]
        assert [c["title"] for c in mine] == ["a chat of my own"]
        assert client.get("/api/chats").json()["total"] == 3
    with running.client(_other_key(running)) as other:  # another user sees none of them
        assert other.get("/api/chats", params={"source": "api"}).json()["total"] == 0


def _other_key(running: Running) -> str:
    with running.client() as admin:
        made = admin.post("/api/admin/keys", json={"user": "eve", "name": "k"})
        return str(made.json()["key"])


def _chat_count(url: str) -> int:
    async def count() -> int:
        store = await SQLStore.open(url)
        try:
            user = await store.user_named("admin")
            assert user is not None
            return (await store.list_chats(user.id))[1]
        finally:
            await store.close()

    return asyncio.run(count())


def test_off_saves_nothing(tmp_path: Path) -> None:
    with FakeModelServer() as fake:
        settings = make_settings(tmp_path, fake, log_api_turns=False)
        fake.route(CHAT, text_reply("hi"), text_reply("hi again"))
        with ServerThread(settings) as url, httpx2.Client(base_url=url, timeout=HANG) as client:
            client.headers["Authorization"] = f"Bearer {settings.admin_key}"
            ask(client, "one")
            ask(client, "two")
    # the server has stopped, and its shutdown waits for the log's writes: nothing was written
    assert _chat_count(settings.database_url) == 0


def test_retention_keeps_the_newest(tmp_path: Path) -> None:
    with FakeModelServer() as fake:
        settings = make_settings(tmp_path, fake, api_turns_max_count=2)
        fake.route(CHAT, *(text_reply(f"answer {i}") for i in range(3)))
        with ServerThread(settings) as url, httpx2.Client(base_url=url, timeout=HANG) as client:
            client.headers["Authorization"] = f"Bearer {settings.admin_key}"
            client.post("/api/chats", json={"title": "mine"})
            ask(client, "q0")
            logged(client, 1)
            ask(client, "q1")
            logged(client, 2)
            ask(client, "q2")
            deadline = time.monotonic() + HANG
            while [c["title"] for c in logged(client, 2)] != ["q2", "q1"]:
                assert time.monotonic() < deadline, "the oldest turn was never pruned"
                time.sleep(0.02)
            assert [c["title"] for c in client.get("/api/chats").json()["data"]][-1] == "mine"
    assert _chat_count(settings.database_url) == 3


class CountingStore(MemoryStore):
    """Counts the batches the log writes."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    async def add_chats(self, chats: Sequence[NewChat]) -> None:
        self.batches.append(len(chats))
        await super().add_chats(chats)


def test_turns_ended_together_are_written_together_and_a_bad_one_costs_only_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> tuple[CountingStore, list[str]]:
        store = CountingStore()
        alice = (await store.create_user("alice")).id
        log = ApiTurnLog(store, Settings(data_dir=tmp_path))
        done = RunResult(output=[], text="hello", usage={}, status=TurnStatus.COMPLETED)
        ask = [{"role": "user", "content": "q"}]
        for i, user in enumerate([alice, alice, "user_gone", alice]):  # one loop step
            log.record(user, "fake", [{"role": "user", "content": f"q{i}"}], f"req_{i}", done)
        await log.drain()
        log.record(alice, "fake", ask, "req_late", done)  # after the drain: a new writer
        await log.drain()
        chats, _ = await store.list_chats(alice, limit=10)
        return store, sorted(str(c.title) for c in chats)

    with caplog.at_level(logging.ERROR, "toolrelay.server"):
        store, titles = asyncio.run(scenario())
    assert titles == ["q", "q0", "q1", "q3"]
    # one batch of four fails on the unknown user; then each alone; then the late one
    assert store.batches == [4, 1, 1, 1, 1, 1]
    assert "could not save /v1 turn req_2" in caplog.text
