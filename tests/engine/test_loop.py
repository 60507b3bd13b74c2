"""The agent loop against the scripted model: iterations, caps, repeats, faults, cancel."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from toolrelay import Relay, RunLimits, tool
from toolrelay.core import events as ev
from toolrelay.core.items import is_call_output, raw_items
from toolrelay.testing.scripted_model import Body, Refuse, ScriptedModel, reply
from toolrelay.testing.sinks import ListSink

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
async def weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def tool_messages(request: Any) -> list[dict[str, Any]]:
    from toolrelay.core.formats.transcript import to_chat_messages

    return to_chat_messages(request.output)


async def test_one_tool_round_then_answer() -> None:
    model = ScriptedModel(
        reply(
            calls=[("add", {"a": 2, "b": 3})], usage={"prompt_tokens": 5, "completion_tokens": 2}
        ),
        reply("The sum is 5.", usage={"prompt_tokens": 9, "completion_tokens": 4}),
    )
    relay = Relay(model, [add])
    result = await relay.run("what is 2+3?")
    assert result.status == "completed"
    assert result.text == "The sum is 5."
    types = [i["type"] for i in result.output]
    assert types == ["function_call", "function_call_output", "message"]
    assert raw_items(result.output)[1]["output"] == "5"
    assert raw_items(result.output)[1]["call_id"] == raw_items(result.output)[0]["call_id"]
    assert result.usage["input_tokens"] == 14 and result.usage["output_tokens"] == 6
    # the second request carried the call and its result
    second = tool_messages(model.requests[1])
    assert second[0]["tool_calls"][0]["function"]["name"] == "add"
    assert second[1] == {
        "role": "tool",
        "tool_call_id": raw_items(result.output)[0]["call_id"],
        "content": "5",
    }
    assert model.open_streams == 0


async def test_parallel_calls_keep_call_order() -> None:
    order: list[str] = []

    @tool
    async def slow(name: str, delay: float) -> str:
        """Sleep then answer."""
        await asyncio.sleep(delay)
        order.append(name)
        return name

    model = ScriptedModel(
        reply(
            calls=[("slow", {"name": "a", "delay": 0.05}), ("slow", {"name": "b", "delay": 0.0})]
        ),
        reply("done"),
    )
    result = await Relay(model, [slow]).run("go")
    outputs = [i["output"] for i in result.output if is_call_output(i)]
    assert outputs == ["a", "b"]
    assert order == ["b", "a"]  # they really ran concurrently


async def test_sequential_tools_run_alone() -> None:
    running = 0
    peak = 0

    @tool(sequential=True)
    async def exclusive(n: int) -> int:
        """Runs alone."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return n

    model = ScriptedModel(reply(calls=[("exclusive", {"n": i}) for i in range(3)]), reply("ok"))
    result = await Relay(model, [exclusive]).run("go")
    assert peak == 1
    assert [i["output"] for i in result.output if is_call_output(i)] == [
        "0",
        "1",
        "2",
    ]


async def test_tool_errors_go_back_to_the_model() -> None:
    @tool
    def boom() -> str:
        """Fails."""
        raise RuntimeError("disk on fire")

    model = ScriptedModel(
        reply(
            calls=[
                ("boom", {}),
                ("missing", {}),
                ("add", "{not json"),
                ("add", "[1]"),
                ("add", {"a": "x", "b": 1}),
            ]
        ),
        reply("sorry"),
    )
    result = await Relay(model, [boom, add]).run("go")
    outs = [i["output"] for i in result.output if is_call_output(i)]
    assert outs[0] == "Error: disk on fire"
    assert outs[1] == 'Error: Tool "missing" not found.'
    assert outs[2] == (
        "Error: Tool call arguments could not be parsed. The model generated malformed "
        "or incomplete JSON for `add`. Please try again."
    )
    assert (
        outs[3] == "Error: Tool call arguments for `add` must be a JSON object. Please try again."
    )
    assert outs[4] == (
        "Error: Invalid arguments for tool 'add': a: Input should be a valid integer, "
        "unable to parse string as an integer"
    )
    assert result.status == "completed" and result.text == "sorry"


