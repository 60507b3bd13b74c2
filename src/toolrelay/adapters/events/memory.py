"""In-process event bus (asyncio): the default when one server process runs every turn.

Owns per-channel logs in memory: the last `max_events` envelopes, the seq
counter, the turn state and its lease deadline. Ended channels are forgotten
`ttl` seconds after their end, paused ones `PAUSE_KEPT` times that after their
pause, and a channel with no events, no turn and no subscriber as soon as its
last subscriber leaves; all are checked lazily against an injectable clock, so
the bus runs no background tasks. Must not be shared across processes; use
`RedisBus` (or `IpcBus`, which reaches one of these in its parent process).

What it retains is bounded twice. A finished (or paused) turn's deltas
(`DELTA_EVENTS`, most of a turn's bytes) are dropped once the turn has ended
(after its final save) or paused, and no subscriber is left reading it: a replay
of that turn skips them, its items' `output_item.done` events carrying their
whole text. And all channels together hold at most `max_bytes` (each event
counted as its JSON size, each channel as `CHANNEL_COST`): past it, ended
channels give up their events oldest first, then paused ones (with a `seq_base`,
the whole channel: a new life numbers above it), then the channel being written
its oldest. A subscriber whose next events were dropped that way ends
(`subscribe`), so its client reconnects and is sent the saved chat, never a log
with a hole in it.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Literal

import orjson

from toolrelay.adapters.events import PAUSE_KEPT, Envelope, SeqBase
from toolrelay.core.events import DELTA_EVENTS, Event

__all__ = ["MemoryBus"]

TurnState = Literal["idle", "running", "paused", "ended"]


CHANNEL_COST = 2048
"""What a channel costs to keep besides its events (its state, deque, wake-up event),
about: counted in `max_bytes`, so many small channels are bounded too."""


def _size(event: Event) -> int:
    """What an event costs to keep, about: its JSON."""
    return len(orjson.dumps(event.data)) + len(event.type) + 64


@dataclass(slots=True)
class _Channel:
    """One chat's log; `changed` is replaced after each set so waiters never miss a wakeup."""

    events: deque[Envelope]
    sizes: deque[int] = field(default_factory=deque)
    """Each retained envelope's `_size`, in step with `events`."""
    bytes: int = 0
    dropped: int = 0
    """The newest seq dropped to make room under `max_bytes`: a reader still before it
    has lost events."""
    seq: int = 0
    start: int = 0
    """The seq before the current (or last) turn's first event; kept while it is paused."""
    state: TurnState = "idle"
    lease_until: float | None = None
    """While running: when the lease ends unless renewed (None: held until `end`)."""
    listeners: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    def after(self, cursor: int) -> list[Envelope]:
        """Retained envelopes with seq > cursor (in seq order, found by bisection: once
        deltas are dropped the retained seqs have gaps)."""
        if not self.events or cursor >= self.seq:
            return []
        start = bisect.bisect_right(self.events, cursor, key=_seq)
        return list(islice(self.events, start, None))

    def keep(self, wanted: Callable[[Envelope], bool], *, hole: bool = True) -> int:
        """Drop the envelopes `wanted` refuses; returns the bytes freed. `hole`: readers
        still before them have lost events (`dropped`); deltas are not a loss: their
        items' `output_item.done` hold the whole text."""
        kept = [(e, n) for e, n in zip(self.events, self.sizes, strict=True) if wanted(e)]
        if len(kept) == len(self.events):
            return 0
        if hole:
            gone = [e.seq for e in self.events if not wanted(e)]
            self.dropped = max(self.dropped, gone[-1])
        freed = self.bytes - sum(n for _, n in kept)
        self.events = deque((e for e, _ in kept), maxlen=self.events.maxlen)
        self.sizes = deque(n for _, n in kept)
        self.bytes -= freed
        return freed

    def held(self, now: float) -> bool:
        """A turn runs and its lease has not run out."""
        if self.state != "running":
            return False
        return self.lease_until is None or now < self.lease_until

    def unused(self) -> bool:
        return self.listeners == 0 and self.state == "idle" and not self.events


def _seq(envelope: Envelope) -> int:
    return envelope.seq


def _newer_than(seq: int) -> Callable[[Envelope], bool]:
    return lambda envelope: envelope.seq > seq


def _not_delta(envelope: Envelope) -> bool:
    return envelope.event.type not in DELTA_EVENTS


