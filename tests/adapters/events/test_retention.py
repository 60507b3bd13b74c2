"""What buses keep: a finished turn's deltas go, all channels together stay under a byte
bound, a deleted chat's events go; memory stays flat over 10,000 chats."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis.asyncio as aioredis

from tests.patience import HANG
from toolrelay.adapters.events import EventBus, clock_seq_base
from toolrelay.adapters.events.memory import MemoryBus
from toolrelay.adapters.events.redis import CHANNEL_COST, RedisBus
from toolrelay.core.events import OUTPUT_ITEM_DONE, OUTPUT_TEXT_DELTA, Event

from .conftest import REDIS_URL, BusFactory, connect_redis, delete_keys
from .test_bus import CHAT, drain

pytestmark = pytest.mark.anyio


def _turn_events(text: str, pieces: int = 20) -> list[Event]:
    deltas = [
        Event(OUTPUT_TEXT_DELTA, {"item_id": "m", "output_index": 0, "delta": text})
        for _ in range(pieces)
    ]
    item = {"type": "message", "id": "m", "content": [{"type": "output_text", "text": "x"}]}
    return [*deltas, Event(OUTPUT_ITEM_DONE, {"output_index": 0, "item": item})]


async def _turn(bus: EventBus, channel: str, text: str = "word ", pieces: int = 20) -> int:
    start = await bus.begin(channel)
    for event in _turn_events(text, pieces):
        await bus.publish(channel, event)
    await bus.end(channel)
    return start


async def test_a_finished_turns_deltas_are_dropped_not_its_items(bus: EventBus) -> None:
    start = await _turn(bus, CHAT)
    kept = await drain(bus, after=start)  # a replay of the turn: its items, whole
    assert [e.event.type for e in kept] == [OUTPUT_ITEM_DONE]
    assert kept[0].seq == start + 21
    assert await bus.last_seq(CHAT) == start + 21


@pytest.mark.parametrize("make_bus", ["memory", "ipc"], indirect=True)
async def test_a_reader_inside_the_turn_still_gets_every_delta(make_bus: BusFactory) -> None:
    bus = await make_bus()
    start = await bus.begin(CHAT)
    reading = bus.subscribe(CHAT, after=start)
    for event in _turn_events("w"):
        await bus.publish(CHAT, event)
    with anyio.fail_after(HANG):
        first = await anext(reading)
        await bus.end(CHAT)  # while the reader is behind
        rest = [e async for e in reading]
    assert [first.seq, *(e.seq for e in rest)] == list(range(start + 1, start + 22))
    kept = await drain(bus, after=start)  # the reader left: the deltas went
    assert [e.event.type for e in kept] == [OUTPUT_ITEM_DONE]


async def test_all_channels_together_stay_under_the_byte_bound() -> None:
    bus = MemoryBus(max_bytes=20_000, seq_base=clock_seq_base)
    big = "x" * 1000
    for i in range(100):
        await bus.begin(f"chat_{i}")
        for _ in range(5):
            await bus.publish(f"chat_{i}", Event("chat:message", {"content": big}))
        await bus.end(f"chat_{i}")
        assert bus.retained_bytes() <= 20_000
    newest = [e async for e in bus.subscribe("chat_99", after=0)]
    assert len(newest) == 5  # the newest channel kept its events
    assert await bus.last_seq("chat_0") == 0  # an old one is forgotten whole ...
    assert await bus.publish("chat_0", Event("chat:message", {})) > newest[-1].seq  # ... and
    # a new life of it numbers above the old (seq_base)


async def test_without_a_seq_base_old_channels_keep_their_numbering() -> None:
    bus = MemoryBus(max_bytes=20_000)
    for i in range(30):
        await bus.begin(f"chat_{i}")
        for _ in range(5):
            await bus.publish(f"chat_{i}", Event("chat:message", {"content": "z" * 1000}))
        await bus.end(f"chat_{i}")
    assert [e async for e in bus.subscribe("chat_0", after=0)] == []  # its events went
    assert await bus.last_seq("chat_0") == 5  # its numbering did not


async def test_a_running_turn_alone_over_the_bound_keeps_its_newest() -> None:
    bus = MemoryBus(max_bytes=5_000)
    await bus.begin(CHAT)
    for i in range(20):
        await bus.publish(CHAT, Event("chat:message", {"content": f"{i}" + "y" * 1000}))
    assert bus.retained_bytes() <= 5_000
    assert await bus.last_seq(CHAT) == 20


async def test_deleting_a_chat_forgets_its_events(bus: EventBus) -> None:
    await _turn(bus, CHAT)
    await bus.begin(CHAT)
    await bus.publish(CHAT, Event("chat:message", {"content": "kept until forgotten"}))
    await bus.end(CHAT)
    assert await bus.last_seq(CHAT) > 0
    await bus.forget(CHAT)
    assert await bus.last_seq(CHAT) == 0
    assert await bus.turn_start(CHAT) == 0
    assert not await bus.turn_running(CHAT)
    await bus.forget("chat_never_seen")  # nothing to do, no error


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_memory_stays_flat_over_10000_chats() -> None:
    """The server's bus (seqs from the clock, the default bound): every chat has one
    turn of 200 deltas and its item. Before the deltas were dropped and the bytes
    bounded, each chat kept ~40 KB here for an hour."""
    bus = MemoryBus(seq_base=clock_seq_base, max_bytes=4 * 1024 * 1024)
    events: list[Any] = _turn_events("token ", 200)

    async def chats(first: int, count: int) -> None:
        for i in range(first, first + count):
            name = f"chat:{i}"
            await bus.begin(name)
            for event in events:
                await bus.publish(name, event)
            await bus.end(name)

    await chats(0, 2000)
    gc.collect()
    before = _rss_kib()
    await chats(2000, 8000)
    gc.collect()
    grown_mib = (_rss_kib() - before) / 1024
    assert bus.retained_bytes() <= 4 * 1024 * 1024
    assert grown_mib < 24, f"RSS grew {grown_mib:.1f} MiB over 8,000 more chats"


async def _read(bus: EventBus, channel: str, after: int = 0, until_end: bool = True) -> list[Any]:
    """Everything a subscription yields before it ends; fails if it does not end."""
    with anyio.fail_after(HANG):
        return [e async for e in bus.subscribe(channel, after=after, until_end=until_end)]


async def _redis_log_bytes(bus: RedisBus, prefix: str) -> int:
    """What the logs under `prefix` hold, counted as the bus counts them (each event its
    payload and 64 bytes, end markers nothing, each channel `CHANNEL_COST`), read from
    Redis itself."""
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        total: int = CHANNEL_COST * int(await client.zcard(f"{prefix}lru"))
        async for key in client.scan_iter(match=f"{prefix}log:*"):
            for _, fields in await client.xrange(key):
                payload = fields.get(b"e") or fields.get(b"d")
                total += len(payload) + 64 if payload is not None else 0
        return total
    finally:
        await client.aclose()


@pytest.mark.redis
async def test_redis_channels_together_stay_under_the_byte_bound(redis_prefix: str) -> None:
    """Every worker sharing the prefix shares one budget, counted in Redis: past it, the
    least recently written ended channels give up their events, and a reader of one
    ends instead of being handed a log with a hole."""
    bus = await connect_redis(redis_prefix, max_bytes=20_000, seq_base=clock_seq_base)
    try:
        big = "x" * 1000
        for i in range(40):
            await bus.begin(f"chat_{i}")
            for _ in range(5):
                await bus.publish(f"chat_{i}", Event("chat:message", {"content": big}))
            await bus.end(f"chat_{i}")
            counted = await bus.retained_bytes()
            assert counted <= 20_000
            assert counted == await _redis_log_bytes(bus, redis_prefix)  # exact, no drift
        newest = await _read(bus, "chat_39")
        assert len(newest) == 5  # the newest channel kept its events
        assert await bus.last_seq("chat_0") == 0  # an old one is forgotten whole ...
        renewed = await bus.publish("chat_0", Event("chat:message", {}))
        assert renewed > newest[-1].seq  # ... and a new life of it numbers above the old
        for i in range(40):
            await bus.forget(f"chat_{i}")
        assert await bus.retained_bytes() == 0
    finally:
        await bus.aclose()
        await delete_keys(redis_prefix)


@pytest.mark.redis
async def test_redis_a_running_turn_alone_over_the_bound_keeps_its_newest(
    redis_prefix: str,
) -> None:
    bus = await connect_redis(redis_prefix, max_bytes=5_000)
    try:
        await bus.begin(CHAT)
        for i in range(20):
            await bus.publish(CHAT, Event("chat:message", {"content": f"{i}" + "y" * 1000}))
        assert await bus.retained_bytes() <= 5_000
        assert await bus.retained_bytes() == await _redis_log_bytes(bus, redis_prefix)
        assert await bus.last_seq(CHAT) == 20
        # a reader from the start lost events: it ends (its client is sent the saved chat)
        assert await _read(bus, CHAT, until_end=False) == []
    finally:
        await bus.aclose()
        await delete_keys(redis_prefix)


@pytest.mark.redis
async def test_redis_logs_gone_by_their_ttl_leave_the_count(redis_prefix: str) -> None:
    """An ended channel's keys expire (`ttl`) without a script seeing it: the next
    publish finds the oldest channels' logs gone and takes them off the count."""
    bus = await connect_redis(redis_prefix)
    try:
        for i in range(3):
            await _turn(bus, f"chat_{i}")
        client = aioredis.Redis.from_url(REDIS_URL)
        try:
            await client.delete(*(f"{redis_prefix}log:chat_{i}" for i in range(2)))  # "expired"
        finally:
            await client.aclose()
        await bus.publish("chat_other", Event("chat:message", {"content": "z"}))
        assert await bus.retained_bytes() == await _redis_log_bytes(bus, redis_prefix)
    finally:
        await bus.aclose()
        await delete_keys(redis_prefix)


