"""One upstream response body as raw chunks, and the one timer that guards a model call.

`UpstreamBody` is what `ModelClient.open` returns (a `ModelStream`). Every
timeout of one model call (first byte, then idle between chunks and total,
then the short grace for the end of a body that said it was over) is watched
by one `Watchdog` with one timer, not an `asyncio.timeout` per phase: each of
those costs a timer handle pushed on the loop's heap and cancelled, a context
object and two coroutines, and a model call had four.

The timer is lazy: armed no later than the earliest moment the current
deadline can fall due, it is not moved per chunk (that would cost a timer per
chunk); when it fires it looks at the deadline then in force and sleeps again
until it. Only when a read is overdue *while waiting* does it cancel the
reading task, as `asyncio.Timeout` would, and the read turns that cancel into
the timeout's `ProviderError`, with the same cancel/uncancel bookkeeping: a
cancel that came from outside as well stays a cancel. A consumer that is slow
between reads (its sink is slow, say) starts a new idle period at its next
read instead: the server is not at fault. The total timeout passing between
reads is raised at the next read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Final

import httpx

from toolrelay.adapters.models.errors import lost_connection, timeout_error
from toolrelay.core.formats.content import BodyFormat
from toolrelay.errors import ProviderError

__all__ = ["Timeouts", "UpstreamBody", "Watchdog"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds; `total` None means no bound on the whole response."""

    connect: float = 10.0
    first_byte: float = 120.0
    idle: float = 120.0
    total: float | None = None


DEFAULT_TIMEOUTS: Final = Timeouts()

_OPENING, _READING, _ENDING = 0, 1, 2
"""A model call's phases: what the watchdog's deadline counts from `since`."""