class MemoryBus:
    """Event logs and control queues in this process."""

    def __init__(
        self,
        *,
        max_events: int = 10_000,
        ttl: float = 3600,
        clock: Callable[[], float] = time.monotonic,
        seq_base: SeqBase | None = None,
        max_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        """`seq_base` sets where new channels start numbering (0 without one); `max_bytes`
        bounds the events of all channels together (module doc)."""
        if max_events < 1:
            raise ValueError("max_events must be at least 1")
        self._max_events = max_events
        self.max_bytes = max_bytes
        self._bytes = 0
        self._ttl = ttl
        self._clock = clock
        self._seq_base = seq_base
        self._channels: dict[str, _Channel] = {}
        self._expiry: OrderedDict[str, float] = OrderedDict()
        """Ended channels, by when they are forgotten (in order: the ttl is fixed)."""
        self._paused: OrderedDict[str, float] = OrderedDict()
        """Paused channels, likewise (`PAUSE_KEPT` times the ttl)."""
        self._controls: dict[str, set[asyncio.Queue[dict[str, Any] | None]]] = {}
        self._closed = False

    # -- log ---------------------------------------------------------------

    async def publish(self, channel: str, event: Event) -> int:
        """Append; an event after the turn ended (a title, say) restarts the channel's ttl."""
        ch = self._channel(channel)
        ch.seq += 1
        if len(ch.events) >= self._max_events:  # the oldest goes (a gap at the start only)
            ch.events.popleft()
            freed = ch.sizes.popleft()
            ch.bytes -= freed
            self._bytes -= freed
        size = _size(event)
        ch.events.append(Envelope(ch.seq, event, time.time()))
        ch.sizes.append(size)
        ch.bytes += size
        self._bytes += size
        if self._bytes > self.max_bytes:
            self._make_room(ch)
        if ch.state == "ended":
            self._schedule_expiry(channel)
        ch.notify()
        return ch.seq

    async def begin(self, channel: str) -> int:
        return self._start(self._channel(channel), channel, None)

    async def acquire(self, channel: str, *, ttl: float) -> int | None:
        """Check and take in one step: no await in between, so one caller wins."""
        ch = self._channel(channel)
        if ch.held(self._clock()):
            return None
        return self._start(ch, channel, self._clock() + ttl)

    async def renew(self, channel: str, *, ttl: float) -> bool:
        ch = self._channels.get(channel)
        if ch is None or not ch.held(self._clock()):
            return False
        ch.lease_until = self._clock() + ttl
        return True

    def _start(self, ch: _Channel, channel: str, lease_until: float | None) -> int:
        """A new turn starts after the last event; a paused one goes on from its start."""
        if ch.state != "paused":
            ch.start = ch.seq
        ch.state = "running"
        ch.lease_until = lease_until
        self._expiry.pop(channel, None)
        self._paused.pop(channel, None)
        ch.notify()
        return ch.start

    async def end(self, channel: str) -> None:
        ch = self._channel(channel)
        ch.state = "ended"
        ch.lease_until = None
        self._paused.pop(channel, None)
        self._schedule_expiry(channel)
        if ch.listeners == 0:  # else when its last reader leaves (`subscribe`)
            self._drop_deltas(ch)
        ch.notify()

    async def pause(self, channel: str) -> None:
        """The lease goes, the turn stays: readers wait on, the next start goes on with it."""
        ch = self._channel(channel)
        ch.state = "paused"
        ch.lease_until = None
        self._expiry.pop(channel, None)
        self._paused[channel] = self._clock() + self._ttl * PAUSE_KEPT
        self._paused.move_to_end(channel)
        if ch.listeners == 0:  # else when its last reader leaves (`subscribe`)
            self._drop_deltas(ch)
        ch.notify()

    async def forget(self, channel: str) -> None:
        """Drop the channel's events and state (its chat was deleted); readers end."""
        ch = self._remove(channel)
        if ch is None:
            return
        ch.state = "ended"
        ch.notify()

    def retained_bytes(self) -> int:
        """What all channels' events cost to keep, about (for tests and metrics)."""
        return self._bytes

    def _drop_deltas(self, ch: _Channel) -> None:
        """A finished (or paused) turn's deltas: its items and the saved chat hold their text."""
        if ch.state in ("ended", "paused"):
            self._bytes -= ch.keep(_not_delta, hole=False)

    def _make_room(self, writing: _Channel) -> None:
        """Over `max_bytes`: ended channels' events go, oldest end first, then paused ones',
        oldest pause first, then the writing channel's oldest (its newest event stays)."""
        for name in [*self._expiry, *self._paused]:
            if self._bytes <= self.max_bytes:
                return
            ch = self._channels.get(name)
            if ch is None or ch is writing:
                continue
            if self._seq_base is not None and ch.listeners == 0:
                self._remove(name)  # a new life of it numbers above this one (seq_base)
            else:
                self._bytes -= ch.keep(lambda _: False)
                ch.notify()
        while self._bytes > self.max_bytes and len(writing.events) > 1:
            self._bytes -= writing.keep(_newer_than(writing.events[0].seq))

    async def last_seq(self, channel: str) -> int:
        self._purge()
        ch = self._channels.get(channel)
        return ch.seq if ch else 0

    async def turn_start(self, channel: str) -> int:
        self._purge()
        ch = self._channels.get(channel)
        return ch.start if ch else 0

    async def turn_running(self, channel: str) -> bool:
        self._purge()
        ch = self._channels.get(channel)
        return ch is not None and ch.held(self._clock())

    async def subscribe(
        self, channel: str, *, after: int = 0, until_end: bool = True
    ) -> AsyncGenerator[Envelope, None]:
        """Replay then follow; a listener count keeps the channel from expiring under us."""
        ch = self._channel(channel)
        ch.listeners += 1
        cursor = after
        try:
            while not self._closed:
                changed = ch.changed
                if cursor < ch.dropped:  # events after the cursor were dropped: no hole
                    return
                batch = ch.after(cursor)
                for envelope in batch:
                    yield envelope
                    cursor = envelope.seq
                if batch:
                    continue
                if until_end and ch.state == "ended" and cursor >= ch.seq:
                    return
                await changed.wait()
        finally:
            ch.listeners -= 1
            if ch.listeners == 0:
                self._drop_deltas(ch)
            if ch.unused() and self._channels.get(channel) is ch:
                self._remove(channel)

    def channel_count(self) -> int:
        """Channels held in memory (for tests and metrics)."""
        self._purge()
        return len(self._channels)

    # -- control -----------------------------------------------------------

    async def send_control(self, channel: str, message: dict[str, Any]) -> int:
        """Each listener gets its own JSON copy, as it would from Redis."""
        payload = orjson.dumps(message)
        listeners = self._controls.get(channel, set())
        for queue in listeners:
            queue.put_nowait(orjson.loads(payload))
        return len(listeners)

    async def control(self, channel: str) -> AsyncGenerator[dict[str, Any], None]:
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        if self._closed:
            return
        self._controls.setdefault(channel, set()).add(queue)
        try:
            while (message := await queue.get()) is not None:
                yield message
        finally:
            listeners = self._controls.get(channel)
            if listeners is not None:
                listeners.discard(queue)
                if not listeners:
                    del self._controls[channel]

    async def aclose(self) -> None:
        """Wake every subscriber and listener so they finish; idempotent."""
        if self._closed:
            return
        self._closed = True
        for ch in self._channels.values():
            ch.notify()
        for listeners in self._controls.values():
            for queue in listeners:
                queue.put_nowait(None)

    async def ping(self) -> None:
        """In-process: reachable while the process lives."""
        return None

    # -- retention ---------------------------------------------------------

    def _channel(self, channel: str) -> _Channel:
        self._purge()
        ch = self._channels.get(channel)
        if ch is None:
            base = self._seq_base() if self._seq_base is not None else 0
            ch = _Channel(deque(), seq=base, start=base)
            self._channels[channel] = ch
            self._bytes += CHANNEL_COST
        return ch

    def _remove(self, channel: str) -> _Channel | None:
        """Forget a channel and what it held."""
        self._expiry.pop(channel, None)
        self._paused.pop(channel, None)
        ch = self._channels.pop(channel, None)
        if ch is not None:
            self._bytes -= ch.bytes + CHANNEL_COST
        return ch

    def _schedule_expiry(self, channel: str) -> None:
        self._expiry[channel] = self._clock() + self._ttl
        self._expiry.move_to_end(channel)

    def _purge(self) -> None:
        """Forget ended and paused channels past their time (a channel someone reads gets
        another ttl); deadlines are in order since each kind's ttl is fixed."""
        now = self._clock()
        watched: list[str] = []
        for deadlines in (self._expiry, self._paused):
            while deadlines:
                channel, deadline = next(iter(deadlines.items()))
                if deadline > now:
                    break
                del deadlines[channel]
                ch = self._channels.get(channel)
                if ch is not None and ch.listeners > 0:
                    watched.append(channel)
                else:
                    self._remove(channel)
        for channel in watched:
            self._schedule_expiry(channel)
