"""Stopping promptly: SSE followers leave at once, running turns get a bounded grace.

Uvicorn, asked to stop (SIGTERM, SIGINT), waits for every open response to
finish before the app's shutdown runs, and tells the app nothing: an SSE
client following an idle chat kept the process alive until it left. So the
app chains its own handler in front of uvicorn's: it sets `stopping`, which
ends every SSE stream with a `server:shutdown` event (reconnect elsewhere or
later), and after `grace` seconds cancels what still runs (chat turns are
then saved `cancelled`, /v1 streams end). Then uvicorn's own handler runs as
before. Only the main thread can own signal handlers; elsewhere (tests
running uvicorn in a thread) `stop()` does the same on demand.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopping:
    """Set once the process is asked to stop; see the module doc."""

    def __init__(self, grace: float, cancel: Callable[[], Awaitable[None]]) -> None:
        self.grace = grace
        self._cancel = cancel
        self.event = asyncio.Event()
        self._wakers: set[Callable[[], None]] = set()
        self._previous: dict[int, Any] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def is_set(self) -> bool:
        return self.event.is_set()

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call `wake` at the stop (an SSE stream's way out); returns the unwatch function."""
        self._wakers.add(wake)
        return lambda: self._wakers.discard(wake)

    def install(self) -> None:
        """Chain in front of the current SIGTERM/SIGINT handlers (uvicorn's), main thread only."""
        self._loop = asyncio.get_running_loop()
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in _SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def uninstall(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if self._task is not None:
            self._task.cancel()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.stop)
        previous = self._previous.get(signum)
        if callable(previous):
            previous(signum, frame)

    def stop(self) -> None:
        """Begin stopping: wake every SSE stream now, cancel running work after the grace."""
        if self.event.is_set():
            return
        self.event.set()
        for wake in list(self._wakers):
            wake()
        self._task = asyncio.get_running_loop().create_task(self._after_grace())

    async def _after_grace(self) -> None:
        await asyncio.sleep(self.grace)
        await self._cancel()
