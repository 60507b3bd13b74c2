"""Behaviours no test could catch before (issue 8): each test here fails when its guard is removed.

The guard each one watches is named in its docstring; the report of issue 8
says how each was broken by hand to watch the test fail.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.patience import HANG
from toolrelay import Relay, RunLimits, tool
from toolrelay.core import events as ev
from toolrelay.core.items import function_call_item, raw_items
from toolrelay.core.turn.decide import RunTools, Step, decide
from toolrelay.engine.interfaces import ToolContext, ToolSpec
from toolrelay.engine.tasks import conversation_text, plain_text
from toolrelay.testing.scripted_model import Body, ScriptedModel, reply
from toolrelay.testing.sinks import ListSink

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


# ---------------------------------------------------------------- -1 = no cap


def test_minus_one_never_caps_however_many_rounds_ran() -> None:
    """Guard: `max_iterations != -1` in `core.turn.decide`."""
    call = function_call_item("c", "add", "{}")
    step = Step(output=[call], calls=[call], error=None, iterations=10**6, max_iterations=-1)
    assert isinstance(decide(step), RunTools)


async def test_minus_one_runs_past_the_default_cap_of_256() -> None:
    """Guard: -1 is not replaced by the default cap anywhere between RunLimits and decide."""
    rounds = 260
    model = ScriptedModel(
        *[reply(calls=[("add", {"a": i, "b": 1})]) for i in range(rounds)], reply("done")
    )
    limits = RunLimits(max_iterations=-1, coalesce_ms=0)
    result = await Relay(model, [add], limits=limits).run("count up")
    assert result.status == "completed" and result.text == "done"
    assert len(model.requests) == rounds + 1


# ---------------------------------------------------------------- argument filtering


class Recorder:
    """A raw `Tool` (no pydantic in between) that records the arguments it is called with."""

    def __init__(self, spec: ToolSpec) -> None:
        self.spec = spec
        self.seen: list[dict[str, Any]] = []

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.seen.append(arguments)
        return "ok"


SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}}


async def call_once(recorder: Recorder) -> dict[str, Any]:
    name = recorder.spec.name
    model = ScriptedModel(reply(calls=[(name, {"x": 1, "junk": True})]), reply("fine"))
    await Relay(model, [recorder]).run("go")
    (seen,) = recorder.seen
    return seen


async def test_undeclared_keys_are_dropped_before_the_call() -> None:
    """Guard: `filter_to_schema` in the runner's argument preparation."""
    assert await call_once(Recorder(ToolSpec(name="server_tool", parameters=SCHEMA))) == {"x": 1}


async def test_mcp_tools_keep_undeclared_keys() -> None:
    """Guard: the MCP exemption by kind (their server validates, R8)."""
    spec = ToolSpec(name="mcp_tool", parameters=SCHEMA, kind="mcp", validates_arguments=True)
    assert await call_once(Recorder(spec)) == {"x": 1, "junk": True}


async def test_a_tool_that_opts_out_of_filtering_keeps_undeclared_keys() -> None:
    """Guard: `ToolSpec.filter_arguments=False` is honoured."""
    spec = ToolSpec(name="kwargs_tool", parameters=SCHEMA, filter_arguments=False)
    assert await call_once(Recorder(spec)) == {"x": 1, "junk": True}


# ---------------------------------------------------------------- task inputs

DETAILS = '<details type="tool_calls" done="true">\n<summary>add</summary>\n{"a": 1}\n</details>'
IMAGE = "![chart](data:image/png;base64,iVBORw0KGgo=)"


def test_task_input_drops_tool_call_details_and_inline_images() -> None:
    """Guards: the `<details>` and Markdown data-image stripping in `engine.tasks.plain_text`."""
    text = plain_text(f"Before.\n{DETAILS}\nMiddle {IMAGE} after.")
    assert "details" not in text and "summary" not in text and '"a": 1' not in text
    assert "data:image" not in text and "chart" not in text
    assert text.startswith("Before.") and "Middle" in text and text.endswith("after.")


def test_task_input_keeps_text_parts_only() -> None:
    """Guard: image parts of a multimodal message never reach the task model."""
    parts = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]
    chat = conversation_text([{"role": "user", "content": parts}], [])
    assert chat == "USER: What is this?"


async def test_background_tasks_never_see_tool_details_or_images() -> None:
    """The same guards through a turn: the task model's input is plain text."""
    task_model = ScriptedModel(reply('{"title": "Sums"}'), reply("{}"), reply("{}"))
    history = [
        {"role": "user", "content": "add 1 and 1"},
        {"role": "assistant", "content": f"{DETAILS}\nIt is 2. {IMAGE}"},
    ]
    history.append({"role": "user", "content": "and now?"})
    await Relay(ScriptedModel(reply("Still 2.")), task_model=task_model).run(history)
    sent = task_model.requests[0].messages[1]["content"]
    assert "ASSISTANT: It is 2." in sent and "ASSISTANT: Still 2." in sent
    assert "<details" not in sent and "data:image" not in sent


# ---------------------------------------------------------------- the shielded cancel save


class HeldStore:
    """`save_turn` waits until released, so a second cancel can arrive during the save."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.saved = asyncio.Event()
        self.turns: dict[str, Any] = {}

    async def save_turn(self, chat_id: str, message_id: str, turn: Any) -> None:
        self.started.set()
        await self.release.wait()
        self.turns[message_id] = turn
        self.saved.set()

    async def load_messages(self, chat_id: str) -> list[dict[str, Any]]:
        return []


async def test_the_cancel_save_survives_a_second_cancel() -> None:
    """Guard: `asyncio.shield` around the save in `Turn.run`'s cancellation path."""
    store = HeldStore()
    body = reply(["partial ", "answer ", "never ", "finished"])
    model = ScriptedModel(Body(body, piece=len(body) // 4, stall_after=2))
    sink = ListSink()
    relay = Relay(model, store=store)
    task = asyncio.create_task(relay.run("go", sink=sink, chat_id="c1", message_id="m1"))
    await sink.wait_for(ev.OUTPUT_TEXT_DELTA)
    task.cancel()
    async with asyncio.timeout(HANG):
        await store.started.wait()
    task.cancel()  # e.g. a server shutting down while the partial turn is being saved
    await asyncio.sleep(0)
    store.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with asyncio.timeout(HANG):
        await store.saved.wait()
    assert store.turns["m1"]["status"] == "cancelled"
    assert store.turns["m1"]["content"].startswith("partial")


# ---------------------------------------------------------------- the client-tool timeout


async def test_an_unanswered_client_tool_times_out_after_client_tool_timeout() -> None:
    """Guard: the runner waits `client_tool_timeout` (not the server-tool timeout) for the client."""
    geo = Recorder(ToolSpec(name="geo", kind="client"))
    model = ScriptedModel(reply(calls=[("geo", {})]), reply("No location."))
    limits = RunLimits(client_tool_timeout=0.05, tool_timeout=3600)
    sink = ListSink()
    async with asyncio.timeout(HANG):
        result = await Relay(model, [geo], limits=limits).run("where am I", sink=sink)
    assert sink.of(ev.EXECUTE_TOOL)[0].data["name"] == "geo"
    assert geo.seen == []  # a client tool is never called on the server
    assert raw_items(result.output)[1]["output"] == "Error: Tool `geo` timed out after 0.05 s."
    assert result.output[1]["status"] == "failed"
    assert result.text == "No location."
