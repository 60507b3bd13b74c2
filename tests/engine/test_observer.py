"""The observer hooks as the loop calls them: order, records filled, every way a turn ends."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from toolrelay import Relay, tool
from toolrelay.engine.observer import ModelCall, Observers, ToolCall, TurnStart, TurnSummary
from toolrelay.testing.scripted_model import Refuse, ScriptedModel, reply

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Recorder:
    """Writes down every hook call, with the record as it stood when the context exited."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []

    @contextmanager
    def turn(self, start: TurnStart) -> Iterator[Recorder]:
        self.log.append(("turn", start))
        try:
            yield self
        finally:
            self.log.append(("turn end", None))

    @contextmanager
    def model_call(self, call: ModelCall) -> Iterator[object]:
        yield call
        self.log.append(("model", (call.iteration, call.error, call.finish_reason, call.usage)))
        assert call.error is not None or call.ttfb_s is not None

    @contextmanager
    def tool_call(self, call: ToolCall) -> Iterator[object]:
        yield call
        self.log.append(("tool", (call.name, call.known, call.status, call.error)))

    def finished(self, summary: TurnSummary) -> None:
        self.log.append(("finished", summary))


async def test_hooks_in_order_with_their_records_filled() -> None:
    model = ScriptedModel(
        reply(calls=[("add", {"a": 2, "b": 3}), ("nope", {})], usage={"prompt_tokens": 5}),
        reply("5.", usage={"prompt_tokens": 9, "completion_tokens": 4}),
    )
    seen = Recorder()
    relay = Relay(model, [add], observer=seen, name="r")
    await relay.run("2+3?", chat_id="c1", message_id="m1")
    kinds = [k for k, _ in seen.log]
    assert kinds == ["turn", "model", "tool", "tool", "model", "finished", "turn end"]
    assert seen.log[0][1] == TurnStart("m1", "c1", "r")
    assert seen.log[1][1][:3] == (0, None, "tool_calls")
    assert sorted(v for k, v in seen.log if k == "tool") == [
        ("add", True, "completed", None),
        ("nope", False, "failed", 'Error: Tool "nope" not found.'),
    ]
    summary = seen.log[5][1]
    assert (summary.status, summary.iterations, summary.model_calls, summary.tool_calls) == (
        "completed",
        1,
        2,
        2,
    )
    assert summary.usage["input_tokens"] == 14


async def test_a_failed_call_and_a_cancelled_turn_are_reported() -> None:
    seen = Recorder()
    await Relay(ScriptedModel(Refuse("down", status=503)), observer=seen).run("hi")
    assert [k for k, _ in seen.log] == ["turn", "model", "finished", "turn end"]
    assert seen.log[1][1][1] == "down"
    assert seen.log[2][1].status == "failed"

    gate = asyncio.Event()

    @tool
    async def slow() -> str:
        """Waits forever."""
        gate.set()
        await asyncio.Event().wait()
        return "never"

    cancelled = Recorder()
    relay = Relay(ScriptedModel(reply(calls=[("slow", {})])), [slow], observer=cancelled)
    task = asyncio.get_running_loop().create_task(relay.run("go"))
    await gate.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [k for k, _ in cancelled.log][-2:] == ["finished", "turn end"]
    assert cancelled.log[-2][1].status == "cancelled"


async def test_observers_fan_out_in_order() -> None:
    first, second = Recorder(), Recorder()
    model = ScriptedModel(reply("hi"))
    await Relay(model, observer=Observers([first, second])).run("hi")
    assert [k for k, _ in first.log] == [k for k, _ in second.log]
    assert [k for k, _ in first.log] == ["turn", "model", "finished", "turn end"]


async def test_without_an_observer_no_record_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """The zero-cost promise, structurally: no hook record exists unless someone watches."""

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("a hook record was built with no observer")

    monkeypatch.setattr("toolrelay.engine.turn_core.ModelCall", never)
    monkeypatch.setattr("toolrelay.engine.loop.TurnStart", never)
    monkeypatch.setattr("toolrelay.engine.tool_runner.ToolCall", never)
    model = ScriptedModel(reply(calls=[("add", {"a": 1, "b": 2})]), reply("3"))
    result = await Relay(model, [add]).run("1+2?")
    assert (result.status, result.text) == ("completed", "3")
