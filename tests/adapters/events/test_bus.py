"""The event bus contract, run against MemoryBus, IpcBus and RedisBus alike."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from tests.patience import HANG
from toolrelay.adapters.events import Envelope, EventBus, make_bus
from toolrelay.adapters.events.ipc import IpcBus
from toolrelay.adapters.events.memory import MemoryBus
from toolrelay.adapters.events.redis import RedisBus
from toolrelay.core.events import Event
from toolrelay.errors import ConfigError

from .conftest import BusFactory, connect_redis, delete_keys

pytestmark = pytest.mark.anyio

CHAT = "chat_1"
CHAT_MESSAGE = "chat:message"


def note(text: str) -> Event:
    """An event a log keeps after its turn ends (a finished turn's deltas are dropped:
    test_retention.py)."""
    return Event(CHAT_MESSAGE, {"item_id": "msg_1", "output_index": 0, "content": text})


class Collector:
    """Gathers what an iterator yields so a test can wait for a count without polling."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.finished = False
        self._changed = anyio.Event()

    async def run(self, iterator: AsyncGenerator[Any, None]) -> None:
        async with aclosing(iterator) as items:
            async for item in items:
                self.items.append(item)
                self._notify()
        self.finished = True
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_until(self, done: Callable[[], bool]) -> None:
        with anyio.fail_after(HANG):
            while not done():
                await self._changed.wait()


def seqs(envelopes: list[Envelope]) -> list[int]:
    return [envelope.seq for envelope in envelopes]


async def drain(bus: EventBus, after: int = 0) -> list[Envelope]:
    """Everything a finishing subscription yields; fails if it does not finish."""
    with anyio.fail_after(HANG):
        return [envelope async for envelope in bus.subscribe(CHAT, after=after)]


async def test_seqs_are_unique_and_ordered_under_concurrent_publishers(bus: EventBus) -> None:
    await bus.begin(CHAT)
    returned: dict[int, list[int]] = {}

    async def publisher(worker: int) -> None:
        returned[worker] = [await bus.publish(CHAT, note(f"{worker}:{i}")) for i in range(40)]

    async with anyio.create_task_group() as tg:
        for worker in range(5):
            tg.start_soon(publisher, worker)
    await bus.end(CHAT)

    all_seqs = sorted(seq for worker_seqs in returned.values() for seq in worker_seqs)
    assert all_seqs == list(range(1, 201))
    for worker_seqs in returned.values():
        assert worker_seqs == sorted(worker_seqs)
    assert await bus.last_seq(CHAT) == 200
    log = await drain(bus)
    assert seqs(log) == list(range(1, 201))
    for worker, worker_seqs in returned.items():
        texts = [e.event.data["content"] for e in log if e.seq in set(worker_seqs)]
        assert texts == [f"{worker}:{i}" for i in range(40)]


async def test_subscribe_after_replays_the_rest_then_follows_live(bus: EventBus) -> None:
    await bus.begin(CHAT)
    for text in "abcde":
        await bus.publish(CHAT, note(text))
    collector = Collector()
    async with anyio.create_task_group() as tg:
        tg.start_soon(collector.run, bus.subscribe(CHAT, after=3))
        await collector.wait_until(lambda: len(collector.items) == 2)
        assert await bus.publish(CHAT, note("f")) == 6
        await collector.wait_until(lambda: len(collector.items) == 3)
        assert await bus.publish(CHAT, note("g")) == 7
        await bus.end(CHAT)
        await collector.wait_until(lambda: collector.finished)
    assert collector.items == [
        Envelope(seq, note(text)) for seq, text in zip(range(4, 8), "defg", strict=True)
    ]


async def test_resubscribing_with_the_last_seen_seq_has_no_gap_and_no_duplicate(
    bus: EventBus,
) -> None:
    await bus.begin(CHAT)
    published: list[Envelope] = []

    async def publisher(rng: random.Random) -> None:
        for i in range(150):
            event = note(f"t{i}")
            published.append(Envelope(await bus.publish(CHAT, event), event))
            await anyio.sleep(rng.random() * 0.002)
        await bus.end(CHAT)

    async def flaky_client(rng: random.Random, seen: list[Envelope]) -> None:
        """Reads a few events, drops the connection, waits, resumes from the last seq."""
        while True:
            budget = rng.randint(1, 20)
            async with aclosing(bus.subscribe(CHAT, after=seen[-1].seq if seen else 0)) as sub:
                async for envelope in sub:
                    seen.append(envelope)
                    budget -= 1
                    if budget == 0:
                        break
                else:
                    return
            await anyio.sleep(rng.random() * 0.005)

    clients: list[list[Envelope]] = [[] for _ in range(3)]
    with anyio.fail_after(HANG):
        async with anyio.create_task_group() as tg:
            for n, seen in enumerate(clients):
                tg.start_soon(flaky_client, random.Random(n), seen)
            tg.start_soon(publisher, random.Random(99))
    assert seqs(published) == list(range(1, 151))
    for seen in clients:
        assert seen == published


