"""Issue 7 item 5 through the server: an upstream body the core chokes on ends the turn cleanly.

An upstream `function_call` whose `"arguments"` is the number 5 (not a
string) must give an OpenAI-style error (streamed: an error line, then
`[DONE]`), and on the chat API a `failed` row with a `chat:message:error`
event, never a 500 page or a cut stream.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.server.conftest import Running
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import ToolCallSpec, responses_events


def _numeric_arguments(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every `arguments` string in the events replaced by the number 5."""
    raw = orjson.dumps(events).replace(b'"arguments":"{}"', b'"arguments":5')
    return list(orjson.loads(raw))


def responses_with_bad_call() -> SSEReply:
    events = responses_events(text=["Let me ", "look."], function_calls=[ToolCallSpec("f", {})])
    return SSEReply(_numeric_arguments(events))


ROUTES = [("fake-responses", responses_with_bad_call)]


@pytest.mark.parametrize(("model", "reply"), ROUTES)
def test_chat_completions_answer_an_openai_error(served: Running, model: str, reply: Any) -> None:
    served.upstream.set_default(reply())
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    with served.client() as client:
        plain = client.post("/v1/chat/completions", json=body)
        assert plain.status_code == 502, plain.text
        assert plain.json()["error"]["message"]
        streamed = client.post("/v1/chat/completions", json={**body, "stream": True})
    assert streamed.status_code == 200
    lines = [x for x in streamed.text.split("\n\n") if x]
    assert lines[-1] == "data: [DONE]"
    error = orjson.loads(lines[-2].removeprefix("data: "))
    assert error["error"]["message"]


@pytest.mark.parametrize(("model", "reply"), ROUTES)
def test_responses_answer_an_openai_error(served: Running, model: str, reply: Any) -> None:
    served.upstream.set_default(reply())
    body = {"model": model, "input": "hi"}
    with served.client() as client:
        plain = client.post("/v1/responses", json=body)
        assert plain.status_code == 502, plain.text
        assert plain.json()["error"]["message"]
        streamed = client.post("/v1/responses", json={**body, "stream": True})
    assert streamed.status_code == 200
    last = [x for x in streamed.text.split("\n\n") if x][-1]
    assert last.startswith("event: response.failed\n")
    final = orjson.loads(last.split("data: ", 1)[1])
    assert final["response"]["status"] == "failed"
    assert final["response"]["error"]["message"]


@pytest.mark.parametrize(("model", "reply"), ROUTES)
def test_chat_api_saves_the_turn_failed(served: Running, model: str, reply: Any) -> None:
    served.upstream.set_default(reply())
    with served.client() as client:
        chat_id = new_chat(client, model=model)
        posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "hi"})
        assert posted.status_code == 202, posted.text
        events = [e for _, e in read_events(client, chat_id)]
        saved = wait_saved(client, chat_id, "failed")
    # the core now reads a numeric `arguments` without raising; whichever way the turn
    # ends, it ends: a final event and a saved row, never a row stuck `in_progress`
    assert events[-1]["type"] == "chat:completion" and events[-1]["data"]["done"] is True
    assert events[-1]["data"]["status"] == "failed"
    assert saved["content"].startswith("Let me look.")
