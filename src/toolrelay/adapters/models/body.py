"""One upstream response body as raw chunks, guarded by the idle and total timeouts.

`UpstreamBody` is what `ModelClient.open` returns (a `ModelStream`). Its reads
run inside one `asyncio.Timeout`, entered at the first read and left when a
read is cancelled, so asyncio itself tells its own expiry (`TimeoutError`)
from a cancel that came from outside, with the cancel/uncancel bookkeeping.
(Entered by hand rather than with `async with`, which would need a generator
frame around every chunk: this is the hot path of every turn.)

The timeout is not re-armed per chunk (that costs a timer per chunk): a lazy
watchdog timer wakes up when the next deadline may have passed, and only when
the body is really overdue *while a read is waiting* does it move the timeout
to now with `Timeout.reschedule`. A consumer that is slow between reads (its
sink is slow, say) starts a new idle period instead: the server is not at fault.
The total timeout passing between reads is raised at the next read.
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

__all__ = ["Deadlines", "Timeouts", "UpstreamBody"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds; `total` None means no bound on the whole response."""

    connect: float = 10.0
    first_byte: float = 120.0
    idle: float = 120.0
    total: float | None = None


DEFAULT_TIMEOUTS: Final = Timeouts()


@dataclass(frozen=True, slots=True)
class Deadlines:
    """Loop-clock deadlines for one response; picks the nearer of a phase and the total."""

    timeouts: Timeouts
    total_at: float | None

    def nearest(self, loop: asyncio.AbstractEventLoop, phase: float) -> tuple[float, ProviderError]:
        at = loop.time() + phase
        if self.total_at is not None and self.total_at <= at:
            assert self.timeouts.total is not None
            return self.total_at, timeout_error(self.timeouts.total, total=True)
        return at, timeout_error(phase, total=False)


class UpstreamBody:
    """One response body as raw chunks (a `ModelStream`); `aclose()` frees the connection."""

    def __init__(
        self,
        response: httpx.Response,
        chunks: AsyncIterator[bytes],
        first: bytes | None,
        format: BodyFormat,
        deadlines: Deadlines,
    ) -> None:
        self.format = format
        self.response = response
        self._chunks = chunks
        self._first = first
        self._deadlines = deadlines
        self._closed = first is None
        self._read = chunks.__anext__
        self._timeout: asyncio.Timeout | None = None
        self._now: Callable[[], float] = time.monotonic  # the loop's clock once reading
        self._watch: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last = 0.0
        self._waiting = False
        self._expired: ProviderError | None = None

    def __aiter__(self) -> UpstreamBody:
        return self

    async def __anext__(self) -> bytes:
        timeout = self._timeout
        if timeout is None or self._expired is not None:
            timeout = await self._start_or_stop()
            if timeout is None:  # the first chunk, read while opening
                chunk, self._first = self._first, None
                assert chunk is not None
                return chunk
        self._last = self._now()
        if self._watch is None:
            self._arm()
        self._waiting = True
        try:
            chunk = await self._read()
        except StopAsyncIteration:
            await self.aclose()
            raise
        except asyncio.CancelledError as exc:
            await self._cancelled(timeout, exc)
            raise  # cancelled from outside: a cancel, not a timeout
        except httpx.TransportError as exc:
            await self.aclose()
            raise lost_connection(exc) from exc
        finally:
            self._waiting = False
        if self._expired is not None:  # expired as the chunk came in: it did come
            timeout.reschedule(None)
            self._expired = None
        return chunk

    async def _start_or_stop(self) -> asyncio.Timeout | None:
        """Off the per-chunk path: the first chunk (None), a closed or expired body, or the
        first real read, whose task enters the body's timeout."""
        if self._first is not None:
            return None
        if self._closed:
            await self.aclose()
            raise StopAsyncIteration
        if self._expired is not None:  # the total timeout passed between two reads
            expired = self._expired
            await self.aclose()
            raise expired
        loop = self._loop = asyncio.get_running_loop()
        # asyncio's own loop.time() is time.monotonic() in a Python frame: read per
        # chunk, so call the clock itself (uvloop's time() is C already)
        plain = type(loop).time is asyncio.BaseEventLoop.time
        self._now = time.monotonic if plain else loop.time
        timeout = self._timeout = asyncio.timeout(None)
        await timeout.__aenter__()  # left by `_cancelled`; reads in between run inside it
        return timeout

    async def _cancelled(self, guard: asyncio.Timeout, exc: asyncio.CancelledError) -> None:
        """Leave the timeout: asyncio tells its own expiry (TimeoutError) from an outside cancel."""
        self._timeout = None
        try:
            await guard.__aexit__(type(exc), exc, exc.__traceback__)
        except TimeoutError:
            expired = self._expired or timeout_error(self._deadlines.timeouts.idle, total=False)
            await self.aclose()
            raise expired from None

    def _arm(self) -> None:
        loop = self._loop
        assert loop is not None
        self._watch = loop.call_at(self._due()[0], self._check, loop)

    def _due(self) -> tuple[float, bool]:
        """When the next timeout falls due, and whether it is the total one."""
        at = self._last + self._deadlines.timeouts.idle
        total_at = self._deadlines.total_at
        if total_at is not None and total_at <= at:
            return total_at, True
        return at, False

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        """The watchdog: expire a read that waited too long, else sleep again."""
        self._watch = None
        if self._closed:
            return
        now = loop.time()
        at, total = self._due()
        if now < at:
            self._arm()
        elif not self._waiting and not total:
            self._last = now  # the consumer, not the server, is slow: a new idle period
            self._arm()
        else:
            timeouts = self._deadlines.timeouts
            seconds = timeouts.total if total and timeouts.total else timeouts.idle
            self._expired = timeout_error(seconds, total=total)
            if self._waiting and self._timeout is not None:
                self._timeout.reschedule(now)

    async def aclose(self) -> None:
        """Idempotent; later iteration stops at once."""
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._closed = True
        self._first = None
        try:
            closer = getattr(self._chunks, "aclose", None)
            if closer is not None:
                await closer()
        except RuntimeError:  # mid-read in another task: closing the response ends that read
            pass
        finally:
            await self.response.aclose()