class Watchdog:
    """One model call's only timer (module doc): `opening()` for each try, then the body's."""

    __slots__ = (
        "_cancelling",
        "_phase",
        "_span",
        "closed",
        "expired",
        "expiring",
        "handle",
        "loop",
        "since",
        "task",
        "timeouts",
        "total_at",
        "waiting",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, timeouts: Timeouts) -> None:
        self.loop = loop
        self.timeouts = timeouts
        total = timeouts.total
        self.total_at = None if total is None else loop.time() + total
        self.handle: asyncio.TimerHandle | None = None
        self.task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._phase = _OPENING
        self._span = timeouts.first_byte
        self.since = 0.0
        """When the current wait began (a read, or the request)."""
        self.waiting = False
        """A read (or the request) is waiting on the server: only then is it cancelled."""
        self.expired: ProviderError | None = None
        self.expiring = False
        """The reading task was cancelled by this watchdog and has not seen it yet."""
        self.closed = False

    def opening(self) -> None:
        """One try: status, headers and the first chunk within `first_byte` (or the total)."""
        self._watch_task()
        self._phase, self._span = _OPENING, self.timeouts.first_byte
        self.since = self.loop.time()
        self.expired = None
        self.waiting = True
        self.arm()

    def reading(self) -> None:
        """The body's first real read: from now on the idle timeout (the task may differ)."""
        self._watch_task()
        self._phase, self._span = _READING, self.timeouts.idle
        self.since = self.loop.time()
        if self.expired is None:  # else the read raises it
            self.arm()

    def ending(self, grace: float) -> None:
        """The end of a body that said it was over: at most `grace` s from now, in all."""
        self._watch_task()
        self._phase, self._span = _ENDING, grace
        self.since = self.loop.time()
        self.waiting = True
        self.arm()

    def _watch_task(self) -> None:
        task = asyncio.current_task()
        if task is not self.task:
            self.task = task
            self._cancelling = task.cancelling() if task is not None else 0

    def due(self) -> tuple[float, bool]:
        """When the deadline in force falls due, and whether it is the total one."""
        at = self.since + self._span
        total_at = self.total_at
        if total_at is not None and total_at <= at:
            return total_at, True
        return at, False

    def arm(self) -> None:
        """Make sure the timer fires no later than the deadline in force (it only moves
        later while reading, so the timer is moved only when a phase begins)."""
        at = self.due()[0]
        handle = self.handle
        if handle is not None:
            if handle.when() <= at:
                return
            handle.cancel()
        self.handle = self.loop.call_at(at, self._check)

    def _check(self) -> None:
        """The timer: expire a wait that went on too long, else sleep until the deadline."""
        self.handle = None
        if self.closed:
            return
        at, total = self.due()
        if self.loop.time() < at:
            self.handle = self.loop.call_at(at, self._check)
            return
        if not self.waiting and not total:
            return  # the consumer, not the server, is slow: the next read re-arms
        self.expired = self.error(total)
        if self.waiting and self.task is not None and not self.expiring:
            self.expiring = self.task.cancel()

    def error(self, total: bool) -> ProviderError:
        if total and self.timeouts.total is not None:
            return timeout_error(self.timeouts.total, total=True)
        return timeout_error(self._span, total=False)

    def timed_out(self) -> ProviderError | None:
        """After a `CancelledError` reached the wait: the timeout's error when the cancel was
        this watchdog's alone (`asyncio.Timeout.__aexit__`'s rule), else None."""
        if not self.expiring:
            return None
        self.expiring = False
        assert self.task is not None
        if self.task.uncancel() > self._cancelling:
            return None  # cancelled from outside too: a cancel, not a timeout
        return self.expired

    def settled(self) -> None:
        """The wait ended without a cancel: one this watchdog sent and the waiter swallowed
        is taken back (`asyncio.Timeout` does the same on a clean exit)."""
        self.waiting = False
        if self.expiring:
            self.timed_out()
            self.expired = None

    def close(self) -> None:
        self.closed = True
        self.waiting = False
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class UpstreamBody:
    """One response body as raw chunks (a `ModelStream`); `aclose()` frees the connection."""

    def __init__(
        self,
        response: httpx.Response,
        chunks: AsyncIterator[bytes],
        first: bytes | None,
        format: BodyFormat,
        watchdog: Watchdog,
    ) -> None:
        self.format = format
        self.response = response
        self._chunks = chunks
        self._first = first
        self._watchdog = watchdog
        watchdog.waiting = False  # opened: until the next read, nothing is awaited
        self._closed = first is None
        self._read = chunks.__anext__
        self._started = False
        # asyncio's own loop.time() is time.monotonic() in a Python frame: read per
        # chunk, so call the clock itself (uvloop's time() is C already)
        plain = type(watchdog.loop).time is asyncio.BaseEventLoop.time
        self._now: Callable[[], float] = time.monotonic if plain else watchdog.loop.time

    def __aiter__(self) -> UpstreamBody:
        return self

    async def __anext__(self) -> bytes:
        if not self._started:
            first = await self._start()
            if first is not None:  # the first chunk, read while opening
                return first
        watch = self._watchdog
        watch.since = self._now()
        if watch.handle is None:  # let go (a slow consumer), or the total passed
            if watch.expired is not None:
                await self.aclose()
                raise watch.expired
            watch.arm()
        watch.waiting = True
        try:
            chunk = await self._read()
        except StopAsyncIteration:
            await self.aclose()
            raise
        except asyncio.CancelledError:
            expired = watch.timed_out()
            await self.aclose()
            if expired is not None:
                raise expired from None
            raise  # cancelled from outside: a cancel, not a timeout
        except httpx.TransportError as exc:
            await self.aclose()
            raise lost_connection(exc) from exc
        finally:
            watch.waiting = False
        if watch.expiring:  # expired as the chunk came in (the cancel was lost): it did come
            watch.settled()
        return chunk

    async def _start(self) -> bytes | None:
        """Off the per-chunk path: the first chunk, a closed body, or the first real read."""
        if self._first is not None:
            chunk, self._first = self._first, None
            return chunk
        if self._closed:
            await self.aclose()
            raise StopAsyncIteration
        self._started = True
        self._watchdog.reading()
        return None

    async def drain(self, grace: float) -> None:
        """Read the rest of a body that said it was over, for at most `grace` s in all,
        dropping what comes; a body read to its end gives its connection back to the pool."""
        if self._closed:
            return
        self._first = None
        watch = self._watchdog
        watch.ending(grace)
        read = self._read
        try:
            while True:
                await read()
        except (StopAsyncIteration, httpx.TransportError):
            pass
        except asyncio.CancelledError:
            if watch.timed_out() is None:
                raise
        finally:
            watch.settled()
            await self.aclose()

    async def aclose(self) -> None:
        """Idempotent; later iteration stops at once."""
        self._watchdog.close()
        self._closed = True
        self._started = False
        self._first = None
        try:
            closer = getattr(self._chunks, "aclose", None)
            if closer is not None:
                await closer()
        except RuntimeError:  # mid-read in another task: closing the response ends that read
            pass
        finally:
            await self.response.aclose()
