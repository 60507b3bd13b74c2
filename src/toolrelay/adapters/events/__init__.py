"""The event bus: resumable per-chat event logs plus a control channel to the turn's worker.

A chat turn runs in a background task and publishes its `Event`s to the chat's
channel; SSE clients subscribe, and after a disconnect resubscribe with the last
seq they saw (`Last-Event-ID`) to get exactly what they missed, also after the
turn ended. The same channel name carries control messages (cancel, client-tool
results, approvals) to whichever worker runs the turn.

Invariants every backend keeps:

1. Seqs are 1, 2, 3 … per channel, across turns, with no gaps and no repeats,
   even under concurrent publishers.
2. `subscribe(after=N)` yields every retained event with seq > N in order, then
   live ones; never a duplicate, never a gap (except events already dropped by
   the retention cap).
3. With `until_end=True` a subscriber finishes once the channel's last turn has
   ended and it has delivered every event published so far; while a turn runs,
   is paused, or before any turn began, it waits for live events.
4. Control messages are live only: a listener sees what is sent while it listens.
5. The turn lock is a lease: `acquire` takes it atomically (one winner among
   any number of concurrent callers, in any worker) for `ttl` seconds; the
   owner's heartbeat `renew`s it; `end` releases it. An owner that dies stops
   renewing, so the chat frees itself after at most `ttl` seconds.
6. With a `seq_base`, a channel's numbering starts above it, so seqs never
   restart at 1 under a client's feet after a restart or an expiry
   (`clock_seq_base` derives one from the wall clock).
7. A paused turn (`pause`: it waits for an answer, saved, run by nobody) holds no
   lease, but it has not ended: subscribers stay, and the next `acquire` or `begin`
   goes on with the same turn (its `turn_start` kept), in any worker and after any
   restart of a worker, so a replay from the turn's start has the part before the
   pause too. A paused channel is kept `PAUSE_KEPT` times the bus's ttl after the
   pause (or until the byte bound needs the room); its deltas go as a finished
   turn's do.

Backends: `MemoryBus` (one process, the default), `IpcBus` (the workers of one
machine, reaching a `BusHost` in their parent over a Unix socket) and `RedisBus`
(many workers sharing Redis). They are imported lazily so the Redis client stays
optional.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from toolrelay.core.events import Event
from toolrelay.errors import ConfigError

if TYPE_CHECKING:
    from toolrelay.adapters.events.ipc import IpcBus
    from toolrelay.adapters.events.memory import MemoryBus
    from toolrelay.adapters.events.redis import RedisBus

__all__ = [
    "IPC_SCHEME",
    "PAUSE_KEPT",
    "Envelope",
    "EventBus",
    "IpcBus",
    "MemoryBus",
    "RedisBus",
    "SeqBase",
    "clock_seq_base",
    "ipc_path",
    "make_bus",
]

SeqBase = Callable[[], int]
"""Where a new channel's numbering starts (its first event gets base + 1)."""

_SEQS_PER_SECOND = 1 << 20

IPC_SCHEME = "ipc://"

PAUSE_KEPT = 24
"""A paused turn's channel (and a turn's start) is kept this many times the bus's ttl
after the pause: a day by default, as long as a pause waits (`pause_timeout_s`)."""


def clock_seq_base(now: Callable[[], float] = time.time) -> int:
    """A base above every seq an earlier life of the channel can have issued.

    A channel created at time t (in seconds, fractions included) starts at
    t * 2^20; one that lived before it started earlier and issued fewer than 2^20
    events per second of its life, so it stayed below. Whole seconds would give a
    restart within the same second the same base, numbering the new life's events
    as ones a client already had. The values stay under 2^53, exact in JavaScript.
    """
    return int(now() * _SEQS_PER_SECOND)


@dataclass(frozen=True, slots=True)
class Envelope:
    """An event with its place in the channel's log; `seq` becomes the SSE `id:`."""

    seq: int
    event: Event
    published_at: float | None = field(default=None, compare=False)
    """Wall-clock seconds when it was published (a reader's lag is `time.time()` minus this)."""


