"""Issue 8 in the loop: what goes back to the model and the client after tools run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.responses import HTMLResponse

from toolrelay import Relay, RunLimits, tool
from toolrelay.core import events as ev
from toolrelay.core.formats.transcript import to_chat_messages
from toolrelay.core.items import raw_items
from toolrelay.core.stream.think_tags import TagConfig
from toolrelay.engine.interpreter import CodeJob
from toolrelay.testing.scripted_model import ScriptedModel, reply
from toolrelay.testing.sinks import ListSink

pytestmark = pytest.mark.anyio


async def test_a_failing_fetch_url_is_not_cited() -> None:
    @tool
    def fetch_url(url: str) -> str:
        """Fetch a page."""
        raise ConnectionError("connection refused")

    model = ScriptedModel(
        reply(calls=[("fetch_url", {"url": "https://example.org"})]), reply("It is down.")
    )
    sink = ListSink()
    result = await Relay(model, [fetch_url]).run("read example.org", sink=sink)
    assert raw_items(result.output)[1]["output"] == "Error: connection refused"
    assert sink.of(ev.SOURCE) == []
    assert "https://example.org" not in str(model.requests[1].messages)


async def test_a_fetch_url_that_answers_with_an_error_text_is_not_cited() -> None:
    @tool
    def fetch_url(url: str) -> str:
        """Fetch a page."""
        return "Error: HTTP 404"

    model = ScriptedModel(
        reply(calls=[("fetch_url", {"url": "https://example.org/x"})]), reply("Not found.")
    )
    sink = ListSink()
    await Relay(model, [fetch_url]).run("read it", sink=sink)
    assert sink.of(ev.SOURCE) == []


async def test_a_rejected_fetch_url_is_not_cited() -> None:
    @tool(requires_approval=True)
    def fetch_url(url: str) -> str:
        """Fetch a page."""
        raise AssertionError("must not run")

    model = ScriptedModel(
        reply(calls=[("fetch_url", {"url": "https://example.org"})]), reply("Fine.")
    )
    relay = Relay(model, [fetch_url])
    sink = ListSink()

    async def reject() -> None:
        relay.approve((await sink.wait_for(ev.TOOL_APPROVAL)).data["id"], False)

    helper = asyncio.create_task(reject())
    result = await relay.run("read example.org", sink=sink)
    await helper
    assert raw_items(result.output)[1]["output"].startswith("The user rejected the call")
    assert sink.of(ev.SOURCE) == []


async def test_a_successful_fetch_url_is_cited() -> None:
    @tool
    def fetch_url(url: str) -> str:
        """Fetch a page."""
        return "Example Domain. This domain is for examples."

    model = ScriptedModel(
        reply(calls=[("fetch_url", {"url": "https://example.org"})]), reply("It says hi.")
    )
    sink = ListSink()
    await Relay(model, [fetch_url]).run("read example.org", sink=sink)
    (source,) = sink.of(ev.SOURCE)
    assert source.data["document"] == ["Example Domain. This domain is for examples."]


async def test_an_inline_html_response_reaches_the_model_as_the_ui_text() -> None:
    @tool
    def chart() -> HTMLResponse:
        """Draw a chart."""
        return HTMLResponse("<h1>Q3</h1>", headers={"Content-Disposition": "inline"})

    model = ScriptedModel(reply(calls=[("chart", {})]), reply("Shown."))
    result = await Relay(model, [chart]).run("chart it")
    output = raw_items(result.output)[1]
    assert output["output"] == "Displayed the UI to the user."
    assert output["embeds"] == ["<h1>Q3</h1>"]
    sent = to_chat_messages(model.requests[1].output)
    assert sent[-1]["content"] == "Displayed the UI to the user."


PNG = "data:image/png;base64," + "iVBORw0KGgo" * 4


async def test_an_image_inside_a_dict_reaches_the_model_as_an_image() -> None:
    @tool
    def plot() -> dict[str, object]:
        """Plot."""
        return {"title": "sales", "image": PNG}

    model = ScriptedModel(reply(calls=[("plot", {})]), reply("A rising line."))
    await Relay(model, [plot]).run("plot it")
    sent = to_chat_messages(model.requests[1].output)
    assert sent[-2]["content"] == '{"title":"sales","image":"[image]"}'
    assert sent[-1]["role"] == "user"
    assert {"type": "image_url", "image_url": {"url": PNG}} in sent[-1]["content"]


# ---------------------------------------------------------------- __event_call__ (item 16)


@tool
async def ask_name(__event_call__: Any) -> str:
    """Ask the user for their name."""
    answer = await __event_call__({"type": "input", "data": {"title": "Your name?"}})
    return f"Hello, {answer}!"


async def test_an_event_call_is_answered_like_a_client_tool() -> None:
    model = ScriptedModel(reply(calls=[("ask_name", {})]), reply("Greeted."))
    relay = Relay(model, [ask_name], limits=RunLimits(client_tool_timeout=30))  # a hang guard
    sink = ListSink()

    async def answer() -> None:
        asked = await sink.wait_for("input")
        assert asked.data["data"] == {"title": "Your name?"}
        assert relay.submit_tool_result(asked.data["id"], "Ada")

    helper = asyncio.create_task(answer())
    result = await relay.run("greet me", sink=sink)
    await helper
    assert raw_items(result.output)[1]["output"] == "Hello, Ada!"


async def test_an_unanswered_event_call_says_how_long_it_waited() -> None:
    model = ScriptedModel(reply(calls=[("ask_name", {})]), reply("Nobody answered."))
    limits = RunLimits(client_tool_timeout=0.05)
    result = await Relay(model, [ask_name], limits=limits).run("greet me")
    assert raw_items(result.output)[1]["output"] == (
        "Error: no answer to the `input` event call after 0.05 s."
    )
    assert result.output[1]["status"] == "failed"


# ---------------------------------------------------------------- code interpreter (items 17, cap)

CODE = '<code_interpreter type="code" lang="python">print(1)</code_interpreter>'
MAY_RUN_CODE = {"id": "u1", "role": "user", "permissions": {"features": {"code_interpreter": True}}}


class CountingRunner:
    """A code runner that records what it ran (no process)."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def run(self, code: str, lang: str, job: CodeJob | None = None) -> dict[str, Any]:
        self.ran.append(code)
        return {"stdout": "1\n", "stderr": "", "exit_code": 0}


