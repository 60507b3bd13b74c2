"""Issue 29 item 3 through a running server: what tools and filters receive
(`__metadata__`, `__model__`, `__request__` without secrets, `__tools__`, `__task__`), and
inlets on every model call of a turn, from the client's history (nothing stacks up)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server import context_tools
from tests.server.conftest import ADMIN_KEY, Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.testing.fake_server import FakeModelServer, RecordedRequest, Reply, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

PROBE = Path(context_tools.__file__)


@pytest.fixture
def probing(tmp_path: Path, upstream: FakeModelServer) -> Iterator[Running]:
    settings = make_settings(tmp_path, upstream, tools=[str(PROBE)], filters=[f"{PROBE}:Filter"])
    with ServerThread(settings) as base_url:
        yield Running(base_url, upstream, settings)


def _probe_then_answer(request: RecordedRequest) -> Reply:
    if any(m["role"] == "tool" for m in request.json["messages"]):
        return SSEReply(chat_chunks(text="Seen."))
    return SSEReply(chat_chunks(tool_calls=[ToolCallSpec("probe", {}, id="p1")]))


def _probe_result(output: list[dict[str, Any]]) -> dict[str, Any]:
    item = next(i for i in output if i["type"] == "function_call_output")
    text = item["output"] if isinstance(item["output"], str) else item["output"][0]["text"]
    result: dict[str, Any] = json.loads(text)
    return result


def test_a_chat_turn_gives_tools_and_filters_their_context(probing: Running) -> None:
    probing.upstream.set_default(_probe_then_answer)
    with probing.client() as client:
        chat_id = new_chat(client, model="fake")
        posted = client.post(
            f"/api/chats/{chat_id}/messages",
            json={"content": "who am I?"},
            headers={"X-Probe": "yes", "X-Session-Token": "hidden", "Cookie": "a=b"},
        )
        assert posted.status_code == 202, posted.text
        read_events(client, chat_id, last=0)
        saved = wait_saved(client, chat_id)
    seen = _probe_result(saved["output"])
    assert seen["chat_id"] == chat_id and seen["message_id"] == saved["id"]
    assert seen["user_id"] == seen["user"] == seen["request_user"] and seen["user_id"]
    assert seen["interface"] == "chat"
    assert seen["model"] == seen["meta_model"] == "fake"
    assert "probe" in seen["tool_ids"] and "probe" in seen["tools"]
    assert seen["x_probe"] == "yes" and seen["path"] == f"/api/chats/{chat_id}/messages"
    headers = {k.lower() for k in seen["headers"]}
    assert not headers & {"authorization", "cookie", "x-session-token"}
    assert ADMIN_KEY not in json.dumps(seen)

    # the inlet ran before each of the two model calls, from the client's history: its
    # note (what it saw, as JSON) heads each request, once
    sent = [r.json["messages"] for r in probing.upstream.requests]
    notes = [[m for m in s if str(m.get("content", "")).startswith("inlet ")] for s in sent]
    assert [len(n) for n in notes] == [1, 1] and all(
        s[0] == n[0] for s, n in zip(sent, notes, strict=True)
    )
    calls = [json.loads(n[0]["content"].removeprefix("inlet ")) for n in notes]
    assert [c["call"] for c in calls] == [0, 1]
    assert all(c["model"] == "fake" and c["x_probe"] == "yes" for c in calls)
    assert all(c["task"] is None and c["task_body"] is None for c in calls)
    assert calls[0]["messages"] == calls[1]["messages"] == 1  # the client's history both times


def test_the_openai_api_passes_the_same_context(probing: Running) -> None:
    probing.upstream.set_default(_probe_then_answer)
    with probing.client() as client:
        answer = client.post(
            "/v1/chat/completions",
            json={"model": "fake", "messages": [{"role": "user", "content": "hi"}]},
            headers={"X-Probe": "v1", "X-Request-ID": "req-ctx-1"},
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "Seen."
    tool_reply = [m for m in probing.upstream.requests[-1].json["messages"] if m["role"] == "tool"]
    seen = json.loads(tool_reply[0]["content"])
    assert seen["interface"] == "v1" and seen["model"] == "fake" and seen["x_probe"] == "v1"
    assert seen["message_id"] == answer.headers["x-request-id"] and seen["chat_id"] is None
    assert seen["path"] == "/v1/chat/completions"
    assert "authorization" not in {k.lower() for k in seen["headers"]}


def test_tools_get_the_files_sent_with_the_message(probing: Running) -> None:
    probing.upstream.set_default(_probe_then_answer)
    with probing.client() as client:
        uploaded = client.post(
            "/api/files",
            params={"name": "a.txt"},
            content=b"A",
            headers={"Content-Type": "text/plain"},
        ).json()
        chat_id = new_chat(client, model="fake")
        posted = client.post(
            f"/api/chats/{chat_id}/messages", json={"content": "read", "files": [uploaded["id"]]}
        )
        assert posted.status_code == 202, posted.text
        saved = wait_saved(client, chat_id)
    seen = _probe_result(saved["output"])
    assert seen["files"] == seen["meta_files"] == ["a.txt"]
