"""The agent loop over real sockets: `Relay` + the HTTP model clients + `FakeModelServer`.

The same loop as `test_loop.py`, but every byte goes through httpx and a TCP
socket, so these tests also pin what each request carried, that usage adds up
across iterations, that faults end the turn cleanly, and that no connection
outlives a turn (the fake server counts the open ones).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.http_tracking import TrackingTransport
from toolrelay import Relay, tool
from toolrelay.adapters.models import (
    HTTPOptions,
    Ollama,
    OpenAIChat,
    OpenAIResponses,
    Retry,
    Timeouts,
)
from toolrelay.adapters.stores.memory import MemoryStore
from toolrelay.core import events as ev
from toolrelay.core.items import raw_items
from toolrelay.engine.finish import RunResult
from toolrelay.testing import (
    FakeModelServer,
    JSONReply,
    NDJSONReply,
    RawReply,
    SSEReply,
    ToolCallSpec,
)
from toolrelay.testing.sinks import ListSink
from toolrelay.testing.wire import chat_chunks, ollama_lines, render_responses_sse, responses_events

pytestmark = pytest.mark.anyio

NO_RETRY = Retry(attempts=1)
FAST_RETRY = Retry(attempts=3, backoff=0.001, max_backoff=0.01, jitter=0.0)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
async def weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


# --------------------------------------------------------------------------- helpers


def chat_reply(**kwargs: Any) -> SSEReply:
    return SSEReply(chat_chunks(**kwargs))


def responses_reply(**kwargs: Any) -> SSEReply:
    """A Responses stream as the API frames it: `event:` + `data:` lines, no `[DONE]`."""
    return SSEReply([render_responses_sse([e]) for e in responses_events(**kwargs)], done=False)


@pytest.fixture
def tracker() -> TrackingTransport:
    """Pass as a model client's `transport` to count the response bodies it leaves open."""
    return TrackingTransport()


def streamed_text(sink: ListSink) -> str:
    return "".join(e.data["delta"] for e in sink.of(ev.OUTPUT_TEXT_DELTA))


async def all_closed(server: FakeModelServer) -> bool:
    """`wait_for_connections(0)` off the event loop, so the client side can finish closing."""
    return await asyncio.to_thread(server.wait_for_connections, 0)


def calls_and_outputs(result: RunResult) -> list[tuple[str, str, Any]]:
    """(type, call id, name or output) per tool item, in output order."""
    out: list[tuple[str, str, Any]] = []
    for item in raw_items(result.output):
        if item["type"] == "function_call":
            out.append(("call", item["call_id"], item["name"]))
        elif item["type"] == "function_call_output":
            out.append(("output", item["call_id"], item["output"]))
    return out


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --------------------------------------------------------------------------- multi-iteration


TWO_ROUNDS = [
    ToolCallSpec("add", {"a": 2, "b": 3}, id="call_add"),
    ToolCallSpec("weather", {"city": "Paris"}, id="call_weather"),
]
TWO_ROUNDS_ITEMS = [
    ("call", "call_add", "add"),
    ("output", "call_add", "5"),
    ("call", "call_weather", "weather"),
    ("output", "call_weather", "sunny in Paris"),
]
QUESTION = "2+3, and the weather in Paris?"


def chat_usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def responses_usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": prompt + completion,
    }