async def run_code_turn(
    runner: CountingRunner | None, *, relay_args: dict[str, Any], run_args: dict[str, Any]
) -> Any:
    model = ScriptedModel(reply(CODE), reply("It printed 1."))
    relay = Relay(model, code_runner=runner, tags=TagConfig(code_interpreter=True), **relay_args)
    return await relay.run("compute", **run_args)


async def test_code_runs_when_every_gate_is_open() -> None:
    runner = CountingRunner()
    result = await run_code_turn(
        runner,
        relay_args={"capabilities": {"code_interpreter": True}},
        run_args={"user": MAY_RUN_CODE, "features": {"code_interpreter": True}},
    )
    assert runner.ran == ["print(1)"]
    assert [i["type"] for i in result.output] == ["code_interpreter", "message"]


@pytest.mark.parametrize(
    ("relay_args", "run_args"),
    [
        ({}, {"user": MAY_RUN_CODE, "features": {"code_interpreter": False}}),
        ({"builtin_tools": {"code_interpreter": False}}, {"user": MAY_RUN_CODE}),
        ({"capabilities": {"code_interpreter": False}}, {"user": MAY_RUN_CODE}),
        ({}, {"user": {"id": "u2", "role": "user"}}),
    ],
    ids=["not-requested", "model-builtin-tools-off", "model-not-capable", "user-not-permitted"],
)
async def test_a_closed_gate_keeps_the_code_from_running(
    relay_args: dict[str, Any], run_args: dict[str, Any]
) -> None:
    runner = CountingRunner()
    result = await run_code_turn(runner, relay_args=relay_args, run_args=run_args)
    assert runner.ran == []
    assert all(i["type"] != "code_interpreter" for i in result.output)
    assert "print(1)" in result.text  # left as the model's text


async def test_without_a_runner_the_tag_is_plain_text() -> None:
    result = await run_code_turn(None, relay_args={}, run_args={"user": MAY_RUN_CODE})
    assert all(i["type"] != "code_interpreter" for i in result.output)


async def test_the_code_interpreter_runs_at_most_five_times() -> None:
    runner = CountingRunner()
    model = ScriptedModel(*[reply(CODE) for _ in range(6)], reply("never asked"))
    relay = Relay(model, code_runner=runner, tags=TagConfig(code_interpreter=True))
    result = await relay.run("compute forever")
    assert len(runner.ran) == 5
    assert len(model.requests) == 6
    assert result.status == "completed"


# ---------------------------------------------------------------- background tasks (item 18)

TASK_REPLIES = ('{"title": "Sums"}', '{"tags": ["math"]}', '{"follow_ups": ["And 3+3?"]}')


class AfterDone:
    """A task model that records whether the final event was out when it was asked."""

    def __init__(self, sink: ListSink) -> None:
        self.inner = ScriptedModel(*[reply(t) for t in TASK_REPLIES])
        self.sink = sink
        self.done_before: list[bool] = []

    async def open(self, request: Any) -> Any:
        final = [e for e in self.sink.of(ev.CHAT_COMPLETION) if e.data.get("done")]
        self.done_before.append(bool(final))
        return await self.inner.open(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_background_tasks_run_after_the_final_done_event() -> None:
    sink = ListSink()
    task_model = AfterDone(sink)
    relay = Relay(ScriptedModel(reply("It is 2.")), task_model=task_model)
    result = await relay.run("1+1?", sink=sink)
    assert task_model.done_before == [True, True, True]
    types = sink.types()
    done = next(i for i, e in enumerate(sink.events) if e.data.get("done"))
    assert {ev.CHAT_TITLE, ev.CHAT_TAGS, ev.CHAT_FOLLOW_UPS} <= set(types[done + 1 :])
    assert result.title == "Sums" and result.follow_ups == ("And 3+3?",)


async def test_relay_stream_yields_the_task_events_after_done() -> None:
    task_model = ScriptedModel(*[reply(t) for t in TASK_REPLIES])
    relay = Relay(ScriptedModel(reply("It is 2.")), task_model=task_model)
    types = [e.type async for e in relay.stream("1+1?")]
    done = types.index(ev.CHAT_COMPLETION)
    assert sorted(types[done + 1 :]) == sorted([ev.CHAT_FOLLOW_UPS, ev.CHAT_TAGS, ev.CHAT_TITLE])
