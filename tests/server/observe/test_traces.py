"""Spans of real turns through the server, caught by the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import uvicorn
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.patience import HANG
from tests.server.conftest import ADMIN_KEY, make_settings
from tests.server.test_openai_api import text_reply
from toolrelay.server.app import create_app
from toolrelay.testing.fake_server import FakeModelServer, RawReply, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

CHAT = "/v1/chat/completions"
TOOLS = Path(__file__).parent / "traced_tools.py"


class Traced:
    def __init__(self, tmp_path: Path, upstream: FakeModelServer) -> None:
        self.upstream = upstream
        self.spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        settings = make_settings(tmp_path, upstream, tools=[str(TOOLS)])
        app = create_app(settings, tracer_provider=provider)
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + HANG
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.client = httpx2.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {ADMIN_KEY}"},
            timeout=HANG,
        )

    def close(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(HANG)


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[Traced]:
    with FakeModelServer() as upstream:
        server = Traced(tmp_path, upstream)
        try:
            yield server
        finally:
            server.close()


def parallel_calls() -> SSEReply:
    calls = [
        ToolCallSpec("left", {"x": 1}, id="call_left"),
        ToolCallSpec("right", {"x": 2}, id="call_right"),
    ]
    usage = {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
    return SSEReply(chat_chunks(tool_calls=calls, usage=usage))


def by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_turn_model_and_parallel_tool_spans_nest(traced: Traced) -> None:
    traced.upstream.route(CHAT, parallel_calls(), text_reply("Both met."))
    body = {"model": "fake", "messages": [{"role": "user", "content": "meet"}]}
    answer = traced.client.post(CHAT, json=body)
    assert answer.status_code == 200, answer.text
    spans = traced.spans.get_finished_spans()

    [turn] = by_name(spans, "invoke_agent ")
    models = by_name(spans, "chat ")
    tools = {attrs(s)["gen_ai.tool.call.id"]: s for s in by_name(spans, "execute_tool ")}
    assert turn.name == "invoke_agent fake" and turn.parent is None
    assert attrs(turn)["toolrelay.turn.id"] == answer.headers["x-request-id"]
    assert attrs(turn)["toolrelay.turn.status"] == "completed"
    assert (
        attrs(turn)["gen_ai.usage.input_tokens"],
        attrs(turn)["gen_ai.usage.output_tokens"],
    ) == (
        31,
        11,
    )
    turn_id = turn.context.span_id
    # two model calls, children of the turn, with GenAI attributes
    assert [m.name for m in models] == ["chat fake-model", "chat fake-model"]
    assert all(m.parent is not None and m.parent.span_id == turn_id for m in models)
    first = attrs(models[0])
    assert first["gen_ai.request.model"] == "fake-model"
    assert first["gen_ai.provider.name"] == "openai"
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (11, 4)
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert attrs(models[1])["gen_ai.response.finish_reasons"] == ("stop",)
    # two tool calls that ran at the same time: siblings under the turn, each current in its task
    assert set(tools) == {"call_left", "call_right"}
    for call_id, span in tools.items():
        assert span.parent is not None and span.parent.span_id == turn_id
        assert attrs(span)["gen_ai.tool.name"] == call_id.removeprefix("call_")
        assert span.status.status_code != StatusCode.ERROR
    left, right = tools["call_left"], tools["call_right"]
    assert left.start_time is not None and right.start_time is not None
    assert left.end_time is not None and right.end_time is not None
    assert left.start_time < right.end_time and right.start_time < left.end_time  # overlap
    sent = traced.upstream.requests[1].json["messages"]
    seen = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert seen == {cid: format(s.context.span_id, "016x") for cid, s in tools.items()}
    # model calls and tool calls never nest inside each other
    assert all(s.parent is None or s.parent.span_id == turn_id for s in (*models, *tools.values()))


def test_failures_mark_their_spans(traced: Traced) -> None:
    traced.upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("nope", {}, id="call_nope")])),
        RawReply(400, b'{"error": {"message": "no more"}}'),
    )
    body = {"model": "fake", "messages": [{"role": "user", "content": "go"}]}
    assert traced.client.post(CHAT, json=body).status_code == 502
    spans = traced.spans.get_finished_spans()
    [turn] = by_name(spans, "invoke_agent ")
    [tool] = by_name(spans, "execute_tool ")
    failed_model = by_name(spans, "chat ")[-1]
    assert turn.status.status_code == StatusCode.ERROR
    assert attrs(turn)["toolrelay.turn.status"] == "failed"
    assert tool.status.status_code == StatusCode.ERROR
    assert attrs(tool)["error.type"] == "unknown_tool"
    assert failed_model.status.status_code == StatusCode.ERROR
    assert attrs(failed_model)["error.type"] == "upstream_error"


def test_chat_api_turns_carry_the_conversation_id(traced: Traced) -> None:
    traced.upstream.route(CHAT, text_reply("hello"))
    chat_id = traced.client.post("/api/chats", json={"model": "fake"}).json()["id"]
    started = traced.client.post(f"/api/chats/{chat_id}/messages", json={"content": "hi"}).json()
    deadline = time.monotonic() + HANG
    while not by_name(traced.spans.get_finished_spans(), "invoke_agent "):
        assert time.monotonic() < deadline, "no turn span"
        time.sleep(0.02)
    [turn] = by_name(traced.spans.get_finished_spans(), "invoke_agent ")
    assert attrs(turn)["gen_ai.conversation.id"] == chat_id
    assert attrs(turn)["toolrelay.turn.id"] == started["message_id"]
