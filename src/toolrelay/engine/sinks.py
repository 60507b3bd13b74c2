"""Event sinks the engine itself uses: a queue for `Relay.stream`, and one that drops all."""

from __future__ import annotations

import asyncio

from toolrelay.core.events import Event


class QueueSink:
    """Hands events to a consumer through an unbounded queue (None: no more events)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()

    async def emit(self, event: Event) -> None:
        self.queue.put_nowait(event)


class NullSink:
    async def emit(self, event: Event) -> None:
        return None
