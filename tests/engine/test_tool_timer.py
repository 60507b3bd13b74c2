"""Tool-call timeouts on one timer per turn (`engine.tool_timer`): every overdue call still
ends as a timeout result, every other call runs to its end, outside cancels stay cancels."""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager
from typing import Any

import pytest

from tests.patience import HANG
from tests.timers import timers_asked
from toolrelay import Relay, tool
from toolrelay.core.items import is_call_output, raw_items
from toolrelay.testing.scripted_model import ScriptedModel, reply

pytestmark = pytest.mark.anyio


def outputs(result: Any) -> dict[str, str]:
    items = raw_items(result.output)
    names = {i["call_id"]: i["name"] for i in items if i.get("type") == "function_call"}
    return {names[i["call_id"]]: str(i["output"]) for i in items if is_call_output(i)}


def counted_timers() -> AbstractContextManager[list[float]]:
    """Deadlines of the timers as far out as a tool call's timeout (120 s by default): the
    turn's `ToolTimer`, or an `asyncio.timeout` (not the 0.25 s grace after a body's end)."""
    loop = asyncio.get_running_loop()
    return timers_asked(
        lambda when, owner: (
            when > loop.time() + 60 and (owner is asyncio.Timeout or owner.__name__ == "ToolTimer")
        )
    )


@pytest.mark.parametrize("hang_first", [True, False])
async def test_an_overdue_call_times_out_while_the_other_runs_on(hang_first: bool) -> None:
    """Either order: the short deadline is watched although a far one was armed first."""
    gave_up = asyncio.Event()

    @tool(timeout=0.05)
    async def hang() -> str:
        """Never returns."""
        try:
            await asyncio.Event().wait()
        finally:
            gave_up.set()
        return "never"

    @tool(timeout=3600)
    async def patient() -> str:
        """Returns once the other call has been given up on."""
        await gave_up.wait()
        return "done"

    calls: list[tuple[str, dict[str, Any]]] = [("hang", {}), ("patient", {})]
    model = ScriptedModel(reply(calls=calls if hang_first else calls[::-1]), reply("ok"))
    async with asyncio.timeout(HANG):
        result = await Relay(model, [hang, patient]).run("go")
    assert result.status == "completed"
    assert outputs(result) == {
        "hang": "Error: Tool `hang` timed out after 0.05 s.",
        "patient": "done",
    }


async def test_the_tool_calls_of_a_turn_share_one_timer() -> None:
    @tool
    async def ping(n: int) -> str:
        """Answer at once."""
        return f"pong {n}"

    rounds = [reply(calls=[("ping", {"n": n})]) for n in range(3)]
    model = ScriptedModel(*rounds, reply("ok"))
    with counted_timers() as timers:
        result = await Relay(model, [ping]).run("go")
    assert result.status == "completed"
    said = [i["output"] for i in raw_items(result.output) if is_call_output(i)]
    assert said == ["pong 0", "pong 1", "pong 2"]
    assert len(timers) == 1  # armed by the first call; the next ones find it early enough


async def test_a_cancelled_turn_is_cancelled_not_timed_out() -> None:
    started = asyncio.Event()

    @tool(timeout=3600)
    async def slow() -> str:
        """Waits for ever."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    model = ScriptedModel(reply(calls=[("slow", {})]), reply("ok"))
    task = asyncio.create_task(Relay(model, [slow]).run("go"))
    async with asyncio.timeout(HANG):
        await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_tool_that_swallows_its_timeout_keeps_its_result() -> None:
    """As with `asyncio.timeout`: the call's own answer stands, and the cancel it swallowed
    is taken back (the task the calls run in is not left cancelling)."""

    @tool(timeout=0.05)
    async def stubborn() -> str:
        """Ignores being cancelled once."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "finished anyway"
        return "never"

    @tool
    async def probe() -> str:
        """How many cancels the running task has pending."""
        task = asyncio.current_task()
        assert task is not None
        return f"cancelling {task.cancelling()}"

    model = ScriptedModel(
        reply(calls=[("stubborn", {})]), reply(calls=[("probe", {})]), reply("ok")
    )
    async with asyncio.timeout(HANG):
        result = await Relay(model, [stubborn, probe]).run("go")
    assert result.status == "completed"
    assert outputs(result) == {"stubborn": "finished anyway", "probe": "cancelling 0"}
