"""Answers the engine waits for from outside: client-side tool results, approvals.

A registry of futures keyed by call id. The engine `expect()`s an id and
awaits it with a timeout; the front door (`Relay.submit_tool_result`, the
server's endpoint, a Redis listener) `resolve()`s it. Answers that arrive
before the engine asks are kept, so a fast client never loses a race.
"""

from __future__ import annotations

import asyncio
from typing import Any


class PendingCalls:
    def __init__(self) -> None:
        self._futures: dict[str, asyncio.Future[Any]] = {}
        self._early: dict[str, Any] = {}

    def expect(self, key: str) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if key in self._early:
            future.set_result(self._early.pop(key))
        else:
            self._futures[key] = future
        return future

    def resolve(self, key: str, value: Any) -> bool:
        """Deliver an answer; False if it was already answered or never asked for here."""
        future = self._futures.pop(key, None)
        if future is None:
            if key in self._early:
                return False
            self._early[key] = value
            return True
        if future.done():
            return False
        future.set_result(value)
        return True

    def ready(self, key: str) -> bool:
        """Whether an answer for `key` came before it was asked for (it is kept)."""
        return key in self._early

    async def wait(self, key: str, limit: float) -> Any:
        """Await the answer for `key`; raises TimeoutError after `limit` seconds."""
        future = self.expect(key)
        try:
            async with asyncio.timeout(limit):
                return await future
        finally:
            self._futures.pop(key, None)
