"""The gate: flowing streams give way to starting chats only while the loop is busy.

Which iterations count as busy is set by the threshold (-1: every one, inf:
none), so nothing here depends on the clock; what is checked is who waits,
and what lets them go.
"""

from __future__ import annotations

import asyncio
import math

import pytest

from toolrelay.server.gate import IDLE_PROBE_S, Gate

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _spin() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_stream_waits_while_a_chat_starts_on_a_busy_loop_until_it_started() -> None:
    gate = Gate(asyncio.get_running_loop(), busy_s=-1)
    gate.enter()
    await _spin()  # the probe has measured an iteration
    waiting = asyncio.ensure_future(gate.give_way())
    await _spin()
    assert not waiting.done()
    gate.leave()  # the starting chat sent its first token
    await _spin()
    assert waiting.done()
    assert gate.starting == 0


async def test_nobody_waits_without_starting_chats_or_on_an_idle_loop() -> None:
    gate = Gate(asyncio.get_running_loop(), busy_s=-1)
    await _spin()
    await asyncio.wait_for(gate.give_way(), 5)  # nobody is starting
    gate.busy_s = math.inf
    gate.enter()
    await _spin()
    await asyncio.wait_for(gate.give_way(), 5)  # the loop keeps up
    gate.leave()


async def test_an_idle_iteration_lets_the_waiting_streams_go() -> None:
    gate = Gate(asyncio.get_running_loop(), busy_s=-1)
    gate.enter()
    await _spin()
    waiting = asyncio.ensure_future(gate.give_way())
    await _spin()
    assert not waiting.done()
    gate.busy_s = math.inf  # the next iteration is quick
    await _spin()
    assert waiting.done()
    assert gate.starting == 1
    gate.leave()


class CountingGate(Gate):
    ticks = 0

    def _tick(self, scheduled: float) -> None:
        self.ticks += 1
        super()._tick(scheduled)


async def test_a_starting_chat_on_an_idle_loop_lets_the_loop_sleep() -> None:
    """No busy spin while a chat waits for its first token (a local model reading its
    prompt for seconds): on an idle loop the probe pauses between measurements."""
    gate = CountingGate(asyncio.get_running_loop(), busy_s=math.inf)  # every iteration idle
    gate.enter()
    await asyncio.sleep(0.1)  # the loop has nothing else to do
    assert gate.ticks <= 0.1 / IDLE_PROBE_S + 5  # a spin measures thousands of iterations
    gate.leave()
    await asyncio.sleep(2 * IDLE_PROBE_S)
    assert not gate._probing  # the probe stops with the last starting chat
