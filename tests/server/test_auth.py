"""The key cache: one store query for a burst of requests, answers expire, revocation clears."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolrelay.adapters.stores import User
from toolrelay.server.auth import KeyCache

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class CountingStore:
    def __init__(self, user: User | None, *, fail: bool = False) -> None:
        self.user = user
        self.fail = fail
        self.queries = 0

    async def user_for_key(self, key: str) -> User | None:
        self.queries += 1
        await asyncio.sleep(0.01)
        if self.fail:
            raise RuntimeError("database down")
        return self.user


def a_user() -> User:
    from datetime import UTC, datetime

    return User(id="u1", name="ann", is_admin=False, created_at=datetime.now(UTC))


async def test_a_burst_shares_one_query_and_then_hits_the_cache() -> None:
    store = CountingStore(a_user())
    cache = KeyCache(store, ttl=60)  # type: ignore[arg-type]
    users = await asyncio.gather(*(cache.user("tr-key") for _ in range(50)))
    assert {u.id for u in users if u} == {"u1"} and store.queries == 1
    assert await cache.user("tr-key") is users[0] and store.queries == 1
    cache.clear()
    await cache.user("tr-key")
    assert store.queries == 2


async def test_expired_answers_are_asked_again_and_failures_reach_every_waiter() -> None:
    store = CountingStore(None)
    cache = KeyCache(store, ttl=0)  # type: ignore[arg-type]
    assert await cache.user("k") is None
    assert await cache.user("k") is None
    assert store.queries == 2
    broken = KeyCache(CountingStore(None, fail=True))  # type: ignore[arg-type]
    results: list[Any] = await asyncio.gather(
        *(broken.user("k") for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) for r in results)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_an_ageing_answer_serves_while_one_query_refreshes_it() -> None:
    store = CountingStore(a_user())
    clock = Clock()
    cache = KeyCache(store, ttl=10, clock=clock)  # type: ignore[arg-type]
    first = await cache.user("k")
    clock.now = 6  # past half the ttl: answered at once, refreshed once in the background
    assert await asyncio.gather(*(cache.user("k") for _ in range(20))) == [first] * 20
    await asyncio.gather(*cache._refreshing.values())
    assert store.queries == 2
    clock.now = 10  # refreshed at 6: young again, no query
    assert await cache.user("k") == first and store.queries == 2
    store.user = None  # revoked on another worker
    clock.now = 16.5  # never older than the ttl: the revocation shows
    assert await cache.user("k") is None and store.queries == 3


class SlowStore:
    """Answers with the user as it was when the query started, once let go."""

    def __init__(self, user: User | None) -> None:
        self.user = user
        self.go = asyncio.Event()
        self.queries = 0

    async def user_for_key(self, key: str) -> User | None:
        self.queries += 1
        user = self.user
        await self.go.wait()
        return user


async def test_a_query_in_flight_when_the_cache_is_cleared_is_not_kept() -> None:
    store = SlowStore(a_user())
    cache = KeyCache(store, ttl=60)  # type: ignore[arg-type]
    asking = asyncio.ensure_future(cache.user("k"))
    await asyncio.sleep(0)  # the query has read the key
    store.user = None
    cache.clear()  # revoked on this server while the query was in flight
    store.go.set()
    assert await asking is not None  # that request raced the revocation
    assert await cache.user("k") is None and store.queries == 2