async def test_subscribing_after_the_turn_ended_replays_and_finishes(bus: EventBus) -> None:
    await bus.begin(CHAT)
    for text in "abc":
        await bus.publish(CHAT, note(text))
    await bus.end(CHAT)

    assert await drain(bus) == [
        Envelope(1, note("a")),
        Envelope(2, note("b")),
        Envelope(3, note("c")),
    ]
    assert seqs(await drain(bus, after=1)) == [2, 3]
    assert await drain(bus, after=3) == []
    # an event after the end (a title, say) is replayed too, and the subscriber still finishes
    title = Event("chat:title", {"title": "Hello"})
    assert await bus.publish(CHAT, title) == 4
    assert await drain(bus, after=3) == [Envelope(4, title)]


async def test_live_subscriber_stops_after_the_last_event_of_the_turn(bus: EventBus) -> None:
    await bus.begin(CHAT)
    collector = Collector()
    async with anyio.create_task_group() as tg:
        tg.start_soon(collector.run, bus.subscribe(CHAT))
        await bus.publish(CHAT, note("a"))
        await collector.wait_until(lambda: len(collector.items) == 1)
        assert not collector.finished
        await bus.publish(CHAT, note("b"))
        await bus.end(CHAT)
        await collector.wait_until(lambda: collector.finished)
    assert collector.items == [Envelope(1, note("a")), Envelope(2, note("b"))]


async def test_until_end_false_keeps_listening_across_turns(bus: EventBus) -> None:
    await bus.begin(CHAT)
    await bus.publish(CHAT, note("turn1"))
    await bus.end(CHAT)
    collector = Collector()
    async with anyio.create_task_group() as tg:
        tg.start_soon(collector.run, bus.subscribe(CHAT, until_end=False))
        await collector.wait_until(lambda: len(collector.items) == 1)
        for text in ("turn2", "turn3"):
            await bus.begin(CHAT)
            await bus.publish(CHAT, note(text))
            await bus.end(CHAT)
        await collector.wait_until(lambda: len(collector.items) == 3)
        await anyio.sleep(0.05)
        assert not collector.finished
        tg.cancel_scope.cancel()
    assert collector.items == [
        Envelope(1, note("turn1")),
        Envelope(2, note("turn2")),
        Envelope(3, note("turn3")),
    ]


async def test_begin_returns_the_boundary_of_the_current_turn(bus: EventBus) -> None:
    assert await bus.turn_running(CHAT) is False
    assert await bus.last_seq(CHAT) == 0
    assert await bus.begin(CHAT) == 0
    assert await bus.turn_running(CHAT) is True
    await bus.publish(CHAT, note("a"))
    await bus.publish(CHAT, note("b"))
    await bus.end(CHAT)
    assert await bus.turn_running(CHAT) is False

    boundary = await bus.begin(CHAT)
    assert boundary == 2
    assert await bus.turn_running(CHAT) is True
    await bus.publish(CHAT, note("c"))
    await bus.end(CHAT)
    assert await drain(bus, after=boundary) == [Envelope(3, note("c"))]
    assert await bus.last_seq(CHAT) == 3
    assert await bus.last_seq("other_chat") == 0


async def test_a_subscriber_of_a_new_turn_right_after_the_previous_end_waits_for_it(
    bus: EventBus,
) -> None:
    await bus.begin(CHAT)
    await bus.publish(CHAT, note("old"))
    await bus.end(CHAT)
    boundary = await bus.begin(CHAT)
    collector = Collector()
    async with anyio.create_task_group() as tg:
        tg.start_soon(collector.run, bus.subscribe(CHAT, after=boundary))
        await anyio.sleep(0.05)
        assert not collector.finished
        await bus.publish(CHAT, note("new"))
        await bus.end(CHAT)
        await collector.wait_until(lambda: collector.finished)
    assert collector.items == [Envelope(2, note("new"))]


async def _send_until_listening(bus: EventBus, collector: Collector, channel: str) -> None:
    """Control is live only: probe until the listener is subscribed."""
    with anyio.fail_after(HANG):
        while not collector.items:
            await bus.send_control(channel, {"probe": True})
            with anyio.move_on_after(0.02):
                await collector.wait_until(lambda: bool(collector.items))


async def _control_round_trip(sender: EventBus, listener: EventBus) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"type": "cancel"},
        {"type": "tool_result", "id": "call_1", "output": {"answer": 42}},
        {"type": "approval", "id": "call_2", "approved": False},
    ]
    collector = Collector()
    other = Collector()
    async with anyio.create_task_group() as tg:
        tg.start_soon(collector.run, listener.control(CHAT))
        tg.start_soon(other.run, listener.control("other_chat"))
        await _send_until_listening(sender, collector, CHAT)
        await _send_until_listening(sender, other, "other_chat")
        for message in messages:
            await sender.send_control(CHAT, message)
        await collector.wait_until(lambda: collector.items[-1:] == [messages[-1]])
        tg.cancel_scope.cancel()
    received = [m for m in collector.items if m != {"probe": True}]
    assert received == messages
    assert all(m == {"probe": True} for m in other.items)
    return received


