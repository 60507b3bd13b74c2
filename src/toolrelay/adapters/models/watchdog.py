"""The one timer that guards a model call: first byte, idle between chunks, total, the end.

An `asyncio.timeout` per phase costs a timer handle pushed on the loop's heap
and cancelled, a context object and two coroutines; a model call had four.
And a deadline kept exact per chunk costs a clock read and a few writes on
every chunk of every answer. `Watchdog` keeps one lazy timer per model call
instead, and reads nothing per chunk:

1. Opening (each try): the request, status, headers and first chunk within
   `first_byte` of the try's start; exact.
2. Reading: the body (`UpstreamBody`) is an async generator; while it waits
   on the server it is suspended in an `await` (`ag_await` is the pending
   read), while the reader works on a chunk it is not. The timer looks every
   idle/`SAMPLES` s: a read seen pending at two looks `idle` apart has waited
   at least `idle`, so the idle timeout never fires early and at most
   2·idle/`SAMPLES` late. A reader that is slow between reads (its sink is
   slow, say) has no read pending: the server is not at fault.
3. Ending: what is left of a body that said it was over, within a short grace.

The total (`Timeouts.total`, from the request on, retries included) is exact
in every phase; one passing while the reader is busy is raised at its next
read. An overdue wait gets its task cancelled, as `asyncio.Timeout` would, and
the wait turns the cancel into the timeout's `ProviderError` with the same
uncancel rule (`timed_out`): a cancel that came from outside too stays a
cancel. A wait still going on `RECANCEL_S` after the cancel swallowed it
(caught it and waited on): it is cancelled again, and again, each cancel
counted and taken back at the end (`Task.cancel`/`uncancel`, public calls):
however a transport handles a cancel, a timeout ends the wait. A call shorter than idle/`SAMPLES` s arms
the timer once and cancels it at the end (a drain moves it once more, to the
grace).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from types import AsyncGeneratorType
from typing import Any, Final

from toolrelay.adapters.models.failures import timeout_error
from toolrelay.errors import ProviderError

__all__ = ["DEFAULT_TIMEOUTS", "MIN_STEP", "SAMPLES", "Timeouts", "Watchdog"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds; `total` None means no bound on the whole response."""

    connect: float = 10.0
    first_byte: float = 120.0
    idle: float = 120.0
    total: float | None = None


DEFAULT_TIMEOUTS: Final = Timeouts()

SAMPLES: Final = 8
"""Looks per idle period at a body being read (rule 2)."""

MIN_STEP: Final = 0.001
"""Seconds between looks at the least: an idle timeout of 0 must not spin the loop."""

RECANCEL_S: Final = 1.0
"""Seconds after a timeout's cancel at which a wait still going on is cancelled again: the
task has had the loop's turns to see the cancel since, so the wait swallowed it."""

_OPENING, _READING, _ENDING = 0, 1, 2


