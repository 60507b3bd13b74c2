"""Streams that already flow give way to chats still waiting for their first token.

The event loop runs every ready callback in turn. A chat that is starting
needs several loop steps before its first token (request, upstream connect,
response head, first chunk), and under load it waits at each of them behind
the chunks of every stream already flowing: with hundreds of streams open,
first tokens then come late and all at once (p50 close to p99). A `/v1` chat
counts as starting from the moment the app has its request (`V1Front`: its
body, key and validation steps wait behind the streams too), other streams from
their answer's start. So while any chat is starting and the loop is busy (an iteration took longer than
`BUSY_S`), a stream that has sent its first token waits before reading on.
Its upstream's bytes pile up in the socket meanwhile and are read later in one
go, as one larger coalesced chunk, which also costs less CPU. The waiting
streams are let go as soon as no chat is starting or the loop is idle again,
and after `MAX_WAIT_S` at the latest, so a steady stream of new chats slows
the older streams' pace but never stops them.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Final

__all__ = ["BUSY_S", "IDLE_PROBE_S", "MAX_WAIT_S", "Gate", "gate"]

BUSY_S: Final = 0.005
"""A loop iteration longer than this means the loop has more work than it keeps up with."""
MAX_WAIT_S: Final = 0.25
"""The longest a flowing stream waits for starting chats, per wait."""
IDLE_PROBE_S: Final = 0.005
"""While chats start on an idle loop, the pause between two measurements. Measuring
every iteration would keep a ready callback queued for as long as a chat starts, so
the loop would never sleep: a busy spin that, with a local model reading a long
prompt, took a core from it and doubled its time to first token."""


class Gate:
    """Counts the starting chats of one event loop and holds flowing streams while it is busy."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, busy_s: float = BUSY_S) -> None:
        self._loop = loop
        self.busy_s = busy_s
        self.starting = 0
        self.busy = False
        self._probing = False
        self._waiters: list[asyncio.Future[None]] = []
        self._deadline: asyncio.TimerHandle | None = None

    def enter(self) -> None:
        """A chat starts: it has not sent its first token yet."""
        self.starting += 1
        if not self._probing:
            self._probing = True
            self._probe()

    def leave(self) -> None:
        """A starting chat sent its first token (or ended without one)."""
        self.starting -= 1
        if not self.starting:
            self.busy = False
            self._release()

    async def give_way(self) -> None:
        """Wait while chats are starting and the loop is busy (module doc); else return at once."""
        if not (self.starting and self.busy):
            return
        waiter = self._loop.create_future()
        self._waiters.append(waiter)
        if self._deadline is None:
            self._deadline = self._loop.call_later(MAX_WAIT_S, self._release)
        await waiter

    def _probe(self) -> None:
        """Measure the next loop iteration, unless no chat is starting any more."""
        if self.starting:
            self._loop.call_soon(self._tick, self._loop.time())
        else:
            self._probing = False

    def _tick(self, scheduled: float) -> None:
        """How long did the last iteration take? While busy, measure the next one too;
        when idle, let the loop sleep `IDLE_PROBE_S` before measuring again."""
        now = self._loop.time()
        self.busy = now - scheduled > self.busy_s
        if not self.busy:
            self._release()
        if not self.starting:
            self._probing = False
        elif self.busy:
            self._loop.call_soon(self._tick, now)
        else:
            self._loop.call_later(IDLE_PROBE_S, self._probe)

    def _release(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Gate] = weakref.WeakKeyDictionary()


def gate() -> Gate:
    """The running loop's gate."""
    loop = asyncio.get_running_loop()
    found = _GATES.get(loop)
    if found is None:
        found = _GATES[loop] = Gate(loop)
    return found
