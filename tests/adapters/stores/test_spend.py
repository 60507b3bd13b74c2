"""Daily spend adds up per (scope, subject, day), on SQLite, PostgreSQL and in memory."""

from __future__ import annotations

import asyncio

import pytest

from toolrelay.adapters.stores import Spend, Store

pytestmark = pytest.mark.anyio


async def test_spend_adds_up_per_subject_and_day(store: Store) -> None:
    turn = Spend(input_tokens=8, output_tokens=5, cost=0.25, turns=1)
    both = [("user", "u1"), ("key", "k1")]
    await asyncio.gather(*(store.add_spend(both, "2026-01-01", turn) for _ in range(5)))
    await store.add_spend([("user", "u1")], "2026-01-02", turn)
    day = await store.spend_of("user", "u1", "2026-01-01")
    assert day == Spend(40, 25, 1.25, 5) and day.total_tokens == 65
    assert await store.spend_of("key", "k1", "2026-01-01") == Spend(40, 25, 1.25, 5)
    assert await store.spend_of("user", "u1", "2026-01-02") == turn
    assert await store.spend_of("user", "u2", "2026-01-01") == Spend()
