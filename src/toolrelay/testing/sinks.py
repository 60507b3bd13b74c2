"""A sink for tests: keeps every event, and lets a test wait for one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from toolrelay.core.events import Event


class ListSink:
    """Keeps every event in order; `wait_for` lets a test react to one."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._changed = asyncio.Event()

    async def emit(self, event: Event) -> None:
        self.events.append(event)
        self._changed.set()

    async def wait_for(self, type: str, *, limit: float = 30.0) -> Event:
        """The first event of `type`, waiting up to `limit` seconds for it."""
        async with asyncio.timeout(limit):
            while True:
                found = self.of(type)
                if found:
                    return found[0]
                self._changed.clear()
                await self._changed.wait()

    async def wait_until(self, done: Callable[[], bool], *, limit: float = 30.0) -> None:
        """Wait (up to `limit` seconds) until `done()` holds, re-checking after each event."""
        async with asyncio.timeout(limit):
            while not done():
                self._changed.clear()
                await self._changed.wait()

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, type: str) -> list[Event]:
        return [e for e in self.events if e.type == type]