async def test_schema_validation_for_tools_that_do_not_validate_themselves() -> None:
    from toolrelay.engine.interfaces import ToolSpec

    class Plain:
        spec = ToolSpec(
            name="plain",
            parameters={
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            },
        )

        async def call(self, arguments: dict[str, Any], context: Any) -> Any:
            raise AssertionError("invalid arguments must not reach the tool")

    model = ScriptedModel(reply(calls=[("plain", {"n": "x"})]), reply("ok"))
    result = await Relay(model, [Plain()]).run("go")
    assert raw_items(result.output)[1]["output"] == (
        "Error: Invalid arguments for `plain`: at $.n: 'x' is not of type 'integer'. "
        "Please fix and try again."
    )


async def test_arguments_are_canonical_and_filtered() -> None:
    seen: dict[str, Any] = {}

    @tool
    def echo(x: int) -> str:
        """Echo."""
        seen["x"] = x
        return "ok"

    model = ScriptedModel(reply(calls=[("echo", "{'x': 1, 'junk': True}")]), reply("fine"))
    result = await Relay(model, [echo]).run("go")
    assert seen == {"x": 1}
    assert orjson.loads(raw_items(result.output)[0]["arguments"]) == {"x": 1, "junk": True}
    assert raw_items(result.output)[0]["arguments"] == '{"x":1,"junk":true}'


async def test_tool_timeout_is_a_result() -> None:
    @tool(timeout=0.05)
    async def hang() -> str:
        """Never returns."""
        await asyncio.sleep(10)
        return "never"

    model = ScriptedModel(reply(calls=[("hang", {})]), reply("gave up"))
    result = await Relay(model, [hang]).run("go")
    assert raw_items(result.output)[1]["output"] == "Error: Tool `hang` timed out after 0.05 s."
    assert result.output[1]["status"] == "failed"


async def test_cap_with_error() -> None:
    model = ScriptedModel(*[reply(calls=[("add", {"a": i, "b": 1})]) for i in range(3)])
    sink = ListSink()
    result = await Relay(model, [add], limits=RunLimits(max_iterations=2)).run("loop", sink=sink)
    assert result.status == "capped"
    assert result.error == "Tool-call limit reached: stopped after 2 rounds of tool calls."
    assert len(model.requests) == 3
    assert sink.of(ev.CHAT_MESSAGE_ERROR)[0].data == {"error": {"content": result.error}}
    assert (
        result.output[-1]["type"] == "function_call" and result.output[-1]["status"] == "incomplete"
    )


async def test_cap_with_final_answer() -> None:
    model = ScriptedModel(
        reply(calls=[("add", {"a": 1, "b": 1})]),
        reply(calls=[("add", {"a": 2, "b": 2})]),
        reply("final"),
    )
    relay = Relay(model, [add], limits=RunLimits(max_iterations=1, on_cap="final_answer"))
    result = await relay.run("go")
    assert result.status == "capped" and result.text == "final"
    assert model.requests[-1].tools == []


async def test_repeated_identical_calls_warn_then_stop() -> None:
    model = ScriptedModel(*[reply(calls=[("add", {"a": 1, "b": 1})]) for _ in range(7)])
    result = await Relay(model, [add], limits=RunLimits(repeat_warn=2)).run("go")
    outs = [i["output"] for i in raw_items(result.output) if i["type"] == "function_call_output"]
    assert outs[0] == "2"
    assert outs[1].startswith("Error: you have called `add` with exactly these arguments 2 times")
    assert result.status == "failed"
    assert (
        result.error == "Stopped: the model called `add` with the same arguments 4 times in a row."
    )
    assert len(model.requests) == 4


async def test_finish_reason_tool_calls_without_calls_does_not_loop() -> None:
    model = ScriptedModel(reply("hi", finish_reason="tool_calls"))
    result = await Relay(model, [add]).run("go")
    assert result.status == "completed" and len(model.requests) == 1


async def test_upstream_refusal_fails_cleanly() -> None:
    model = ScriptedModel(Refuse("Model server returned 500: boom", status=500))
    sink = ListSink()
    result = await Relay(model).run("go", sink=sink)
    assert result.status == "failed" and result.error == "Model server returned 500: boom"
    assert sink.events[-1].type == ev.CHAT_COMPLETION and sink.events[-1].data["done"] is True
    assert sink.of(ev.CHAT_MESSAGE_ERROR)


