"""Outlet filters and background tasks (title, tags, follow-ups) through the running server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.engine.tasks import PROMPTS
from toolrelay.testing.fake_server import FakeModelServer, RecordedRequest, Reply, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

CHAT = "/v1/chat/completions"
FILTERS = Path(__file__).parent / "filters_for_tests.py"
TASK_ANSWERS = {
    "title": '{"title": "Adding small numbers"}',
    "tags": 'Here you go:\n```json\n{"tags": ["Math", "Arithmetic"]}\n```',
    "follow_ups": '{"follow_ups": ["What is 2+2?", "Can you multiply too?"]}',
}


@pytest.fixture
def with_tasks(tmp_path: Path, upstream: FakeModelServer) -> Iterator[Running]:
    settings = make_settings(tmp_path, upstream, task_model="fake", filters=[f"{FILTERS}:Upper"])
    with ServerThread(settings) as base_url:
        yield Running(base_url, upstream, settings)


def task_of(request: RecordedRequest) -> str | None:
    """Which background task a request is, by its system prompt (None: the turn itself)."""
    messages = request.json["messages"]
    if messages and messages[0]["role"] == "system":
        for name, prompt in PROMPTS.items():
            if messages[0]["content"] == prompt:
                return name
    return None


def scripted(request: RecordedRequest) -> Reply:
    """The turn calls `add`, then answers; each task gets its JSON answer."""
    task = task_of(request)
    if task is not None:
        return SSEReply(chat_chunks(text=[TASK_ANSWERS[task][:9], TASK_ANSWERS[task][9:]]))
    if any(m["role"] == "tool" for m in request.json["messages"]):
        return SSEReply(chat_chunks(text=["The sum ", "is 3."]))
    return SSEReply(chat_chunks(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2}, id="call_a")]))


def _types(events: list[tuple[int, dict[str, Any]]]) -> list[str]:
    return [e["type"] for _, e in events]


def test_outlet_runs_before_the_final_event_and_tasks_after_it(with_tasks: Running) -> None:
    with_tasks.upstream.set_default(scripted)
    with with_tasks.client() as client:
        chat_id = new_chat(client, model="fake")
        posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "What is 1+2?"})
        assert posted.status_code == 202
        events = read_events(client, chat_id, last=0)
        types = _types(events)
        by_type = {e["type"]: e["data"] for _, e in events}
        tail = [t for t in types if t.startswith("chat:") and t != "chat:snapshot"]
        assert tail[:2] == ["chat:outlet", "chat:completion"]  # the answer is done first
        assert sorted(tail[2:]) == ["chat:message:follow_ups", "chat:tags", "chat:title"]
        assert by_type["chat:outlet"]["content"] == "THE SUM IS 3."
        assert by_type["chat:title"] == {"title": "Adding small numbers"}
        assert by_type["chat:tags"] == {"tags": ["Math", "Arithmetic"]}
        assert by_type["chat:message:follow_ups"] == {
            "follow_ups": ["What is 2+2?", "Can you multiply too?"]
        }
        final = by_type["chat:completion"]
        assert final["content"] == "THE SUM IS 3." and final["done"] is True
        # the live deltas were the model's words; only the outlet event carries the new text
        deltas = "".join(
            e["data"]["delta"] for _, e in events if e["type"] == "response.output_text.delta"
        )
        assert deltas == "The sum is 3."

        saved = wait_saved(client, chat_id)
        assert saved["id"] == posted.json()["message_id"]
        assert saved["content"] == "THE SUM IS 3."
        assert saved["follow_ups"] == ["What is 2+2?", "Can you multiply too?"]
        assert [i["type"] for i in saved["output"]] == [
            "function_call",
            "function_call_output",
            "message",
        ]
        chat = client.get(f"/api/chats/{chat_id}").json()
        assert chat["title"] == "Adding small numbers"
        assert chat["tags"] == ["Math", "Arithmetic"]
        listed = client.get("/api/chats").json()["data"][0]
        assert (listed["title"], listed["tags"]) == ("Adding small numbers", ["Math", "Arithmetic"])


def test_task_requests_see_plain_text_without_tool_details(with_tasks: Running) -> None:
    with_tasks.upstream.set_default(scripted)
    with with_tasks.client() as client:
        chat_id = new_chat(client, model="fake")
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "What is 1+2?"})
        wait_saved(client, chat_id)
    requests = with_tasks.upstream.requests
    assert [task_of(r) for r in requests[:2]] == [None, None]  # the turn: call, then answer
    assert sorted(str(task_of(r)) for r in requests[2:]) == ["follow_ups", "tags", "title"]
    for request in requests[2:]:
        messages = request.json["messages"]
        assert [m["role"] for m in messages] == ["system", "user"]
        assert "tools" not in request.json
        user = messages[1]["content"]
        # the answer the user saw (after the outlet), the question, and nothing of the tool call
        assert user == "<chat>\nUSER: What is 1+2?\nASSISTANT: THE SUM IS 3.\n</chat>"
        assert "add" not in user and "call_a" not in user


def test_failing_tasks_never_fail_the_turn(with_tasks: Running) -> None:
    def broken_tasks(request: RecordedRequest) -> Reply:
        if task_of(request) is not None:
            return SSEReply(chat_chunks(text="I would rather not."))  # no JSON at all
        return SSEReply(chat_chunks(text="Fine."))

    with_tasks.upstream.set_default(broken_tasks)
    with with_tasks.client() as client:
        chat_id = new_chat(client, title="kept", model="fake")
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "hi"})
        types = _types(read_events(client, chat_id, last=0))
        saved = wait_saved(client, chat_id)
        chat = client.get(f"/api/chats/{chat_id}").json()
    assert "chat:title" not in types and "chat:tags" not in types
    assert "chat:message:follow_ups" not in types
    assert types[-2:] == ["chat:outlet", "chat:completion"]
    assert (saved["content"], saved["follow_ups"]) == ("FINE.", [])
    assert (chat["title"], chat["tags"]) == ("kept", [])


def test_openai_endpoint_applies_the_outlet_but_runs_no_tasks(with_tasks: Running) -> None:
    with_tasks.upstream.set_default(scripted)
    with with_tasks.client() as client:
        response = client.post(
            CHAT, json={"model": "fake", "messages": [{"role": "user", "content": "What is 1+2?"}]}
        )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "THE SUM IS 3."
    assert [task_of(r) for r in with_tasks.upstream.requests] == [None, None]


def test_outlet_event_carries_the_rewritten_items(with_tasks: Running) -> None:
    """Tool items are kept; only the message text is replaced by the filter's content."""
    with_tasks.upstream.set_default(scripted)
    with with_tasks.client() as client:
        chat_id = new_chat(client, model="fake")
        posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "What is 1+2?"})
        events = read_events(client, chat_id, last=0)
    outlet = next(e["data"] for _, e in events if e["type"] == "chat:outlet")
    assert [i["type"] for i in outlet["output"]] == [
        "function_call",
        "function_call_output",
        "message",
    ]
    assert outlet["output"][1]["output"] == "3"
    assert outlet["output"][2]["content"][0]["text"] == "THE SUM IS 3."
    assert posted.json()["chat_id"] == chat_id


def test_saved_turn_keeps_its_model(with_tasks: Running) -> None:
    with_tasks.upstream.set_default(scripted)
    with with_tasks.client() as client:
        chat_id = new_chat(client, model="fake")
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "What is 1+2?"})
        assert wait_saved(client, chat_id)["model"] == "fake"
