"""A paused turn (invariant 7), on MemoryBus, IpcBus and RedisBus alike.

A chat turn that waits for a client tool's result or an approval gives its lease
back and is run by nobody until the answer comes, maybe in another worker. Its
stream must not end there: a reader stays, and a replay from the turn's start
after it went on has the events from before the pause, in order, with the same
seqs, no gap and no repeat.
"""

from __future__ import annotations

from contextlib import aclosing

import anyio
import pytest

from tests.patience import HANG
from toolrelay.adapters.events import PAUSE_KEPT, Envelope, EventBus
from toolrelay.adapters.events.memory import MemoryBus
from toolrelay.core.events import OUTPUT_ITEM_DONE, OUTPUT_TEXT_DELTA, Event

from .conftest import BusFactory
from .test_bus import CHAT, Collector, drain, note, seqs

pytestmark = pytest.mark.anyio


def _delta(text: str) -> Event:
    return Event(OUTPUT_TEXT_DELTA, {"item_id": "m", "output_index": 0, "delta": text})


def _done(text: str) -> Event:
    item = {"type": "message", "id": "m", "content": [{"type": "output_text", "text": text}]}
    return Event(OUTPUT_ITEM_DONE, {"output_index": 0, "item": item})


BEFORE = [_delta("Let me "), _delta("ask."), _done("Let me ask."), note("execute:tool")]
AFTER = [_delta("Berlin"), _delta("."), _done("Berlin."), note("chat:completion")]


async def test_a_paused_turn_keeps_its_readers_and_goes_on_as_the_same_turn(
    make_bus: BusFactory,
) -> None:
    runner = await make_bus()
    # two workers (sharing the IPC host or Redis); one process's memory bus is its own
    answerer = runner if isinstance(runner, MemoryBus) else await make_bus()
    start = await runner.acquire(CHAT, ttl=HANG)
    assert start is not None
    live = Collector()
    async with anyio.create_task_group() as tg:
        tg.start_soon(live.run, answerer.subscribe(CHAT, after=start))
        sent = [Envelope(await runner.publish(CHAT, e), e) for e in BEFORE]
        await live.wait_until(lambda: len(live.items) == len(BEFORE))
        await runner.pause(CHAT)
        assert not await answerer.turn_running(CHAT)  # no lease: any worker may go on
        late = Collector()  # a reader that comes during the pause, from the turn's start
        tg.start_soon(late.run, runner.subscribe(CHAT, after=start))
        await late.wait_until(lambda: bool(late.items) and late.items[-1] == sent[-1])
        # the answer came: another worker takes the lease and goes on with the same turn
        assert await answerer.acquire(CHAT, ttl=HANG) == start
        assert await answerer.turn_start(CHAT) == start
        sent += [Envelope(await answerer.publish(CHAT, e), e) for e in AFTER]
        await answerer.end(CHAT)
        await live.wait_until(lambda: live.finished)
        await late.wait_until(lambda: late.finished)
    assert seqs(sent) == list(range(start + 1, start + 9))
    assert live.items == sent  # one stream, not cut at the pause
    kept = [e for e in sent if e.event.type != OUTPUT_TEXT_DELTA]
    # deltas go once nobody reads the paused turn (memory) or at the pause (Redis)
    assert [e for e in late.items if e.event.type != OUTPUT_TEXT_DELTA] == kept
    assert all(e in sent for e in late.items)
    assert await drain(runner, after=start) == kept  # a replay has the part before the pause


