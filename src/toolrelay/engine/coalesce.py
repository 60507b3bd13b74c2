"""Merges delta events of one item so a client gets at most one per window.

Text, reasoning and argument deltas of the same item and part are joined
until `window` seconds or `max_chunks` deltas have passed, or another event
comes; a timer flushes what waits when the upstream pauses. The first delta
of each item is sent at once, so coalescing never delays a first token. A
window of 0 passes every event straight through. Order is kept exactly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any

from toolrelay.core.events import DELTA_EVENTS, Event
from toolrelay.engine.interfaces import EventSink
from toolrelay.engine.sinks import NullSink


class Coalescer:
    def __init__(
        self,
        sink: EventSink,
        *,
        window: float,
        max_chunks: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sink = sink
        self._quiet = isinstance(sink, NullSink)
        self._window = window
        self._max = max(1, max_chunks)
        self._clock = clock
        self._pending: Event | None = None
        self._started: set[Any] = set()
        self._pieces: list[str] = []
        self._since = 0.0
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._failed: BaseException | None = None
        """A timer's flush that failed (the sink raised): the turn's next call raises it."""

    @property
    def quiet(self) -> bool:
        """Nobody is listening (the sink is a `NullSink`): producers may skip building events."""
        return self._quiet

    async def emit_many(self, events: Iterable[Event]) -> None:
        if self._quiet:
            return
        for event in events:
            if not self._merged(event):
                await self.emit(event)

    def _merged(self, event: Event) -> bool:
        """Fold a delta into the pending one, synchronously, when it continues it.

        No clock read here: the timer armed with the pending delta ends the window.
        """
        pending = self._pending
        if pending is None or event.type is not pending.type:
            return False
        data, held = event.data, pending.data
        if (
            len(self._pieces) + 1 >= self._max
            or data["item_id"] != held["item_id"]
            or data.get("content_index") != held.get("content_index")
        ):
            return False
        self._pieces.append(data["delta"])
        return True

    async def emit(self, event: Event) -> None:
        if self._quiet:
            return
        if self._failed is not None:
            self._raise_failed()
        if self._window <= 0:
            await self._send(event)
            return
        if event.type in DELTA_EVENTS:
            pending = self._pending
            if pending is not None and _same_target(pending, event):
                self._pieces.append(event.data["delta"])
                if len(self._pieces) >= self._max or self._clock() - self._since >= self._window:
                    await self.flush()
                return
            await self.flush()
            item = event.data.get("item_id")
            if item not in self._started:  # an item's first delta goes out at once: first token
                self._started.add(item)
                await self._send(event)
                return
            self._pending, self._pieces, self._since = event, [event.data["delta"]], self._clock()
            self._arm()
            return
        await self.flush()
        await self._send(event)

    async def flush(self) -> None:
        if self._failed is not None:
            self._raise_failed()
        pending, self._pending = self._pending, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if pending is None:
            return
        pieces, self._pieces = self._pieces, []
        if len(pieces) > 1:
            pending = Event(pending.type, {**pending.data, "delta": "".join(pieces)})
        await self._send(pending)

    async def aclose(self) -> None:
        await self.flush()
        if self._flusher is not None and not self._flusher.done():
            await self._flusher

    def _arm(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._window, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._pending is not None and (self._flusher is None or self._flusher.done()):
            self._flusher = asyncio.get_running_loop().create_task(self.flush())
            self._flusher.add_done_callback(self._flushed)

    def _flushed(self, task: asyncio.Task[None]) -> None:
        """Keep a failed timer flush for the turn: nobody awaits that task, so its error
        would be lost (and logged as never retrieved) while the turn went on."""
        if not task.cancelled() and task.exception() is not None:
            self._failed = task.exception()

    def _raise_failed(self) -> None:
        failed, self._failed = self._failed, None
        assert failed is not None
        raise failed

    async def _send(self, event: Event) -> None:
        async with self._lock:
            await self._sink.emit(event)


def _same_target(a: Event, b: Event) -> bool:
    return (
        a.type == b.type
        and a.data.get("item_id") == b.data.get("item_id")
        and a.data.get("content_index") == b.data.get("content_index")
    )
