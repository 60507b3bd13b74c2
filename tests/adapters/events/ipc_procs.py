"""Process bodies for the IPC bus tests: spawned children import this module, not pytest's.

Each child reports through a `multiprocessing` queue; every wait is bounded by
`HANG` so a broken bus fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier, Event
from typing import Any

from tests.patience import HANG
from toolrelay.adapters.events.ipc import BusHost, IpcBus
from toolrelay.core.events import Event as BusEvent

CHAT = "chat_1"
CHAT_MESSAGE = "chat:message"
EVENTS = 50


def note(text: str) -> BusEvent:
    """An event a log keeps after its turn ends (a finished turn's deltas are dropped:
    test_retention.py)."""
    return BusEvent(CHAT_MESSAGE, {"item_id": "msg_1", "output_index": 0, "content": text})


def host(path: str, ready: Event, stop: Connection) -> None:
    """Serve a bus until the parent closes its end of `stop` (or kills this process).

    A pipe, not an Event: killing a process that waits on an Event leaves the
    Event's lock held, and the parent's `set` would hang on it."""
    with BusHost(path):
        ready.set()
        stop.poll(HANG * 4)


def racer(path: str, name: str, start: Barrier, first_seen: Event, results: Any) -> None:
    """Race for the chat's lease; the winner publishes a turn, the loser follows it live."""
    results.put(asyncio.run(_race(path, name, start, first_seen)))


async def _race(path: str, name: str, start: Barrier, first_seen: Event) -> dict[str, Any]:
    bus = IpcBus(path, connect_timeout=HANG)
    try:
        await bus.ping()  # connected before the race, so both ask at once
        await asyncio.to_thread(start.wait, HANG)
        boundary = await bus.acquire(CHAT, ttl=60)
        await asyncio.to_thread(start.wait, HANG)  # both answered: one holds the lease
        if boundary is not None:
            return await _publish_turn(bus, name, boundary, first_seen)
        return await _follow_turn(bus, name, first_seen)
    finally:
        await bus.aclose()


async def _publish_turn(bus: IpcBus, name: str, boundary: int, first_seen: Event) -> dict[str, Any]:
    seqs = [await bus.publish(CHAT, note("0"))]
    if not await asyncio.to_thread(first_seen.wait, HANG):
        raise TimeoutError("the follower never saw the first event")
    seqs += [await bus.publish(CHAT, note(str(i))) for i in range(1, EVENTS)]
    assert await bus.renew(CHAT, ttl=60)
    await bus.end(CHAT)
    return {"name": name, "won": True, "boundary": boundary, "seqs": seqs}


async def _follow_turn(bus: IpcBus, name: str, first_seen: Event) -> dict[str, Any]:
    start = await bus.turn_start(CHAT)
    seen: list[tuple[int, str]] = []
    async with asyncio.timeout(HANG):
        async for envelope in bus.subscribe(CHAT, after=start):
            seen.append((envelope.seq, envelope.event.data["content"]))
            first_seen.set()
    return {"name": name, "won": False, "boundary": start, "seen": seen}