async def test_a_pause_keeps_the_start_for_a_replay_with_nobody_reading(bus: EventBus) -> None:
    """`Last-Event-ID: 0` asks for the running turn from its start (`turn_start`)."""
    await bus.begin(CHAT)
    await bus.publish(CHAT, note("an earlier turn"))
    await bus.end(CHAT)
    start = await bus.begin(CHAT)
    for event in BEFORE:
        await bus.publish(CHAT, event)
    await bus.pause(CHAT)
    assert await bus.turn_start(CHAT) == start
    assert not await bus.turn_running(CHAT)
    assert not await _ends_while_paused(bus)
    assert await bus.begin(CHAT) == start  # goes on (`begin` as `acquire`)
    for event in AFTER:
        await bus.publish(CHAT, event)
    await bus.end(CHAT)
    replay = await drain(bus, after=start)
    assert [e.event for e in replay] == [e for e in BEFORE + AFTER if e.type != OUTPUT_TEXT_DELTA]
    assert replay[0].seq == start + 3 and replay[-1].seq == start + 8
    # the next turn starts after it, anew
    assert await bus.acquire(CHAT, ttl=HANG) == start + 8


async def _ends_while_paused(bus: EventBus) -> bool:
    """Whether a caught-up reader of the paused channel ends (it must wait on). Nothing is
    published meanwhile, so the bound only stops the wait: a reader that ends, ends at
    once (its first look at the channel), on any machine."""
    waiting = bus.subscribe(CHAT, after=await bus.last_seq(CHAT))
    ended = False
    with anyio.move_on_after(1.0):
        try:
            await anext(waiting)
        except StopAsyncIteration:
            ended = True
    await waiting.aclose()
    return ended


async def test_a_turn_paused_twice_is_one_turn(bus: EventBus) -> None:
    start = await bus.begin(CHAT)
    for text in ("asks", "asks again", "answers"):
        await bus.publish(CHAT, note(text))
        await bus.pause(CHAT)
        assert await bus.acquire(CHAT, ttl=HANG) == start
    await bus.end(CHAT)
    assert seqs(await drain(bus, after=start)) == [start + 1, start + 2, start + 3]


async def test_a_paused_memory_channel_outlives_an_ended_one_then_goes() -> None:
    """Ended channels go `ttl` after their end, paused ones `PAUSE_KEPT` times that."""
    now = [0.0]
    bus = MemoryBus(ttl=10, clock=lambda: now[0])
    for name in ("ended", "paused"):
        await bus.begin(name)
        await bus.publish(name, note(name))
    await bus.end("ended")
    await bus.pause("paused")
    now[0] = 11
    assert await bus.last_seq("ended") == 0
    assert await bus.last_seq("paused") == 1
    assert await bus.acquire("paused", ttl=5) == 0  # still its turn: from its start
    await bus.pause("paused")
    now[0] = 11 + 10 * PAUSE_KEPT + 1
    assert await bus.last_seq("paused") == 0
    assert bus.channel_count() == 0


async def _first(bus: EventBus, channel: str, count: int) -> list[Envelope]:
    """The first `count` events a reader of a paused channel gets (it would wait on)."""
    with anyio.fail_after(HANG):
        async with aclosing(bus.subscribe(channel, after=0)) as reader:
            return [await anext(reader) for _ in range(count)]


async def test_a_paused_memory_channel_gives_way_to_the_byte_bound_after_ended_ones() -> None:
    bus = MemoryBus(max_bytes=16_000)
    big = "x" * 1000
    for name in ("paused", "ended"):
        await bus.begin(name)
        for _ in range(4):
            await bus.publish(name, Event("chat:message", {"content": big}))
    await bus.pause("paused")
    await bus.end("ended")
    await bus.begin("new")
    for _ in range(4):  # past the bound: the ended channel's events go first
        await bus.publish("new", Event("chat:message", {"content": big}))
    assert [e async for e in bus.subscribe("ended", after=0)] == []
    assert seqs(await _first(bus, "paused", 4)) == [1, 2, 3, 4]
    for _ in range(4):  # then the paused one's: a reader of it ends, it misses nothing
        await bus.publish("new", Event("chat:message", {"content": big}))
    assert bus.retained_bytes() <= 16_000
    assert await bus.last_seq("paused") == 4
    with anyio.fail_after(HANG):
        assert [e async for e in bus.subscribe("paused", after=1)] == []