def ollama_counts(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_eval_count": prompt, "eval_count": completion}


async def test_chat_completions_two_tool_rounds_then_answer(server: FakeModelServer) -> None:
    server.script(
        chat_reply(tool_calls=[TWO_ROUNDS[0]], usage=chat_usage(10, 3)),
        chat_reply(tool_calls=[TWO_ROUNDS[1]], usage=chat_usage(20, 4)),
        chat_reply(text=["5, and it is ", "sunny."], usage=chat_usage(30, 5)),
    )
    relay = Relay(OpenAIChat(base_url=server.base_url, model="m"), [add, weather])
    result = await relay.run(QUESTION)
    assert result.status == "completed" and result.error is None
    assert result.text == "5, and it is sunny."
    assert [i["type"] for i in result.output][-1] == "message"
    assert calls_and_outputs(result) == TWO_ROUNDS_ITEMS
    assert result.usage == {
        "prompt_tokens": 60,
        "completion_tokens": 12,
        "total_tokens": 72,
        "input_tokens": 60,
        "output_tokens": 12,
    }

    paths = [r.path for r in server.requests]
    assert paths == ["/v1/chat/completions"] * 3
    first, second, third = (r.json["messages"] for r in server.requests)
    assert first == [{"role": "user", "content": QUESTION}]
    assert second[1]["role"] == "assistant"
    assert second[1]["tool_calls"] == [
        {
            "id": "call_add",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a":2,"b":3}'},
        }
    ]
    assert second[2:] == [{"role": "tool", "tool_call_id": "call_add", "content": "5"}]
    assert third[:3] == second
    assert third[3]["tool_calls"][0]["id"] == "call_weather"
    assert third[4:] == [
        {"role": "tool", "tool_call_id": "call_weather", "content": "sunny in Paris"}
    ]
    names = [t["function"]["name"] for t in server.requests[0].json["tools"]]
    assert names == ["add", "weather"]
    await relay.aclose()
    assert await all_closed(server)


async def test_responses_two_tool_rounds_then_answer(server: FakeModelServer) -> None:
    server.script(
        responses_reply(function_calls=[TWO_ROUNDS[0]], usage=responses_usage(10, 3)),
        responses_reply(function_calls=[TWO_ROUNDS[1]], usage=responses_usage(20, 4)),
        responses_reply(text=["5, and it is ", "sunny."], usage=responses_usage(30, 5)),
    )
    relay = Relay(OpenAIResponses(base_url=server.base_url, model="m"), [add, weather])
    result = await relay.run(QUESTION)
    assert result.status == "completed"
    assert result.text == "5, and it is sunny."
    assert calls_and_outputs(result) == TWO_ROUNDS_ITEMS
    assert result.output[-1]["type"] == "message"
    assert result.usage == {"input_tokens": 60, "output_tokens": 12, "total_tokens": 72}

    assert [r.path for r in server.requests] == ["/v1/responses"] * 3
    bodies = [r.json for r in server.requests]
    assert all("previous_response_id" not in b for b in bodies)  # stateless: full history
    assert [b["store"] for b in bodies] == [False, False, False]
    user = {"role": "user", "content": QUESTION}
    assert bodies[0]["input"] == [user]
    assert bodies[1]["input"] == [
        user,
        {
            "type": "function_call",
            "call_id": "call_add",
            "name": "add",
            "arguments": '{"a":2,"b":3}',
        },
        {"type": "function_call_output", "call_id": "call_add", "output": "5"},
    ]
    assert bodies[2]["input"][:3] == bodies[1]["input"]
    assert bodies[2]["input"][3]["call_id"] == "call_weather"
    assert bodies[2]["input"][4] == {
        "type": "function_call_output",
        "call_id": "call_weather",
        "output": "sunny in Paris",
    }
    assert [t["name"] for t in bodies[0]["tools"]] == ["add", "weather"]
    await relay.aclose()
    assert await all_closed(server)


async def test_ollama_two_tool_rounds_then_answer(server: FakeModelServer) -> None:
    server.script(
        NDJSONReply(ollama_lines(tool_calls=[TWO_ROUNDS[0]], counts=ollama_counts(10, 3))),
        NDJSONReply(ollama_lines(tool_calls=[TWO_ROUNDS[1]], counts=ollama_counts(20, 4))),
        NDJSONReply(ollama_lines(text=["5, and it is ", "sunny."], counts=ollama_counts(30, 5))),
    )
    relay = Relay(Ollama(base_url=server.base_url, model="m"), [add, weather])
    result = await relay.run(QUESTION)
    assert result.status == "completed"
    assert result.text == "5, and it is sunny."
    assert calls_and_outputs(result) == TWO_ROUNDS_ITEMS
    # canonical counts are summed; Ollama's own counters keep the latest round's value
    assert result.usage == {
        "prompt_eval_count": 30,
        "eval_count": 5,
        "input_tokens": 60,
        "output_tokens": 12,
        "total_tokens": 72,
    }

    assert [r.path for r in server.requests] == ["/api/chat"] * 3
    second = server.requests[1].json["messages"]
    assert second[1]["role"] == "assistant"
    assert second[1]["tool_calls"][0]["function"]["name"] == "add"
    assert second[1]["tool_calls"][0]["function"]["arguments"] == {"a": 2, "b": 3}  # an object
    assert second[2:] == [
        {"role": "tool", "tool_call_id": "call_add", "content": "5", "tool_name": "add"}
    ]
    third = server.requests[2].json["messages"]
    assert third[:3] == second
    assert third[4:] == [
        {
            "role": "tool",
            "tool_call_id": "call_weather",
            "content": "sunny in Paris",
            "tool_name": "weather",
        }
    ]
    await relay.aclose()
    assert await all_closed(server)


async def test_ollama_calls_without_ids_get_minted_ids_that_match(
    server: FakeModelServer,
) -> None:
    server.script(
        NDJSONReply(ollama_lines(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 1})])),
        NDJSONReply(ollama_lines(text="2")),
    )
    relay = Relay(Ollama(base_url=server.base_url, model="m"), [add])
    result = await relay.run("1+1?")
    call, output = raw_items(result.output)[0:2]
    assert call["call_id"] and output["call_id"] == call["call_id"]
    tool_message = server.requests[1].json["messages"][-1]
    assert tool_message == {
        "role": "tool",
        "tool_call_id": call["call_id"],
        "content": "2",
        "tool_name": "add",
    }
    await relay.aclose()