@pytest.mark.redis
@pytest.mark.load
async def test_redis_memory_stays_flat_over_10000_chats(redis_prefix: str) -> None:
    """What Redis holds under the prefix (MEMORY USAGE of every key) after 2,000 chats
    and after 10,000: bounded by the budget, not by the chats."""
    budget = 1024 * 1024
    bus = await connect_redis(redis_prefix, max_bytes=budget, seq_base=clock_seq_base)
    events: list[Any] = _turn_events("token ", 20)
    client = aioredis.Redis.from_url(REDIS_URL)

    async def chats(first: int, count: int) -> None:
        async def one(i: int) -> None:
            name = f"chat:{i}"
            await bus.begin(name)
            for event in events:
                await bus.publish(name, event)
            await bus.end(name)

        for start in range(first, first + count, 50):
            await asyncio.gather(*(one(i) for i in range(start, min(first + count, start + 50))))

    async def held() -> int:
        keys = [key async for key in client.scan_iter(match=f"{redis_prefix}*", count=1000)]
        usage = await asyncio.gather(*(client.memory_usage(key) for key in keys))
        return sum(u or 0 for u in usage)

    try:
        await chats(0, 2000)
        before = await held()
        await chats(2000, 8000)
        after = await held()
        assert await bus.retained_bytes() <= budget
        grown_mib = (after - before) / 2**20
        assert grown_mib < 2, f"Redis grew {grown_mib:.1f} MiB over 8,000 more chats"
    finally:
        await client.aclose()
        await bus.aclose()
        await delete_keys(redis_prefix)