async def test_dropped_mid_stream_keeps_partial_output() -> None:
    body = reply(["Hello ", "world ", "and ", "more"])
    model = ScriptedModel(Body(body, piece=len(body) // 3, fail_after=2))
    result = await Relay(model).run("go")
    assert result.status == "failed"
    assert "lost mid-response" in (result.error or "")
    assert result.text.startswith("Hello")
    assert result.output[0]["status"] == "incomplete"
    assert model.open_streams == 0


async def test_malformed_chunk_fails_with_partial() -> None:
    body = reply("Hi there").replace(b"data: [DONE]", b"data: {broken\n\ndata: [DONE]")
    result = await Relay(ScriptedModel(body)).run("go")
    assert result.status == "failed"
    assert (result.error or "").startswith("Malformed chunk from the model server")
    assert result.text == "Hi there"


async def test_cancel_mid_stream_saves_partial_and_reraises() -> None:
    """Cancelled mid-stream, then cancelled again while the save runs (a shutdown
    cancelling the canceller): the save is shielded and finishes, and only then does
    the cancellation reach the caller (the store holds the turn when `await` raises)."""
    saving, release = asyncio.Event(), asyncio.Event()

    class Store:
        def __init__(self) -> None:
            self.turns: dict[tuple[str, str], Any] = {}

        async def save_turn(self, chat_id: str, message_id: str, turn: Any) -> None:
            saving.set()
            await release.wait()
            self.turns[(chat_id, message_id)] = turn

        async def load_messages(self, chat_id: str) -> list[dict[str, Any]]:
            return []

    store = Store()
    body = reply(["partial ", "answer ", "never ", "finished"])
    model = ScriptedModel(Body(body, piece=len(body) // 4, stall_after=2))
    sink = ListSink()
    relay = Relay(model, store=store)
    task = asyncio.create_task(relay.run("go", sink=sink, chat_id="c1", message_id="m1"))
    await sink.wait_for(ev.OUTPUT_TEXT_DELTA)
    task.cancel()
    await saving.wait()
    task.cancel()
    for _ in range(20):  # loop turns, not time
        await asyncio.sleep(0)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    saved = store.turns[("c1", "m1")]
    assert saved["status"] == "cancelled"
    assert saved["content"].startswith("partial")
    assert ev.CHAT_TASKS_CANCEL in sink.types()
    assert model.open_streams == 0


async def test_a_second_cancel_does_not_abandon_the_save() -> None:
    """A shutdown cancels the canceller too: the turn must still wait for its own save."""
    saving, release = asyncio.Event(), asyncio.Event()

    class Store:
        def __init__(self) -> None:
            self.turns: dict[tuple[str, str], Any] = {}

        async def save_turn(self, chat_id: str, message_id: str, turn: Any) -> None:
            saving.set()
            await release.wait()
            self.turns[(chat_id, message_id)] = turn

        async def load_messages(self, chat_id: str) -> list[dict[str, Any]]:
            return []

    store = Store()
    body = reply(["partial ", "answer ", "never ", "finished"])
    model = ScriptedModel(Body(body, piece=len(body) // 4, stall_after=2))
    sink = ListSink()
    task = asyncio.create_task(
        Relay(model, store=store).run("go", sink=sink, chat_id="c1", message_id="m1")
    )
    await sink.wait_for(ev.OUTPUT_TEXT_DELTA)
    task.cancel()
    await saving.wait()
    task.cancel()
    for _ in range(50):  # loop iterations, not time: an abandoned save ends the task at once
        await asyncio.sleep(0)
    assert not task.done()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store.turns[("c1", "m1")]["status"] == "cancelled"


async def test_cancel_mid_tool_reaches_the_tool() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def long() -> str:
        """Takes long."""
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "x"

    model = ScriptedModel(reply(calls=[("long", {})]))
    sink = ListSink()
    task = asyncio.create_task(Relay(model, [long]).run("go", sink=sink))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()
    final = sink.events[-1].data
    assert final["status"] == "cancelled"
    assert [(i["type"], i["status"]) for i in final["output"]] == [("function_call", "incomplete")]


async def test_client_tool_round_trip() -> None:
    from toolrelay.engine.interfaces import ToolSpec

    class Browser:
        spec = ToolSpec(name="geo", kind="client", parameters={"type": "object", "properties": {}})

        async def call(self, arguments: dict[str, Any], context: Any) -> Any:
            raise AssertionError("client tools are not called on the server")

    model = ScriptedModel(reply(calls=[("geo", {})]), reply("You are in Paris."))
    relay = Relay(model, [Browser()])
    sink = ListSink()

    async def answer() -> None:
        data = (await sink.wait_for(ev.EXECUTE_TOOL)).data
        assert data["name"] == "geo" and data["params"] == {}
        assert relay.submit_tool_result(data["id"], {"city": "Paris"})

    helper = asyncio.create_task(answer())
    result = await relay.run("where am I", sink=sink)
    await helper
    assert raw_items(result.output)[1]["output"] == '{"city":"Paris"}'


async def test_approval_rejected() -> None:
    @tool(requires_approval=True)
    def delete_all() -> str:
        """Dangerous."""
        raise AssertionError("must not run")

    model = ScriptedModel(reply(calls=[("delete_all", {})]), reply("ok, not deleted"))
    relay = Relay(model, [delete_all])
    sink = ListSink()

    async def reject() -> None:
        approval = await sink.wait_for(ev.TOOL_APPROVAL)
        relay.approve(approval.data["id"], False, reason="no way")

    helper = asyncio.create_task(reject())
    result = await relay.run("clean up", sink=sink)
    await helper
    assert (
        raw_items(result.output)[1]["output"]
        == "The user rejected the call to `delete_all`; it was not run. Reason: no way"
    )


async def test_stream_events_end_with_done_and_announce_calls_early() -> None:
    model = ScriptedModel(reply(calls=[("add", {"a": 1, "b": 2})], args_pieces=4), reply("3"))
    events = [e async for e in Relay(model, [add], limits=RunLimits(coalesce_ms=0)).stream("go")]
    types = [e.type for e in events]
    assert types[-1] == ev.CHAT_COMPLETION and events[-1].data["done"] is True
    added = types.index(ev.OUTPUT_ITEM_ADDED)
    assert events[added].data["item"]["type"] == "function_call"
    assert events[added].data["item"]["status"] == "in_progress"
    assert types[added + 1] == ev.FUNCTION_CALL_ARGUMENTS_DELTA
    assert types.count(ev.FUNCTION_CALL_ARGUMENTS_DELTA) == 4
    assert events[-1].data["content"] == "3"


async def test_coalescing_merges_deltas() -> None:
    text = [f"w{i} " for i in range(50)]
    events = [e async for e in Relay(ScriptedModel(reply(text))).stream("go")]
    deltas = [e for e in events if e.type == ev.OUTPUT_TEXT_DELTA]
    assert 1 <= len(deltas) < 50
    assert "".join(d.data["delta"] for d in deltas) == "".join(text)


async def test_reasoning_replayed_for_deepseek_style() -> None:
    from toolrelay.core.formats.transcript import to_chat_messages

    model = ScriptedModel(
        reply(reasoning=["need a sum"], calls=[("add", {"a": 1, "b": 1})]), reply("2")
    )
    await Relay(model, [add]).run("go")
    messages = to_chat_messages(model.requests[1].output, reasoning="reasoning_content")
    assert messages[0]["reasoning_content"] == "need a sum"


async def test_rag_context_never_stacks() -> None:
    model = ScriptedModel(
        *[reply(calls=[("add", {"a": i, "b": 0})]) for i in range(3)], reply("ok")
    )
    sources = [
        {
            "source": {"id": "f1", "name": "doc.txt"},
            "document": ["The sky is green."],
            "metadata": [{"source": "doc.txt"}],
        }
    ]
    await Relay(model, [add]).run("question?", sources=sources)
    for request in model.requests:
        user = request.messages[-1]["content"]
        assert user.count("The sky is green.") == 1
        assert user.endswith("question?")


async def test_outlet_filter_changes_output() -> None:
    class Upper:
        def outlet(self, body: dict[str, Any]) -> dict[str, Any]:
            body["messages"][-1]["content"] = body["messages"][-1]["content"].upper()
            return body

    sink = ListSink()
    result = await Relay(ScriptedModel(reply("quiet")), filters=[Upper()]).run("go", sink=sink)
    assert result.text == "QUIET"
    assert sink.of(ev.CHAT_OUTLET)[0].data["content"] == "QUIET"


async def test_background_tasks_use_stripped_input() -> None:
    task_model = ScriptedModel(
        reply('{"title": "Adding numbers"}'),
        reply('{"tags": ["math"]}'),
        reply('{"follow_ups": ["And 3+3?"]}'),
    )
    model = ScriptedModel(reply(calls=[("add", {"a": 1, "b": 1})]), reply("It is 2."))
    sink = ListSink()
    result = await Relay(model, [add], task_model=task_model).run("1+1?", sink=sink)
    assert result.title == "Adding numbers" and result.tags == ("math",)
    assert result.follow_ups == ("And 3+3?",)
    assert sink.of(ev.CHAT_TITLE)[0].data == {"title": "Adding numbers"}
    chat_text = task_model.requests[0].messages[1]["content"]
    assert "USER: 1+1?" in chat_text and "ASSISTANT: It is 2." in chat_text
    assert "add" not in chat_text


async def test_code_interpreter_runs_block() -> None:
    from toolrelay.core.stream.think_tags import TagConfig
    from toolrelay.engine.interpreter import SubprocessRunner

    model = ScriptedModel(
        reply('<code_interpreter type="code" lang="python">print(6*7)</code_interpreter>'),
        reply("It printed 42."),
    )
    relay = Relay(
        model, tags=TagConfig(code_interpreter=True), code_runner=SubprocessRunner(timeout=20)
    )
    result = await relay.run("compute")
    code = next(i for i in raw_items(result.output) if i["type"] == "code_interpreter")
    assert code["output"]["stdout"] == "42\n"
    assert result.text.endswith("It printed 42.")
    assert len(model.requests) == 2


PIXEL = "data:image/png;base64," + "iVBORw0KGgo" * 200


async def test_image_results_go_to_the_model_and_are_stripped_for_clients() -> None:
    from toolrelay.core.formats.transcript import to_chat_messages

    @tool
    def screenshot() -> str:
        """Take a screenshot."""
        return PIXEL

    model = ScriptedModel(reply(calls=[("screenshot", {})]), reply("I see it."))
    sink = ListSink()
    result = await Relay(model, [screenshot]).run("look", sink=sink)
    output = raw_items(result.output)[1]
    assert output["output"] == [
        {"type": "input_text", "text": "The image was read and shown to the user."},
        {"type": "input_image", "image_url": PIXEL},
    ]
    assert output["files"] == [{"type": "image", "url": PIXEL}]
    sent = to_chat_messages(model.requests[1].output)
    assert sent[-1]["role"] == "user"
    assert sent[-1]["content"][1] == {"type": "image_url", "image_url": {"url": PIXEL}}
    shown = [
        e.data["item"]
        for e in sink.of(ev.OUTPUT_ITEM_DONE)
        if e.data["item"]["type"] == "function_call_output"
    ]
    assert PIXEL not in orjson.dumps(shown).decode()
    assert "stripped" in orjson.dumps(shown).decode()


async def test_citations_and_terminal_events() -> None:
    @tool
    def search_web(query: str) -> list[dict[str, str]]:
        """Search the web."""
        return [{"title": "Python", "link": "https://python.org", "snippet": "The language."}]

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        return "ok"

    model = ScriptedModel(
        reply(
            calls=[
                ("search_web", {"query": "python"}),
                ("write_file", {"path": "a.md", "content": "x"}),
            ]
        ),
        reply("Done."),
    )
    sink = ListSink()
    await Relay(model, [search_web, write_file]).run("find python", sink=sink)
    (source,) = sink.of(ev.SOURCE)
    assert source.data["document"] == ["The language."]
    assert source.data["metadata"][0]["source"] == "https://python.org"
    assert sink.of(ev.TERMINAL_WRITE_FILE)[0].data["path"] == "a.md"
    # the next request carries the source as a citation marker, once
    user = model.requests[1].messages[-1]["content"]
    assert user.count("https://python.org") == 1 and user.endswith("find python")


async def test_timings_record_each_model_call_and_tool_batch() -> None:
    model = ScriptedModel(
        reply(
            calls=[("add", {"a": 1, "b": 2})], usage={"prompt_tokens": 3, "completion_tokens": 1}
        ),
        reply("3", usage={"prompt_tokens": 5, "completion_tokens": 1}),
    )
    result = await Relay(model, [add]).run("1+2")
    steps = result.timings["steps"]
    assert [s["step"] for s in steps] == ["model", "tools", "model"]
    assert steps[0]["finish_reason"] == "tool_calls" and steps[0]["usage"]["input_tokens"] == 3
    assert steps[1]["calls"] == 1
    assert steps[2]["usage"]["input_tokens"] == 5
    assert all(s["s"] >= 0 for s in steps)
    assert result.timings["total_s"] >= sum(s["s"] for s in steps) - 1e-3


async def test_text_around_a_tool_call_is_kept_apart() -> None:
    model = ScriptedModel(
        reply("Let me check.", calls=[("add", {"a": 1, "b": 1})]),
        reply("It is 2."),
    )
    result = await Relay(model, [add]).run("1+1")
    assert result.text == "Let me check.\n\nIt is 2."