# --------------------------------------------------------------------------- stateful responses


STATEFUL_HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": QUESTION},
]


async def run_stateful(server: FakeModelServer) -> list[dict[str, Any]]:
    """A stateful two-round turn; the three request bodies the server received."""
    server.script(
        responses_reply(function_calls=[TWO_ROUNDS[0]], response_id="resp_1"),
        responses_reply(function_calls=[TWO_ROUNDS[1]], response_id="resp_2"),
        responses_reply(text="done", response_id="resp_3"),
    )
    model = OpenAIResponses(base_url=server.base_url, model="m", stateful=True)
    relay = Relay(model, [add, weather])
    result = await relay.run(STATEFUL_HISTORY)
    assert result.status == "completed" and result.text == "done"
    assert calls_and_outputs(result)[1] == ("output", "call_add", "5")
    await relay.aclose()
    assert await all_closed(server)
    return [r.json for r in server.requests]


async def test_responses_stateful_continues_from_the_previous_response(
    server: FakeModelServer,
) -> None:
    first, second, third = await run_stateful(server)
    assert "previous_response_id" not in first
    assert first["store"] is True  # so the first response can be continued
    assert first["input"] == STATEFUL_HISTORY
    assert second["previous_response_id"] == "resp_1"
    assert third["previous_response_id"] == "resp_2"
    for body in (second, third):
        assert body["store"] is True
        assert body["input"][0] == {"role": "system", "content": "Be brief."}
        assert all(i.get("role") != "user" for i in body["input"])  # no history resent


async def test_responses_stateful_sends_this_rounds_tool_results(
    server: FakeModelServer,
) -> None:
    _, second, third = await run_stateful(server)
    for body, call_id, output in (
        (second, "call_add", "5"),
        (third, "call_weather", "sunny in Paris"),
    ):
        items = body["input"][1:]
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        assert outputs == [{"type": "function_call_output", "call_id": call_id, "output": output}]
        assert {i.get("call_id") for i in items} == {call_id}  # nothing from earlier rounds


# --------------------------------------------------------------------------- parallel calls


