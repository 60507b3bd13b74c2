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
