"""The tool-call timeouts of one turn on one lazy timer, not an `asyncio.timeout` per call.

An `asyncio.timeout` costs a timer handle pushed on the loop's heap and then
cancelled, a context object and two coroutines, for every call of every
round, while nearly every call ends long before its deadline. Here a turn
keeps one timer, armed at the earliest deadline of the calls running; a call
that ends leaves it be, a later one that starts finds it already early enough.
When it fires it cancels the calls that are overdue, as `asyncio.Timeout`
would, and sleeps until the next running call's deadline (or stops). A call
tells its own timeout from an outside cancel with the same bookkeeping as
`asyncio.Timeout`: the cancel is ours only when no other is pending.
"""

from __future__ import annotations

import asyncio

__all__ = ["ToolTimer"]


class _Guard:
    """One running call: its task, deadline, and whether the timer cancelled it."""

    __slots__ = ("at", "cancelling", "expiring", "task")

    def __init__(self, task: asyncio.Task[object], at: float) -> None:
        self.task = task
        self.at = at
        self.cancelling = task.cancelling()
        self.expiring = False


class ToolTimer:
    """`start(seconds)` before a call, `end(guard)` after it; `close()` when the turn ends."""

    def __init__(self) -> None:
        self._guards: set[_Guard] = set()
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, seconds: float) -> _Guard:
        """Watch the current task's call for `seconds` from now."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None, "tool calls run in a task"
        guard = _Guard(task, loop.time() + seconds)
        self._guards.add(guard)
        handle = self._handle
        if handle is None or handle.when() > guard.at:
            if handle is not None:
                handle.cancel()
            self._handle = loop.call_at(guard.at, self._check)
        return guard

    def end(self, guard: _Guard) -> bool:
        """The call is over. True when it ran out of time and the `CancelledError` it ended
        with was this timer's alone (then it is a timeout); a cancel the call swallowed is
        taken back either way, as `asyncio.Timeout` does."""
        self._guards.discard(guard)
        if not guard.expiring:
            return False
        guard.expiring = False
        return guard.task.uncancel() <= guard.cancelling

    def _check(self) -> None:
        self._handle = None
        loop = self._loop
        assert loop is not None
        now = loop.time()
        nearest: float | None = None
        for guard in self._guards:
            if guard.expiring:
                continue
            if guard.at <= now:
                guard.expiring = guard.task.cancel()
            elif nearest is None or guard.at < nearest:
                nearest = guard.at
        if nearest is not None:
            self._handle = loop.call_at(nearest, self._check)

    def close(self) -> None:
        """The turn is over: no call runs any more, the timer goes."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