async def test_parallel_calls_keep_call_order_over_the_wire(server: FakeModelServer) -> None:
    finished: list[str] = []

    @tool
    async def slow(name: str, delay: float) -> str:
        """Sleep, then answer with the name."""
        await asyncio.sleep(delay)
        finished.append(name)
        return f"done {name}"

    server.script(
        chat_reply(
            tool_calls=[
                ToolCallSpec("slow", {"name": "a", "delay": 0.1}, id="call_a"),
                ToolCallSpec("slow", {"name": "b", "delay": 0.0}, id="call_b"),
                ToolCallSpec("slow", {"name": "c", "delay": 0.05}, id="call_c"),
            ],
            args_pieces=3,
        ),
        chat_reply(text="all done"),
    )
    relay = Relay(OpenAIChat(base_url=server.base_url, model="m"), [slow])
    result = await relay.run("go")
    assert finished == ["b", "c", "a"]  # they really ran concurrently
    assert calls_and_outputs(result) == [
        ("call", "call_a", "slow"),
        ("call", "call_b", "slow"),
        ("call", "call_c", "slow"),
        ("output", "call_a", "done a"),
        ("output", "call_b", "done b"),
        ("output", "call_c", "done c"),
    ]
    sent = server.requests[1].json["messages"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_a", "call_b", "call_c"]
    assert sent[2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "done a"},
        {"role": "tool", "tool_call_id": "call_b", "content": "done b"},
        {"role": "tool", "tool_call_id": "call_c", "content": "done c"},
    ]
    assert result.text == "all done"
    await relay.aclose()


# --------------------------------------------------------------------------- faults


async def run_failing(
    relay: Relay, server: FakeModelServer, tracker: TrackingTransport
) -> RunResult:
    """Run a turn that must fail and check what every failed turn must do."""
    sink = ListSink()
    result = await relay.run("go", sink=sink)
    assert result.status == "failed"
    assert result.error
    errors = sink.of(ev.CHAT_MESSAGE_ERROR)
    assert [e.data for e in errors] == [{"error": {"content": result.error}}]
    last = sink.events[-1]
    assert last.type == ev.CHAT_COMPLETION
    assert last.data["done"] is True
    assert last.data["status"] == "failed"
    assert last.data["error"] == {"content": result.error}
    assert last.data["content"] == result.text
    assert tracker.open_bodies == 0
    await relay.aclose()
    assert await all_closed(server)
    return result


