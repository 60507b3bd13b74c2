"""Fixtures running the same bus tests on `MemoryBus`, `IpcBus` and `RedisBus`.

An `IpcBus` reaches a `BusHost` in a thread of the test process (its own event
loop, a real Unix socket); options configure the host's `MemoryBus`, and every
bus a test makes shares that host, like workers do. Redis is expected at 127.0.0.1:6379. Each test gets a random key prefix and its
keys are deleted afterwards. When Redis is not reachable the Redis cases fail,
they never skip.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tests.patience import HANG
from toolrelay.adapters.events import EventBus
from toolrelay.adapters.events.ipc import BusHost, IpcBus
from toolrelay.adapters.events.memory import MemoryBus
from toolrelay.adapters.events.redis import RedisBus

REDIS_URL = "redis://127.0.0.1:6379/0"
REDIS_UNREACHABLE = (
    "Redis not reachable at 127.0.0.1:6379 — start it (the test command does, "
    "or run `redis-server --daemonize yes`)"
)

BusFactory = Callable[..., Awaitable[EventBus]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def connect_redis(prefix: str, **options: Any) -> RedisBus:
    """A RedisBus on the test server, failing the test (never skipping) when it is down."""
    try:
        return await RedisBus.connect(REDIS_URL, prefix=prefix, **options)
    except (OSError, RedisError) as exc:
        pytest.fail(f"{REDIS_UNREACHABLE} ({type(exc).__name__}: {exc})", pytrace=False)


async def delete_keys(prefix: str) -> None:
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture
def redis_prefix() -> str:
    return f"toolrelay-test:{secrets.token_hex(6)}:"


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A short directory for Unix sockets (their paths are limited to about 100 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="trbus-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["memory", "ipc", pytest.param("redis", marks=pytest.mark.redis)])
async def make_bus(
    request: pytest.FixtureRequest, redis_prefix: str, socket_dir: Path
) -> AsyncIterator[BusFactory]:
    """Makes buses of one backend; Redis ones share the test's prefix and IPC ones the
    test's host, like workers do."""
    backend: str = request.param
    buses: list[EventBus] = []
    hosts: list[BusHost] = []

    async def make(**options: Any) -> EventBus:
        bus: EventBus
        if backend == "memory":
            bus = MemoryBus(**options)
        elif backend == "ipc":
            if not hosts:
                hosts.append(BusHost(socket_dir / "bus.sock", bus=MemoryBus(**options)).start())
            elif options:
                raise ValueError("IPC buses of one test share its host: configure the first")
            bus = IpcBus(hosts[0].path, connect_timeout=HANG)
        else:
            bus = await connect_redis(redis_prefix, **options)
        buses.append(bus)
        return bus

    yield make
    for bus in buses:
        await bus.aclose()
    for host in hosts:
        host.close()
    if backend == "redis" and buses:
        await delete_keys(redis_prefix)


@pytest.fixture
async def bus(make_bus: BusFactory) -> EventBus:
    return await make_bus()