class EventBus(Protocol):
    """What the server needs from a bus; see the module docstring for the guarantees."""

    async def publish(self, channel: str, event: Event) -> int:
        """Append `event` to the channel's log; returns its seq."""
        ...

    async def end(self, channel: str) -> None:
        """Mark the current turn over: `until_end` subscribers stop after the last event."""
        ...

    async def pause(self, channel: str) -> None:
        """Give the turn's lease back without ending it (invariant 7): it waits for an answer."""
        ...

    async def begin(self, channel: str) -> int:
        """Start a turn unconditionally (or go on with a paused one); returns the seq of
        the last event before it."""
        ...

    async def acquire(self, channel: str, *, ttl: float) -> int | None:
        """Start a turn (or go on with a paused one) if none holds a live lease (invariant
        5): its boundary, else None."""
        ...

    async def renew(self, channel: str, *, ttl: float) -> bool:
        """Extend the running turn's lease; False when it was lost (expired or ended)."""
        ...

    def subscribe(
        self, channel: str, *, after: int = 0, until_end: bool = True
    ) -> AsyncGenerator[Envelope, None]:
        """Retained events with seq > `after`, then live ones (invariants 2, 3); `aclose` it."""
        ...

    async def last_seq(self, channel: str) -> int:
        """The seq of the newest event (0 for an empty or expired channel)."""
        ...

    async def turn_start(self, channel: str) -> int:
        """The seq before the current (or last) turn's first event (0 if none)."""
        ...

    async def turn_running(self, channel: str) -> bool:
        """Whether a turn has begun on the channel and not ended yet."""
        ...

    async def forget(self, channel: str) -> None:
        """Drop the channel's events, numbering and turn state (its chat was deleted)."""
        ...

    async def send_control(self, channel: str, message: dict[str, Any]) -> int:
        """Deliver a JSON-ready message to every live `control` listener; returns how many."""
        ...

    def control(self, channel: str) -> AsyncGenerator[dict[str, Any], None]:
        """Control messages sent while listening; ends when closed or the bus closes."""
        ...

    async def aclose(self) -> None:
        """Stop live subscribers and listeners and release connections."""
        ...

    async def ping(self) -> None:
        """Raise when the bus cannot be reached (`/readyz`)."""
        ...


def make_bus(
    url: str | None,
    *,
    seq_base: SeqBase | None = clock_seq_base,
    max_bytes: int = 64 * 1024 * 1024,
) -> EventBus:
    """The bus a setting names: None or "memory" for in-process, "ipc:///abs/path.sock" for
    the `BusHost` at that socket, "redis://…" for Redis.

    An `IpcBus` numbers channels as its host's `MemoryBus` does (by default from
    the clock): `seq_base` belongs to the host, not to each worker, and so does
    `max_bytes` (what a memory bus keeps of all channels' events; a Redis bus counts
    it in Redis, for every worker sharing the prefix).
    """
    if url is None or url == "memory":
        from toolrelay.adapters.events.memory import MemoryBus

        return MemoryBus(seq_base=seq_base, max_bytes=max_bytes)
    if url.startswith(IPC_SCHEME):
        from toolrelay.adapters.events.ipc import IpcBus

        return IpcBus(ipc_path(url))
    if url.startswith(("redis://", "rediss://", "unix://")):
        from toolrelay.adapters.events.redis import RedisBus

        return RedisBus.from_url(url, seq_base=seq_base, max_bytes=max_bytes)
    raise ConfigError(
        f"events url: expected 'memory', an ipc:///abs/path.sock url or a redis:// url, got {url!r}"
    )


def ipc_path(url: str) -> str:
    """The socket path of an "ipc:///abs/path.sock" url; it must be absolute (workers may
    start in another directory)."""
    path = url.removeprefix(IPC_SCHEME)
    if not path.startswith("/"):
        raise ConfigError(f"events url: an ipc:// url needs an absolute path, got {url!r}")
    return path


def __getattr__(name: str) -> Any:
    """Import backends on first use: `RedisBus` needs the `redis` extra."""
    if name == "MemoryBus":
        from toolrelay.adapters.events.memory import MemoryBus

        return MemoryBus
    if name == "IpcBus":
        from toolrelay.adapters.events.ipc import IpcBus

        return IpcBus
    if name == "RedisBus":
        from toolrelay.adapters.events.redis import RedisBus

        return RedisBus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
