"""Engine wiring that other tests passed without (issue 30 item 7): each test here was
seen to fail with the wiring it names removed.

- `ResponseReading.read` (`engine.response_read`) hands the reader the ids the conversation already holds
  (`call_ids=…`): without it a call reusing a history id keeps it.
- Parallel tool calls run at most `RunLimits.max_concurrency` at a time.
(The shield around a cancelled turn's save: `test_loop.py`'s
`test_cancel_mid_stream_saves_partial_and_reraises`.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolrelay import Relay, RunLimits, tool
from toolrelay.core.formats.transcript import to_chat_messages
from toolrelay.core.items import raw_items
from toolrelay.testing.scripted_model import ScriptedModel, reply
from toolrelay.testing.wire import ToolCallSpec

pytestmark = pytest.mark.anyio


@tool
async def weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


async def test_a_call_reusing_a_history_id_gets_a_fresh_one_in_the_loop() -> None:
    """Kimi restarts `functions.weather:0` every turn: the history already holds it."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "functions.weather:0",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "functions.weather:0", "content": "sunny in Paris"},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "And Rome?"},
    ]
    model = ScriptedModel(
        reply(calls=[ToolCallSpec("weather", {"city": "Rome"}, id="functions.weather:0")]),
        reply(calls=[ToolCallSpec("weather", {"city": "Oslo"}, id="functions.weather:0")]),
        reply("Done."),
    )
    result = await Relay(model, [weather]).run(history)
    assert result.status == "completed"
    ids = [i["call_id"] for i in raw_items(result.output) if i["type"] == "function_call"]
    assert len(ids) == 2
    assert "functions.weather:0" not in ids  # used by the history
    assert ids[0] != ids[1]  # the second round reused the first round's id too
    last = to_chat_messages(model.requests[-1].output)
    answers = {m["tool_call_id"]: m["content"] for m in last if m["role"] == "tool"}
    assert answers == {ids[0]: "sunny in Rome", ids[1]: "sunny in Oslo"}


async def test_parallel_calls_run_at_most_max_concurrency_at_a_time() -> None:
    """Counted, not timed: every call waits at a gate, so all five would be in at once
    without the bound; the test lets them through only after looking."""
    running, peak, gate = 0, 0, asyncio.Event()
    two_in = asyncio.Event()

    @tool
    async def slow(n: int) -> int:
        """Wait for the test."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 2:
            two_in.set()
        await gate.wait()
        running -= 1
        return n

    model = ScriptedModel(reply(calls=[("slow", {"n": n}) for n in range(5)]), reply("ok"))
    relay = Relay(model, [slow], limits=RunLimits(max_concurrency=2))
    task = asyncio.create_task(relay.run("go"))
    await two_in.wait()
    for _ in range(100):  # loop turns: any other call let in would have started by now
        await asyncio.sleep(0)
    assert (running, peak) == (2, 2)
    gate.set()
    result = await task
    assert result.status == "completed"
    outputs = [i["output"] for i in raw_items(result.output) if i["type"] == "function_call_output"]
    assert outputs == ["0", "1", "2", "3", "4"]
    assert peak == 2