async def test_connection_refused_fails_cleanly(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    port = closed_port()
    model = OpenAIChat(
        base_url=f"http://127.0.0.1:{port}",
        model="m",
        http=HTTPOptions(retry=NO_RETRY, transport=tracker),
    )
    result = await run_failing(Relay(model), server, tracker)
    assert (result.error or "").startswith("Cannot connect to the model server: ")
    assert result.output == []
    assert server.requests == []


async def test_dropped_mid_stream_keeps_partial_text(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    # events: role chunk, "Hello ", "world ", then the TCP connection is aborted
    server.script(SSEReply(chat_chunks(text=["Hello ", "world ", "and ", "more"]), drop_after=3))
    relay = Relay(
        OpenAIChat(
            base_url=server.base_url, model="m", http=HTTPOptions(retry=NO_RETRY, transport=tracker)
        )
    )
    result = await run_failing(relay, server, tracker)
    assert (result.error or "").startswith("Connection to the model server was lost mid-response: ")
    assert result.text == "Hello world "
    assert [(i["type"], i["status"]) for i in result.output] == [("message", "incomplete")]


async def test_http_500_after_a_tool_round_keeps_the_round(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    server.script(
        chat_reply(tool_calls=[TWO_ROUNDS[0]]),
        JSONReply({"error": {"message": "upstream exploded"}}, status=500),
        chat_reply(text="never served"),
    )
    relay = Relay(
        OpenAIChat(
            base_url=server.base_url, model="m", http=HTTPOptions(retry=NO_RETRY, transport=tracker)
        ),
        [add],
    )
    result = await run_failing(relay, server, tracker)
    assert result.error == "Model server returned 500: upstream exploded"
    assert calls_and_outputs(result) == [("call", "call_add", "add"), ("output", "call_add", "5")]
    assert len(server.requests) == 2  # attempts=1: the 500 was not retried


async def test_http_429_is_retried_and_the_turn_completes(server: FakeModelServer) -> None:
    server.script(
        RawReply(
            429,
            b'{"error": {"message": "slow down"}}',
            {"content-type": "application/json", "retry-after-ms": "10"},
        ),
        chat_reply(text="after the wait", usage={"prompt_tokens": 4, "completion_tokens": 3}),
    )
    relay = Relay(
        OpenAIChat(base_url=server.base_url, model="m", http=HTTPOptions(retry=FAST_RETRY))
    )
    sink = ListSink()
    result = await relay.run("go", sink=sink)
    assert result.status == "completed" and result.error is None
    assert result.text == "after the wait"
    assert result.usage["input_tokens"] == 4 and result.usage["output_tokens"] == 3
    assert len(server.requests) == 2
    assert server.requests[0].json == server.requests[1].json  # the same request, resent
    assert sink.of(ev.CHAT_MESSAGE_ERROR) == []
    assert [i["type"] for i in result.output] == ["message"]  # one turn, one answer
    await relay.aclose()
    assert await all_closed(server)


async def test_malformed_chunk_fails_with_partial_text(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    chunks: list[Any] = chat_chunks(text=["Hi ", "there"])
    # the role chunk, both text chunks, then a broken event before the finish chunk
    server.script(SSEReply([*chunks[:3], b"data: {broken\n\n", *chunks[3:]]))
    relay = Relay(
        OpenAIChat(
            base_url=server.base_url, model="m", http=HTTPOptions(retry=NO_RETRY, transport=tracker)
        )
    )
    result = await run_failing(relay, server, tracker)
    assert (result.error or "").startswith("Malformed chunk from the model server")
    assert result.text == "Hi there"
    assert result.output[0]["status"] == "incomplete"


async def test_idle_timeout_fails_with_partial_text(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    server.script(
        SSEReply(chat_chunks(text=["still ", "thinking "]), stall_after=2, stall_for=3600)
    )
    model = OpenAIChat(
        base_url=server.base_url,
        model="m",
        http=HTTPOptions(retry=NO_RETRY, transport=tracker, timeouts=Timeouts(idle=0.3)),
    )
    result = await run_failing(Relay(model), server, tracker)
    assert result.error == "Model server timed out: no data for 0.3 s"
    assert result.text == "still "
    assert result.output[0]["status"] == "incomplete"


# --------------------------------------------------------------------------- cancellation


async def test_cancel_mid_stream_over_sockets_saves_partial_and_closes(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    store = MemoryStore()
    user = await store.create_user("ann")
    chat = await store.create_chat(user.id)
    body = chat_chunks(text=["partial ", "answer ", "never ", "finished"])
    server.script(SSEReply(body, stall_after=3, stall_for=3600))
    relay = Relay(
        OpenAIChat(base_url=server.base_url, model="m", http=HTTPOptions(transport=tracker)),
        store=store,
    )
    sink = ListSink()
    task = asyncio.create_task(relay.run("go", sink=sink, chat_id=chat.id, message_id="m1"))
    await sink.wait_until(lambda: streamed_text(sink) == "partial answer ")  # then it stalls
    assert server.open_connections == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await all_closed(server)  # closed by the cancelled turn, before relay.aclose()
    assert tracker.open_bodies == 0
    saved = await store.get_messages(chat.id)
    assert [(m.id, m.status) for m in saved] == [("m1", "cancelled")]
    assert saved[0].content == "partial answer "
    assert saved[0].error == "Cancelled."
    assert saved[0].output[0]["status"] == "incomplete"
    assert ev.CHAT_TASKS_CANCEL in sink.types()
    await relay.aclose()