async def test_control_messages_reach_a_listener(bus: EventBus) -> None:
    await _control_round_trip(bus, bus)


async def test_closing_the_control_iterator_ends_it(bus: EventBus) -> None:
    collector = Collector()
    got_one = Collector()

    async def listen_for_one() -> None:
        async with aclosing(bus.control(CHAT)) as listener:
            async for message in listener:
                collector.items.append(message)
                break
        got_one.finished = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(listen_for_one)
        await _send_until_listening(bus, collector, CHAT)
    assert got_one.finished
    assert collector.items == [{"probe": True}]
    await bus.send_control(CHAT, {"type": "cancel"})  # nobody listens any more: dropped


async def test_retention_cap_drops_the_oldest_events(make_bus: BusFactory) -> None:
    bus = await make_bus(max_events=10)
    await bus.begin(CHAT)
    for i in range(300):
        await bus.publish(CHAT, note(str(i)))
    await bus.end(CHAT)
    log = await drain(bus)
    assert seqs(log) == list(range(log[0].seq, 301))
    assert log[-1] == Envelope(300, note("299"))
    assert log[0].seq > 1
    assert len(log) >= 10
    if isinstance(bus, MemoryBus | IpcBus):
        assert len(log) == 10  # Redis trims with MAXLEN ~, whole stream nodes at a time


async def test_channels_are_forgotten_ttl_seconds_after_their_turn_ended(
    make_bus: BusFactory,
) -> None:
    # Redis keeps its own clock: the ttl is long enough that no stall of a loaded
    # machine between `end` and the next read lets it pass by accident
    bus = await make_bus(ttl=2.0)
    await bus.begin(CHAT)
    await bus.publish(CHAT, note("a"))
    await anyio.sleep(2.2)
    assert await bus.last_seq(CHAT) == 1  # a running turn never expires
    await bus.end(CHAT)
    assert await bus.last_seq(CHAT) == 1
    await anyio.sleep(2.2)
    assert await bus.last_seq(CHAT) == 0
    assert await bus.turn_running(CHAT) is False
    assert await bus.begin(CHAT) == 0
    assert await bus.publish(CHAT, note("b")) == 1


async def test_aclose_ends_live_readers_and_leaves_no_tasks(bus: EventBus) -> None:
    before = asyncio.all_tasks()
    await bus.begin(CHAT)
    await bus.publish(CHAT, note("a"))
    subscriber = Collector()
    listener = Collector()
    with anyio.fail_after(HANG):
        async with anyio.create_task_group() as tg:
            tg.start_soon(subscriber.run, bus.subscribe(CHAT))
            tg.start_soon(listener.run, bus.control(CHAT))
            await subscriber.wait_until(lambda: len(subscriber.items) == 1)
            await _send_until_listening(bus, listener, CHAT)
            await bus.aclose()
            await subscriber.wait_until(lambda: subscriber.finished)
            await listener.wait_until(lambda: listener.finished)
    assert asyncio.all_tasks() <= before


async def test_two_redis_workers_see_each_others_events_and_control(redis_prefix: str) -> None:
    first = await connect_redis(redis_prefix)
    second = await connect_redis(redis_prefix)
    try:
        assert await first.begin(CHAT) == 0
        assert await second.turn_running(CHAT) is True
        collector = Collector()
        async with anyio.create_task_group() as tg:
            tg.start_soon(collector.run, second.subscribe(CHAT))
            await first.publish(CHAT, note("a"))
            await second.publish(CHAT, note("b"))
            await first.end(CHAT)
            await collector.wait_until(lambda: collector.finished)
        assert collector.items == [Envelope(1, note("a")), Envelope(2, note("b"))]
        await _control_round_trip(first, second)
        await _control_round_trip(second, first)
    finally:
        await first.aclose()
        await second.aclose()
        await delete_keys(redis_prefix)


async def test_make_bus_picks_the_backend_from_the_url() -> None:
    assert isinstance(make_bus(None), MemoryBus)
    assert isinstance(make_bus("memory"), MemoryBus)
    redis_bus = make_bus("redis://127.0.0.1:6379/0")
    assert isinstance(redis_bus, RedisBus)
    await redis_bus.aclose()
    ipc_bus = make_bus("ipc:///run/toolrelay/bus.sock")
    assert isinstance(ipc_bus, IpcBus)
    assert ipc_bus.path == "/run/toolrelay/bus.sock"
    with pytest.raises(ConfigError, match="absolute path"):
        make_bus("ipc://bus.sock")
    with pytest.raises(ConfigError, match="events url.*ipc://"):
        make_bus("kafka://somewhere")
