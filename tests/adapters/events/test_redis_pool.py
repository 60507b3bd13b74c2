"""The Redis bus gives back the connections a peak of readers opened, once they are gone.

Counted on the Redis server (`CLIENT LIST`, by the bus's client name), so what
is measured is open sockets, not what the pool believes.
"""

from __future__ import annotations

import asyncio
import secrets

import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tests.adapters.events.conftest import REDIS_UNREACHABLE, REDIS_URL, delete_keys
from tests.patience import HANG
from toolrelay.adapters.events.redis import _IDLE_KEPT, RedisBus

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

READERS = 12


async def _open(probe: aioredis.Redis, name: str) -> int:
    return sum(1 for client in await probe.client_list() if client.get("name") == name)


async def _until(probe: aioredis.Redis, name: str, wanted: str, count: int) -> None:
    async with asyncio.timeout(HANG):
        while True:
            open_now = await _open(probe, name)
            if (open_now >= count) if wanted == "at least" else (open_now <= count):
                return
            await asyncio.sleep(0.02)


async def _peak_and_back(
    bus: RedisBus, probe: aioredis.Redis, name: str, channel: str, count: int
) -> None:
    """`count` readers of one turn (above `_IDLE_KEPT`: all blocked at once), then the turn
    ends and they all leave."""
    await bus.begin(channel)

    async def read() -> None:
        async for _ in bus.subscribe(channel):
            pass

    readers = [asyncio.ensure_future(read()) for _ in range(count)]
    if count > _IDLE_KEPT:
        await _until(probe, name, "at least", count)
    await bus.end(channel)
    async with asyncio.timeout(HANG):
        await asyncio.gather(*readers)
    await _until(probe, name, "at most", _IDLE_KEPT)


async def test_idle_connections_are_closed_when_the_last_reader_leaves(redis_prefix: str) -> None:
    name = f"trtest-{secrets.token_hex(4)}"
    client = aioredis.Redis.from_url(REDIS_URL, client_name=name)
    probe = aioredis.Redis.from_url(REDIS_URL)
    try:
        await probe.ping()
    except (OSError, RedisError) as exc:
        await probe.aclose()
        pytest.fail(f"{REDIS_UNREACHABLE} ({exc})", pytrace=False)
    bus = RedisBus(client, prefix=redis_prefix, poll_interval=0.05)
    try:
        await _peak_and_back(bus, probe, name, "a", READERS)
        # the connections closed are back in the pool, below the open ones: a few readers
        # use the open ones, and the next clean-up finds all of them
        await _peak_and_back(bus, probe, name, "b", _IDLE_KEPT - 1)
        await _peak_and_back(bus, probe, name, "c", READERS)
    finally:
        await bus.aclose()
        await probe.aclose()
        await delete_keys(redis_prefix)
