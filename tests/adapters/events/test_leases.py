"""Turn locks are leases: taken atomically, renewed by a heartbeat, lost when the owner dies."""

from __future__ import annotations

import asyncio

import anyio
import pytest
import redis.asyncio as aioredis

from tests.patience import HANG
from toolrelay.adapters.events import EventBus, clock_seq_base
from toolrelay.adapters.events.memory import MemoryBus
from toolrelay.adapters.events.redis import RedisBus

from .conftest import REDIS_URL, BusFactory, connect_redis, delete_keys
from .test_bus import CHAT, Collector, drain, note

pytestmark = pytest.mark.anyio


class StepClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_only_one_of_many_concurrent_acquires_wins(bus: EventBus) -> None:
    results = await asyncio.gather(*(bus.acquire(CHAT, ttl=60) for _ in range(8)))
    assert sum(r is not None for r in results) == 1
    assert await bus.turn_running(CHAT) is True
    await bus.end(CHAT)
    assert await bus.acquire(CHAT, ttl=60) is not None


async def test_acquire_returns_the_turn_boundary(bus: EventBus) -> None:
    assert await bus.acquire(CHAT, ttl=60) == 0
    await bus.publish(CHAT, note("a"))
    await bus.end(CHAT)
    assert await bus.acquire(CHAT, ttl=60) == 1
    assert await bus.turn_start(CHAT) == 1


async def test_an_expired_memory_lease_frees_the_chat_and_renew_keeps_it() -> None:
    clock = StepClock()
    bus = MemoryBus(clock=clock)
    assert await bus.acquire(CHAT, ttl=10) is not None
    clock.now += 9
    assert await bus.renew(CHAT, ttl=10) is True
    clock.now += 9
    assert await bus.turn_running(CHAT) is True  # renewed: 18 s after the start, still held
    assert await bus.acquire(CHAT, ttl=10) is None
    clock.now += 2
    assert await bus.turn_running(CHAT) is False
    assert await bus.renew(CHAT, ttl=10) is False  # the owner learns that it lost the lease
    assert await bus.acquire(CHAT, ttl=10) is not None


@pytest.mark.redis
async def test_the_redis_turn_key_is_a_lease_with_a_ttl(redis_prefix: str) -> None:
    bus = await connect_redis(redis_prefix)
    client = aioredis.Redis.from_url(REDIS_URL)
    key = f"{redis_prefix}turn:{CHAT}"
    try:
        assert await bus.acquire(CHAT, ttl=60) is not None
        assert 0 < await client.pttl(key) <= 60_000
        await client.pexpire(key, 5_000)
        assert await bus.renew(CHAT, ttl=60) is True
        assert await client.pttl(key) > 5_000
        # the owner dies: nobody renews, the key expires and the chat is free again
        assert await bus.acquire(CHAT, ttl=60) is None
        await client.pexpire(key, 1)
        for _ in range(500):  # redis expires keys on its own clock: poll for it
            if not await bus.turn_running(CHAT):
                break
            await anyio.sleep(0.01)
        assert await bus.renew(CHAT, ttl=60) is False
        assert await bus.acquire(CHAT, ttl=60) is not None
    finally:
        await client.aclose()
        await bus.aclose()
        await delete_keys(redis_prefix)


async def test_send_control_says_how_many_listeners_got_it(bus: EventBus) -> None:
    assert await bus.send_control(CHAT, {"op": "cancel"}) == 0
    collector = Collector()
    async with anyio.create_task_group() as tg:
        tg.start_soon(collector.run, bus.control(CHAT))
        with anyio.fail_after(HANG):
            while not collector.items:
                delivered = await bus.send_control(CHAT, {"probe": True})
                await anyio.sleep(0.01)
        assert delivered == 1
        tg.cancel_scope.cancel()


async def test_a_seq_base_keeps_numbering_above_any_earlier_life(make_bus: BusFactory) -> None:
    bus = await make_bus(seq_base=lambda: 5000)
    assert await bus.acquire(CHAT, ttl=60) == 5000
    assert await bus.publish(CHAT, note("a")) == 5001
    await bus.end(CHAT)
    assert [e.seq for e in await drain(bus, after=4000)] == [5001]


async def test_a_restart_within_the_same_second_numbers_above_the_earlier_life() -> None:
    """A server killed just after a turn began and back (its start-up repair publishing the
    turn's error and end) within one wall-clock second: a client resuming with an id from
    the first life must get both events, not a numbering that starts where it stood."""
    first = MemoryBus(seq_base=lambda: clock_seq_base(lambda: 1_700_000_000.1))
    await first.acquire(CHAT, ttl=60)
    seen = [await first.publish(CHAT, note(w)) for w in ("a", "b")]
    second = MemoryBus(seq_base=lambda: clock_seq_base(lambda: 1_700_000_000.6))
    await second.acquire(CHAT, ttl=60)
    repaired = [await second.publish(CHAT, note(w)) for w in ("error", "end")]
    await second.end(CHAT)
    assert [e.seq for e in await drain(second, after=seen[-1])] == repaired


def test_the_clock_seq_base_grows_with_time_and_stays_json_safe() -> None:
    earlier = clock_seq_base(lambda: 1_700_000_000.0)
    later = clock_seq_base(lambda: 1_700_000_001.0)
    assert later - earlier >= 1 << 20  # a second of life may use a million seqs
    assert clock_seq_base(lambda: 1_700_000_000.5) - earlier >= 1 << 19  # and half of one half
    assert clock_seq_base() < 2**53


async def test_memory_bus_frees_a_channel_nobody_uses() -> None:
    bus = MemoryBus()
    for i in range(50):
        stream = bus.subscribe(f"chat_{i}", until_end=False)
        with anyio.move_on_after(0.01):
            await stream.__anext__()
        await stream.aclose()
    assert bus.channel_count() == 0


async def test_memory_bus_survives_an_after_beyond_any_index() -> None:
    bus = MemoryBus()
    await bus.begin(CHAT)
    await bus.publish(CHAT, note("a"))
    await bus.end(CHAT)
    assert await drain(bus, after=2**64) == []


@pytest.mark.redis
async def test_redis_acquire_seeds_the_counter_from_the_base(redis_prefix: str) -> None:
    bus = await RedisBus.connect(REDIS_URL, prefix=redis_prefix, seq_base=lambda: 7000)
    try:
        assert await bus.acquire(CHAT, ttl=60) == 7000
        assert await bus.publish(CHAT, note("a")) == 7001
        await bus.end(CHAT)
        assert await bus.acquire(CHAT, ttl=60) == 7001  # an existing counter is kept
    finally:
        await bus.aclose()
        await delete_keys(redis_prefix)


async def test_clock_derived_seqs_survive_the_log_and_its_end_marker(
    make_bus: BusFactory,
) -> None:
    base = clock_seq_base()
    bus = await make_bus(seq_base=lambda: base)
    assert await bus.acquire(CHAT, ttl=60) == base
    await bus.publish(CHAT, note("a"))
    await bus.publish(CHAT, note("b"))
    await bus.end(CHAT)
    assert [e.seq for e in await drain(bus)] == [base + 1, base + 2]
    assert [e.seq for e in await drain(bus, after=base + 1)] == [base + 2]