class Watchdog:
    """One model call's timer (module doc): `opening()` per try, then the body's phases."""

    __slots__ = (
        "_cancelling",
        "_pending",
        "_sent",
        "_phase",
        "_seen",
        "_span",
        "_step",
        "body",
        "closed",
        "expired",
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
        self._step = max(timeouts.idle / SAMPLES, MIN_STEP)
        self.handle: asyncio.TimerHandle | None = None
        self.task: asyncio.Task[Any] | None = None
        self._cancelling = 0
        self._sent = 0
        """Cancels sent and not yet taken back (a swallowed one is sent again): while there
        are any, the waiting task was cancelled by this watchdog and has not seen it yet."""
        self._phase = _OPENING
        self._span = timeouts.first_byte
        self.since = 0.0
        """When the opening try, or the ending, began."""
        self.waiting = False
        """The request is waiting on the server (opening; reads show it by `body.ag_await`)."""
        self.body: AsyncGeneratorType[bytes, None] | None = None
        self._pending: object = None
        """The read seen pending at the last look, and when it was first seen."""
        self._seen = 0.0
        self.expired: ProviderError | None = None
        self.closed = False

    @property
    def expiring(self) -> bool:
        """The waiting task was cancelled by this watchdog and has not seen it yet."""
        return self._sent > 0

    def opening(self) -> None:
        """One try: status, headers and the first chunk within `first_byte` (or the total)."""
        self._watch_task()
        self._phase, self._span = _OPENING, self.timeouts.first_byte
        self.since = self.loop.time()
        self.expired = None
        self.waiting = True
        self._arm(self.since)

    def reading(self) -> None:
        """The body's first read after the first chunk: idle from now on, unless the body
        is ending already (its first chunk held all of the answer: the grace stays)."""
        self._watch_task()
        if self._phase == _ENDING:
            return
        self._phase = _READING
        self._pending = None
        if self.handle is None and self.expired is None:  # the reader took its time
            self._arm(self.loop.time())

    def ending(self, grace: float) -> None:
        """The end of a body that said it was over: at most `grace` s from now, in all."""
        self._watch_task()
        self._phase, self._span = _ENDING, grace
        self.since = self.loop.time()
        self._arm(self.since)

    def _watch_task(self) -> None:
        task = asyncio.current_task()
        if task is not self.task:
            self.task = task
            self._cancelling = task.cancelling() if task is not None else 0

    def _next(self, now: float) -> float:
        """When to look next: the next sample, or an exact deadline if that is sooner."""
        at = now + self._step
        if self._phase != _READING:
            at = min(at, self.since + self._span)
        total_at = self.total_at
        return at if total_at is None else min(at, total_at)

    def _arm(self, now: float) -> None:
        """The timer fires by the next look; moved only when that is sooner than it."""
        at = self._next(now)
        handle = self.handle
        if handle is not None:
            if handle.when() <= at:
                return
            handle.cancel()
        self.handle = self.loop.call_at(at, self._check)

    def _check(self) -> None:
        """The timer: expire a wait that went on too long, else look again later."""
        self.handle = None
        if self.closed:
            return
        loop = self.loop
        now = loop.time()
        total = self.total_at is not None and now >= self.total_at
        body = self.body
        pending = body.ag_await if body is not None else None
        if self._phase == _READING:
            waiting = pending is not None
            overdue = total
            if pending is None:
                self._pending = None
            elif pending is not self._pending:
                self._pending, self._seen = pending, now
            elif now - self._seen >= self.timeouts.idle:
                overdue = True
        else:
            waiting = self.waiting or pending is not None
            overdue = total or now >= self.since + self._span
        if not overdue:
            self.handle = loop.call_at(self._next(now), self._check)
        elif waiting:
            self.expired = self.error(total)
            task = self.task
            if task is not None and task.cancel():  # first, or again: the last was swallowed
                self._sent += 1
            if self.expiring:  # a wait that swallows the cancel must not go on unguarded
                self.handle = loop.call_at(now + max(self._step, RECANCEL_S), self._check)
        elif total:
            self.expired = self.error(total)  # raised at the next read
        # else: opened, and nobody reads yet: `reading()` arms again

    def error(self, total: bool) -> ProviderError:
        if total and self.timeouts.total is not None:
            return timeout_error(self.timeouts.total, total=True)
        span = self.timeouts.idle if self._phase == _READING else self._span
        return timeout_error(span, total=False)

    def timed_out(self) -> ProviderError | None:
        """After a `CancelledError` reached the wait: the timeout's error when the cancel was
        this watchdog's alone (`asyncio.Timeout.__aexit__`'s rule), else None."""
        if not self.expiring:
            return None
        task = self.task
        assert task is not None
        sent, self._sent = self._sent, 0
        left = task.cancelling()
        for _ in range(sent):  # ours, each taken back once (unless the waiter did already)
            if left <= self._cancelling:
                break
            left = task.uncancel()
        if left > self._cancelling:
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
