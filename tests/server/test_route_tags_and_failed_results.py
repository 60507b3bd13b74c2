"""Issue 29 item 7 through a running server: per-route `reasoning_tags` (R5), and tool results
that read as errors marked `failed` on their item while the model still reads them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.config.settings import ModelRoute
from toolrelay.errors import ConfigError
from toolrelay.testing.fake_server import FakeModelServer, RecordedRequest, Reply, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

CHAT = "/v1/chat/completions"
RESULT_TOOLS = Path(__file__).parent / "result_tools.py"


def _route(name: str, upstream: FakeModelServer, **options: Any) -> ModelRoute:
    return ModelRoute(
        name=name, kind="openai-chat", base_url=upstream.base_url, model="m", **options
    )


@pytest.fixture
def tagged(tmp_path: Path, upstream: FakeModelServer) -> Iterator[Running]:
    routes = [
        _route("plain", upstream),
        _route("untagged", upstream, reasoning_tags=False),
        _route("planner", upstream, reasoning_tags=["<plan>", "</plan>"]),
    ]
    settings = make_settings(tmp_path, upstream, models=routes, tools=[str(RESULT_TOOLS)])
    with ServerThread(settings) as base_url:
        yield Running(base_url, upstream, settings)


def _ask(running: Running, route: str) -> dict[str, Any]:
    with running.client() as client:
        answer = client.post(
            CHAT, json={"model": route, "messages": [{"role": "user", "content": "hi"}]}
        )
    assert answer.status_code == 200, answer.text
    message: dict[str, Any] = answer.json()["choices"][0]["message"]
    return message


TEXT = ["<thi", "nk>weighing</think>", "<plan>step one</plan>", "Done."]


def test_each_route_reads_its_own_reasoning_tags(tagged: Running) -> None:
    tagged.upstream.set_default(lambda _: SSEReply(chat_chunks(text=TEXT)))

    plain = _ask(tagged, "plain")  # the default tags: <think> is reasoning, <plan> is text
    assert plain.get("reasoning_content") == "weighing"
    assert plain["content"] == "<plan>step one</plan>Done."

    untagged = _ask(tagged, "untagged")  # false: every tag stays text
    assert "reasoning_content" not in untagged
    assert untagged["content"] == "<think>weighing</think><plan>step one</plan>Done."

    planner = _ask(tagged, "planner")  # its one pair replaces the defaults
    assert planner.get("reasoning_content") == "step one"
    # the text before the block and the text after it are two message items
    assert planner["content"] == "<think>weighing</think>\n\nDone."


def test_a_route_tag_pair_must_be_two_strings(tmp_path: Path, upstream: FakeModelServer) -> None:
    for bad in (["<x>"], ["<x>", ""], ["<a>", "</a>", "<b>"]):
        with pytest.raises(ValueError, match="two non-empty strings"):
            _route("bad", upstream, reasoning_tags=bad)
    with pytest.raises(ConfigError, match="reasoning_tags"):
        from toolrelay.config.settings import load_settings

        config = tmp_path / "bad.toml"
        config.write_text(
            '[[models]]\nname = "x"\nbase_url = "http://127.0.0.1:9"\nreasoning_tags = ["<x>"]\n'
        )
        load_settings(config)


def _tool_turn(request: RecordedRequest) -> Reply:
    """Calls the three tools at once, then answers once it has their results."""
    if any(m["role"] == "tool" for m in request.json["messages"]):
        return SSEReply(chat_chunks(text="Noted."))
    calls = [
        ToolCallSpec("find_city", {"name": "Atlantis"}, id="call_bad"),
        ToolCallSpec("find_city", {"name": "Paris"}, id="call_good"),
        ToolCallSpec("quota", {}, id="call_quota"),
    ]
    return SSEReply(chat_chunks(tool_calls=calls))


def test_results_that_read_as_errors_are_failed_and_still_reach_the_model(
    tagged: Running,
) -> None:
    tagged.upstream.set_default(_tool_turn)
    with tagged.client() as client:
        chat_id = new_chat(client, model="plain")
        posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "cities?"})
        assert posted.status_code == 202
        events = read_events(client, chat_id, last=0)
        saved = wait_saved(client, chat_id)

    outputs = {i["call_id"]: i for i in saved["output"] if i["type"] == "function_call_output"}
    assert {k: v["status"] for k, v in outputs.items()} == {
        "call_bad": "failed",
        "call_good": "completed",  # "Errors are rare …" is a result, not an error
        "call_quota": "failed",  # {"error": …}
    }
    live = {
        e["data"]["item"]["call_id"]: e["data"]["item"]["status"]
        for _, e in events
        if e["type"] == "response.output_item.done"
        and e["data"]["item"]["type"] == "function_call_output"
    }
    assert live == {"call_bad": "failed", "call_good": "completed", "call_quota": "failed"}
    assert saved["status"] == "completed" and saved["content"] == "Noted."

    second = tagged.upstream.requests[1].json["messages"]
    told = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
    assert told["call_bad"] == "Error: no city named Atlantis."
    assert "quota exceeded" in told["call_quota"]
    assert told["call_good"].startswith("Errors are rare")
