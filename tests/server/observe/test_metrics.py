"""`/metrics` scraped over a real socket after real turns: the numbers move as they should."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import LOCATION_TOOL, new_chat
from tests.server.test_faults import closed_port
from tests.server.test_openai_api import call_reply, text_reply
from toolrelay.events import ChatStreamReader
from toolrelay.testing.fake_server import FakeModelServer, RawReply, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

CHAT = "/v1/chat/completions"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape(client: httpx2.Client) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_turns_model_calls_tool_calls_tokens_and_ttfb(running: Running) -> None:
    running.upstream.route(
        CHAT,
        call_reply("add", {"a": 2, "b": 3}),
        text_reply("The sum is 5."),
        call_reply("nope", {}, call_id="call_bad"),
        text_reply("No such tool."),
        RawReply(400, b'{"error": {"message": "bad request upstream"}}'),
    )
    body = {"model": "fake", "messages": [{"role": "user", "content": "2+3?"}]}
    with running.client() as client:
        before = scrape(client)
        assert value(before, "toolrelay_turns_total", route="fake", status="completed") == 0
        assert [client.post(CHAT, json=body).status_code for _ in range(3)] == [200, 200, 502]
        after = scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("toolrelay_turns_total", route="fake", status="completed") == 2
    assert moved("toolrelay_turns_total", route="fake", status="failed") == 1
    assert moved("toolrelay_model_calls_total", route="fake", status="ok") == 4
    assert moved("toolrelay_model_calls_total", route="fake", status="error") == 1
    assert moved("toolrelay_tool_calls_total", tool="add", status="completed") == 1
    assert moved("toolrelay_tool_calls_total", tool="(unknown)", status="failed") == 1
    assert not any(k[0] == "toolrelay_tool_calls_total" and ("tool", "nope") in k[1] for k in after)
    assert moved("toolrelay_tokens_total", route="fake", direction="in") == 60
    assert moved("toolrelay_tokens_total", route="fake", direction="out") == 24
    assert moved("toolrelay_upstream_ttfb_seconds_count", route="fake") == 4  # the 400 has none
    assert moved("toolrelay_turn_duration_seconds_count", route="fake") == 3
    assert moved("toolrelay_turn_duration_seconds_sum", route="fake") > 0
    assert value(after, "toolrelay_active_turns") == 0


def test_active_turns_sse_subscribers_and_bus_lag(running: Running) -> None:
    # A turn waiting on a client tool is saved paused and holds nothing (not active), so
    # "during" is read while the answer's model call is held open after its first delta.
    release = threading.Event()
    running.upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("get_location", {}, id="call_g")])),
        SSEReply(chat_chunks(text="Paris it is."), holds={2: release}),
    )
    during: list[Samples] = []
    try:
        with running.client() as client:
            chat_id = new_chat(client, model="fake")
            body = {"content": "?", "tools": LOCATION_TOOL}
            client.post(f"/api/chats/{chat_id}/messages", json=body)
            decoder = ChatStreamReader()
            answered = False
            with client.stream("GET", f"/api/chats/{chat_id}/events") as response:
                for chunk in response.iter_bytes():
                    for _frame_id, whole in decoder.feed(chunk):
                        event = whole.to_dict()
                        if event["type"] == "execute:tool":
                            answer = {"id": event["data"]["id"], "result": "Paris"}
                            client.post(f"/api/chats/{chat_id}/tool-results", json=answer)
                            answered = True
                        elif answered and not during and event["type"].endswith("text.delta"):
                            during.append(scrape(client))  # the model call is held: running
                            release.set()
            after = scrape(client)
    finally:
        release.set()
    assert len(during) == 1
    assert value(during[0], "toolrelay_active_turns") == 1
    assert value(during[0], "toolrelay_sse_subscribers") == 1
    assert value(after, "toolrelay_active_turns") == 0
    assert value(after, "toolrelay_sse_subscribers") == 0
    assert value(after, "toolrelay_turns_total", route="fake", status="completed") == 1
    assert value(after, "toolrelay_tool_calls_total", tool="get_location", status="completed") == 1
    # events from before the stream opened are backlog, not lag; those after the answer are live
    lag_count = value(after, "toolrelay_event_bus_lag_seconds_count")
    assert lag_count > value(during[0], "toolrelay_event_bus_lag_seconds_count")
    assert value(after, "toolrelay_event_bus_lag_seconds_sum") >= 0


def test_metrics_need_an_admin_key(running: Running) -> None:
    with running.client() as admin:
        key = admin.post("/api/admin/keys", json={"user": "bob", "name": "k"}).json()["key"]
        assert httpx2.get(running.base_url + "/metrics", timeout=10).status_code == 401
    with running.client(key) as user:
        assert user.get("/metrics").status_code == 403


@pytest.fixture
def on_own_port(tmp_path: Path) -> Iterator[tuple[Running, int]]:
    port = closed_port()
    with FakeModelServer() as fake:
        settings = make_settings(tmp_path, fake, metrics_port=port)
        with ServerThread(settings) as base_url:
            yield Running(base_url, fake, settings), port


def test_metrics_port_serves_them_without_a_key(on_own_port: tuple[Running, int]) -> None:
    running, port = on_own_port
    running.upstream.route(CHAT, text_reply("hi"))
    with running.client() as client:
        body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
        assert client.post(CHAT, json=body).status_code == 200
        assert client.get("/metrics").status_code == 404  # not on the public port
    own = httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert own.status_code == 200
    assert value(parse(own.text), "toolrelay_turns_total", route="fake", status="completed") == 1
