"""FakeModelServer over real sockets (httpx2 and the openai SDK), and the wire builders."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import httpx2
import openai
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from tests.sdk_clients import openai_client
from toolrelay.testing import (
    BodyReply,
    FakeModelServer,
    JSONReply,
    NDJSONReply,
    RawReply,
    RecordedRequest,
    Reply,
    SSEReply,
    ToolCallSpec,
    wire,
)

TIMEOUT = httpx2.Timeout(5.0)
USAGE = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
RESPONSES_USAGE = {
    "input_tokens": 5,
    "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
    "output_tokens": 7,
    "output_tokens_details": {"reasoning_tokens": 2},
    "total_tokens": 12,
}


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


@pytest.fixture
def client(server: FakeModelServer) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=server.base_url, timeout=TIMEOUT) as c:
        yield c


def sdk(server: FakeModelServer) -> openai.OpenAI:
    return openai_client(
        base_url=server.base_url + "/v1", api_key="sk-test", max_retries=0, timeout=5.0
    )


# --------------------------------------------------------------------------- scripting


def test_script_serves_replies_in_order_on_any_path(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    server.script(JSONReply({"n": 1}), JSONReply({"n": 2}), JSONReply({"n": 3}))
    got = [client.post(path, json={}).json() for path in ("/a", "/v1/b", "/a")]
    assert got == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_route_queues_win_then_fall_back_to_script(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    server.script(JSONReply({"from": "script"}))
    server.route("/api/chat", JSONReply({"from": "route"}))
    assert client.post("/api/chat").json() == {"from": "route"}
    assert client.post("/api/chat").json() == {"from": "script"}


def test_route_ignores_query_string(server: FakeModelServer, client: httpx2.Client) -> None:
    server.route("/v1/responses", JSONReply({"ok": True}))
    resp = client.get("/v1/responses?stream=true")
    assert resp.json() == {"ok": True}
    assert (server.requests[0].path, server.requests[0].query) == ("/v1/responses", "stream=true")


def test_empty_queue_answers_500_with_clear_error(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    resp = client.post("/v1/chat/completions", json={})
    assert resp.status_code == 500
    assert resp.headers["content-type"] == "application/json"
    assert resp.json() == {
        "error": {
            "message": "no scripted reply for POST /v1/chat/completions",
            "type": "fake_server_error",
            "code": None,
        }
    }


def test_default_is_served_whenever_queues_are_empty(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    server.set_default(JSONReply({"d": True}))
    server.script(JSONReply({"s": True}))
    assert [client.get("/x").json() for _ in range(3)] == [{"s": True}, {"d": True}, {"d": True}]
    server.set_default(None)
    assert client.get("/x").status_code == 500


def test_reset_forgets_replies_and_requests(server: FakeModelServer, client: httpx2.Client) -> None:
    server.script(JSONReply({"n": 1}))
    server.route("/r", JSONReply({"n": 2}))
    server.set_default(JSONReply({"n": 3}))
    client.get("/warmup")
    server.reset()
    assert server.requests == []
    assert client.get("/r").status_code == 500


def test_requests_are_recorded_with_lowercase_headers_and_json(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    server.set_default(JSONReply({}))
    client.post("/v1/chat/completions", json={"model": "m", "stream": True}, headers={"X-Tag": "t"})
    client.post("/raw", content=b"not json{", headers={"content-type": "text/plain"})
    first, second = server.requests
    assert (first.method, first.path, first.query) == ("POST", "/v1/chat/completions", "")
    assert first.headers["x-tag"] == "t"
    assert first.headers["content-type"] == "application/json"
    assert orjson.loads(first.body) == {"model": "m", "stream": True}
    assert first.json == {"model": "m", "stream": True}
    assert (second.body, second.json) == (b"not json{", None)
    assert all(k == k.lower() for r in server.requests for k in r.headers)


def test_callable_reply_answers_from_the_request(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    def echo(req: RecordedRequest) -> Reply:
        return JSONReply({"echo": req.json["say"], "path": req.path})

    server.set_default(echo)
    assert client.post("/p", json={"say": "hi"}).json() == {"echo": "hi", "path": "/p"}
    assert client.post("/q", json={"say": "yo"}).json() == {"echo": "yo", "path": "/q"}


def test_callable_may_return_a_callable(server: FakeModelServer, client: httpx2.Client) -> None:
    server.script(lambda req: lambda req2: JSONReply({"nested": req2.path}))
    assert client.get("/n").json() == {"nested": "/n"}


def test_callable_that_raises_gets_500_not_a_hang(
    server: FakeModelServer, client: httpx2.Client, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(req: RecordedRequest) -> Reply:
        raise KeyError("model")

    server.script(broken)
    resp = client.post("/v1/chat/completions", json={})
    assert resp.status_code == 500
    assert resp.json()["error"]["message"] == "reply callable raised KeyError: 'model'"


# --------------------------------------------------------------------------- bodies


def test_sse_body_is_exactly_the_rendered_bytes(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    chunks = wire.chat_chunks(text=["Hel", "lo"], usage=USAGE)
    server.script(SSEReply(chunks))
    resp = client.post("/v1/chat/completions", json={"stream": True})
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "text/event-stream"
    assert resp.headers["transfer-encoding"] == "chunked"
    assert "content-length" not in resp.headers
    assert resp.content == wire.render_sse(chunks)


def test_sse_raw_events_pass_through_verbatim(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    events: list[Any] = [
        ": keep-alive\n\n",
        b"event: ping\r\ndata: {}\r\n\r\n",
        {"a": 1},
        b"data: \xff\xfe broken\n\n",
    ]
    server.script(SSEReply(events, done=False))
    body = client.get("/s").content
    assert body == (
        b': keep-alive\n\nevent: ping\r\ndata: {}\r\n\r\ndata: {"a":1}\n\ndata: \xff\xfe broken\n\n'
    )


def test_sse_events_arrive_as_separate_chunks(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    server.script(SSEReply([{"i": 0}, {"i": 1}], delay=0.05))
    with client.stream("GET", "/s") as resp:
        pieces = list(resp.iter_raw())
    assert pieces == [b'data: {"i":0}\n\n', b'data: {"i":1}\n\n', b"data: [DONE]\n\n"]


def test_sse_delay_paces_events(server: FakeModelServer, client: httpx2.Client) -> None:
    server.script(SSEReply([{"i": 0}, {"i": 1}, {"i": 2}], done=False, delay=0.15))
    start = time.monotonic()
    client.get("/s")
    assert time.monotonic() - start >= 0.3


def test_ndjson_body_and_content_type(server: FakeModelServer, client: httpx2.Client) -> None:
    lines = wire.ollama_lines(text=["Hi", "!"])
    server.route("/api/chat", NDJSONReply([*lines, b'{"partial": tr']))
    resp = client.post("/api/chat", json={})
    assert resp.headers["content-type"] == "application/x-ndjson"
    assert resp.content == wire.render_ndjson(lines) + b'{"partial": tr'


def test_json_reply_str_body_is_sent_verbatim(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    server.script(JSONReply('{"broken": ', status=502, headers={"X-Upstream": "1"}))
    resp = client.get("/j")
    assert (resp.status_code, resp.content) == (502, b'{"broken": ')
    assert resp.headers["content-type"] == "application/json"
    assert resp.headers["x-upstream"] == "1"
    assert resp.headers["content-length"] == "11"


def test_raw_429_with_retry_after(server: FakeModelServer, client: httpx2.Client) -> None:
    body = b'{"error": {"message": "slow down", "type": "rate_limit"}}'
    server.script(RawReply(429, body, {"Retry-After": "2", "Content-Type": "application/json"}))
    resp = client.post("/v1/chat/completions", json={})
    assert resp.status_code == 429
    assert resp.headers["retry-after"] == "2"
    assert resp.content == body


def test_raw_html_500_reaches_the_openai_sdk_as_an_error(server: FakeModelServer) -> None:
    server.script(RawReply(500, b"<html>oops</html>", {"content-type": "text/html"}))
    with sdk(server) as oai, pytest.raises(openai.InternalServerError) as info:
        oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert info.value.status_code == 500


def test_body_reply_in_one_piece_has_content_length(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    body = wire.render_sse(wire.chat_chunks(text="x" * 1000))
    server.script(BodyReply(body))
    resp = client.get("/b")
    assert resp.headers["content-length"] == str(len(body))
    assert resp.content == body


def test_body_reply_in_chunks_keeps_the_bytes(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    body = bytes(range(256)) * 4
    server.script(BodyReply(body, "application/octet-stream", chunk_size=100))
    with client.stream("GET", "/b") as resp:
        pieces = list(resp.iter_raw())
        assert resp.headers["transfer-encoding"] == "chunked"
        assert resp.headers["content-type"] == "application/octet-stream"
    assert b"".join(pieces) == body


# --------------------------------------------------------------------------- misbehaviour


def test_stall_makes_the_client_read_timeout_fire(server: FakeModelServer) -> None:
    server.script(SSEReply([{"i": 0}, {"i": 1}], stall_after=1, stall_for=3600))
    got: list[bytes] = []
    slow = httpx2.Timeout(5.0, read=0.3)
    with (
        httpx2.Client(base_url=server.base_url, timeout=slow) as c,
        pytest.raises(httpx2.ReadTimeout),
        c.stream("GET", "/s") as resp,
    ):
        for piece in resp.iter_raw():
            got.append(piece)
    assert got == [b'data: {"i":0}\n\n']  # the read timed out: the stall lasts an hour
    # the server notices the client hanging up even though it is mid-stall
    assert server.wait_for_connections(0)


def test_stall_for_a_short_while_then_finish(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    server.script(SSEReply([{"i": 0}], stall_after=0, stall_for=0.3))
    start = time.monotonic()
    assert client.get("/s").content == b'data: {"i":0}\n\ndata: [DONE]\n\n'
    assert time.monotonic() - start >= 0.3


def test_a_hold_keeps_the_rest_of_the_stream_until_the_test_releases_it(
    server: FakeModelServer,
) -> None:
    held, release = threading.Event(), threading.Event()
    server.script(
        SSEReply([{"i": 0}, {"i": 1}], holds={1: held}),
        SSEReply([{"i": 0}, {"i": 1}], holds={1: release}),
    )
    slow = httpx2.Timeout(5.0, read=0.3)
    with httpx2.Client(base_url=server.base_url, timeout=slow) as c:
        with pytest.raises(httpx2.ReadTimeout), c.stream("GET", "/s") as resp:
            pieces = resp.iter_raw()
            assert next(pieces) == b'data: {"i":0}\n\n'
            next(pieces)  # never set: the rest never comes
        with c.stream("GET", "/s") as resp:
            pieces = resp.iter_raw()
            assert next(pieces) == b'data: {"i":0}\n\n'
            release.set()
            assert b"".join(pieces) == b'data: {"i":1}\n\ndata: [DONE]\n\n'
    assert server.wait_for_connections(0)  # the held reply ended with its client


def test_drop_mid_body_is_a_protocol_error_for_the_client(
    server: FakeModelServer, client: httpx2.Client
) -> None:
    server.script(SSEReply([{"i": 0}, {"i": 1}, {"i": 2}], drop_after=2))
    got: list[bytes] = []
    with (
        pytest.raises((httpx2.RemoteProtocolError, httpx2.ReadError)),
        client.stream("GET", "/s") as resp,
    ):
        assert resp.status_code == 200
        for piece in resp.iter_raw():
            got.append(piece)
    assert b"".join(got) == b'data: {"i":0}\n\ndata: {"i":1}\n\n'
    assert server.wait_for_connections(0)


def test_drop_ndjson_before_any_line(server: FakeModelServer, client: httpx2.Client) -> None:
    server.script(NDJSONReply([{"a": 1}], drop_after=0))
    with pytest.raises((httpx2.RemoteProtocolError, httpx2.ReadError)):
        client.get("/n")


def test_ttfb_delay_delays_the_status_line(server: FakeModelServer) -> None:
    server.script(JSONReply({"late": True}, ttfb_delay=3600), SSEReply([], ttfb_delay=0.3))
    slow = httpx2.Timeout(5.0, read=0.2)
    with (
        httpx2.Client(base_url=server.base_url, timeout=slow) as c,
        pytest.raises(httpx2.ReadTimeout),
    ):
        c.get("/slow")
    with httpx2.Client(base_url=server.base_url, timeout=TIMEOUT) as c:
        start = time.monotonic()
        assert c.get("/slow").content == b"data: [DONE]\n\n"
        assert time.monotonic() - start >= 0.3


# --------------------------------------------------------------------------- connections and lifecycle


def test_open_connections_returns_to_zero_after_client_closes(server: FakeModelServer) -> None:
    server.set_default(JSONReply({}))
    assert server.open_connections == 0
    with httpx2.Client(base_url=server.base_url, timeout=TIMEOUT) as c:
        c.get("/1")
        c.get("/2")  # keep-alive: same connection
        assert server.open_connections == 1
    assert server.wait_for_connections(0)
    assert server.open_connections == 0


def test_connection_close_request_closes_the_connection(server: FakeModelServer) -> None:
    server.set_default(JSONReply({"ok": 1}))
    with httpx2.Client(base_url=server.base_url, timeout=TIMEOUT) as c:
        resp = c.get("/1", headers={"connection": "close"})
        assert resp.json() == {"ok": 1}
        assert server.wait_for_connections(0)


def test_stop_leaves_no_thread_and_refuses_connections() -> None:
    srv = FakeModelServer()
    srv.start()
    url = srv.base_url
    names = [t.name for t in threading.enumerate()]
    assert names.count("fake-model-server") >= 1
    srv.stop()
    srv.stop()  # idempotent
    assert all(not (t.name == "fake-model-server" and t.is_alive()) for t in threading.enumerate())
    with pytest.raises(RuntimeError, match="not started"):
        _ = srv.base_url
    with httpx2.Client(timeout=TIMEOUT) as c, pytest.raises(httpx2.ConnectError):
        c.get(url)


def test_stop_during_a_stall_ends_the_client_read_promptly() -> None:
    srv = FakeModelServer()
    srv.start()
    srv.script(SSEReply([{"i": 0}], stall_after=1, stall_for=3600))
    errors: list[BaseException] = []

    def read() -> None:
        try:
            with httpx2.Client(base_url=srv.base_url, timeout=TIMEOUT) as c:
                c.get("/s")
        except httpx2.HTTPError as exc:
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    assert srv.wait_for_connections(1)
    while not srv.requests:  # the request is in: the reply is under way, then stalls
        time.sleep(0.005)
    srv.stop()
    reader.join(timeout=30)  # the stall lasts an hour: only the stop can end the read
    assert not reader.is_alive()
    assert len(errors) == 1
    assert isinstance(errors[0], httpx2.RemoteProtocolError | httpx2.ReadError)


def test_start_twice_is_an_error(server: FakeModelServer) -> None:
    with pytest.raises(RuntimeError, match="already started"):
        server.start()


def test_port_in_use_fails_to_start(server: FakeModelServer) -> None:
    with pytest.raises(RuntimeError, match="failed to start"):
        FakeModelServer(port=server.port).start()


def test_base_url_has_host_and_bound_port(server: FakeModelServer) -> None:
    assert server.port != 0
    assert server.base_url == f"http://127.0.0.1:{server.port}"


@pytest.mark.anyio
async def test_works_from_an_async_test(server: FakeModelServer) -> None:
    chunks = wire.chat_chunks(text="async")
    server.script(SSEReply(chunks))
    async with httpx2.AsyncClient(base_url=server.base_url, timeout=TIMEOUT) as c:
        resp = await c.post("/v1/chat/completions", json={})
    assert resp.content == wire.render_sse(chunks)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --------------------------------------------------------------------------- wire: chat completions


def test_chat_chunks_exact_shape() -> None:
    chunks = wire.chat_chunks(
        text="Hi",
        tool_calls=[ToolCallSpec("f", {"q": "x"}, id="call_1")],
        args_pieces=2,
        completion_id="chatcmpl-1",
    )
    base = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": wire.FIXED_CREATED,
        "model": "fake-model",
        "system_fingerprint": None,
    }

    def ch(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return base | {"choices": [choice]}

    assert chunks == [
        ch({"role": "assistant", "content": "", "refusal": None}),
        ch({"content": "Hi"}),
        ch(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "f", "arguments": ""},
                    }
                ]
            }
        ),
        ch({"tool_calls": [{"index": 0, "function": {"arguments": '{"q":'}}]}),
        ch({"tool_calls": [{"index": 0, "function": {"arguments": '"x"}'}}]}),
        ch({}, "tool_calls"),
    ]


def test_chat_chunks_usage_chunk_and_reasoning() -> None:
    chunks = wire.chat_chunks(reasoning=["th", "ink"], text="ok", usage=USAGE)
    assert [c["usage"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == USAGE
    assert [c["choices"][0]["delta"] for c in chunks[1:3]] == [
        {"reasoning_content": "th"},
        {"reasoning_content": "ink"},
    ]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert len({c["id"] for c in chunks}) == 1
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)


def test_chat_chunks_finish_reason_override_and_reasoning_field() -> None:
    chunks = wire.chat_chunks(reasoning=["r"], finish_reason="length", reasoning_field="reasoning")
    assert chunks[1]["choices"][0]["delta"] == {"reasoning": "r"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert "usage" not in chunks[0]


def test_string_arguments_are_sent_verbatim() -> None:
    chunks = wire.chat_chunks(tool_calls=[ToolCallSpec("f", '{"a":1}{"a":2}')])
    assert chunks[2]["choices"][0]["delta"]["tool_calls"][0]["function"] == {
        "arguments": '{"a":1}{"a":2}'
    }
    assert chunks[1]["choices"][0]["delta"]["tool_calls"][0]["id"].startswith("call_")


def test_openai_sdk_streams_and_parses_chat_chunks(server: FakeModelServer) -> None:
    calls = [ToolCallSpec("search", {"q": "cats", "n": 3}), ToolCallSpec("time", {})]
    chunks = wire.chat_chunks(text=["A", "B"], tool_calls=calls, args_pieces=4, usage=USAGE)
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
    server.route("/v1/chat/completions", SSEReply(chunks))
    with sdk(server) as oai:
        stream = oai.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True
        )
        got = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in got if c.choices) == "AB"
    args: dict[int, str] = {}
    for c in got:
        for tc in (c.choices[0].delta.tool_calls or []) if c.choices else []:
            args[tc.index] = args.get(tc.index, "") + (tc.function.arguments or "")  # type: ignore[union-attr]
    assert {i: orjson.loads(a) for i, a in args.items()} == {0: {"q": "cats", "n": 3}, 1: {}}
    assert got[-1].usage is not None and got[-1].usage.total_tokens == 12
    assert server.requests[0].json["stream"] is True


def test_chat_completion_parses_with_the_sdk(server: FakeModelServer) -> None:
    body = wire.chat_completion(
        text="done",
        reasoning="because",
        tool_calls=[ToolCallSpec("f", {"x": 1}, id="call_9")],
        usage=USAGE,
    )
    ChatCompletion.model_validate(body)
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["choices"][0]["message"]["reasoning_content"] == "because"
    server.script(JSONReply(body))
    with sdk(server) as oai:
        resp = oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    message = resp.choices[0].message
    assert message.content == "done"
    assert message.tool_calls is not None
    assert message.tool_calls[0].id == "call_9"
    assert message.tool_calls[0].function.arguments == '{"x":1}'  # type: ignore[union-attr]


def test_chat_completion_without_text_or_usage() -> None:
    body = wire.chat_completion()
    assert body["choices"][0]["message"]["content"] is None
    assert body["choices"][0]["finish_reason"] == "stop"
    assert "usage" not in body and "tool_calls" not in body["choices"][0]["message"]


# --------------------------------------------------------------------------- wire: responses API


def test_responses_events_validate_and_sequence() -> None:
    events = wire.responses_events(
        text=["Hel", "lo"],
        reasoning_summary=["Think", "ing"],
        function_calls=[ToolCallSpec("f", {"a": 1}, id="call_1")],
        usage=RESPONSES_USAGE,
        response_id="resp_1",
        args_pieces=3,
    )
    adapter: TypeAdapter[Any] = TypeAdapter(cast(Any, ResponseStreamEvent))
    for event in events:
        adapter.validate_python(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = events[-1]["response"]
    assert final["id"] == "resp_1" and final["status"] == "completed"
    assert final["usage"] == RESPONSES_USAGE
    assert [item["type"] for item in final["output"]] == ["reasoning", "message", "function_call"]
    assert final["output"][2]["arguments"] == '{"a":1}'
    assert final["output"][2]["call_id"] == "call_1"
    assert final["output"][1]["content"][0]["text"] == "Hello"


def test_render_responses_sse_exact() -> None:
    event = {"type": "response.output_text.delta", "sequence_number": 4, "delta": "x"}
    assert wire.render_responses_sse([event]) == (
        b"event: response.output_text.delta\n"
        b'data: {"type":"response.output_text.delta","sequence_number":4,"delta":"x"}\n\n'
    )


def test_openai_sdk_accumulates_responses_stream(server: FakeModelServer) -> None:
    events = wire.responses_events(
        text=["Hello", " world"],
        reasoning_summary=["plan"],
        function_calls=[ToolCallSpec("lookup", {"id": 7})],
        usage=RESPONSES_USAGE,
    )
    server.route("/v1/responses", BodyReply(wire.render_responses_sse(events)))
    with sdk(server) as oai, oai.responses.stream(model="m", input="hi") as stream:
        final = stream.get_final_response()
    assert final.output_text == "Hello world"
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call"]
    assert final.usage is not None and final.usage.total_tokens == 12


# --------------------------------------------------------------------------- wire: ollama


def test_ollama_lines_exact() -> None:
    lines = wire.ollama_lines(
        thinking=["hm"],
        text="Hi",
        tool_calls=[ToolCallSpec("f", '{"x": 1}', id="c1")],
        done_reason="stop",
        counts={"eval_count": 3},
        created_at="T",
    )
    head = {"model": "fake-model", "created_at": "T", "done": False}
    assert lines == [
        head | {"message": {"role": "assistant", "content": "", "thinking": "hm"}},
        head | {"message": {"role": "assistant", "content": "Hi"}},
        head
        | {
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"index": 0, "name": "f", "arguments": {"x": 1}}, "id": "c1"}
                ],
            }
        },
        head
        | {
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "eval_count": 3,
        },
    ]
    assert wire.render_ndjson(lines[:1]) == (
        b'{"model":"fake-model","created_at":"T","message":{"role":"assistant","content":"",'
        b'"thinking":"hm"},"done":false}\n'
    )


# --------------------------------------------------------------------------- wire: helpers


@given(st.text(max_size=60), st.integers(min_value=0, max_value=80))
def test_split_pieces_rejoins_and_counts(text: str, pieces: int) -> None:
    out = wire.split_pieces(text, pieces)
    assert "".join(out) == text
    assert len(out) == max(1, min(pieces, len(text)))
    assert max(map(len, out)) - min(map(len, out)) <= 1


def test_render_sse_with_and_without_done() -> None:
    assert wire.render_sse([{"a": 1}]) == b'data: {"a":1}\n\ndata: [DONE]\n\n'
    assert wire.render_sse([{"a": 1}], done=False) == b'data: {"a":1}\n\n'
