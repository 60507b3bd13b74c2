"""Redis event bus: the same logs and control channel shared by many server workers.

Owns the Redis layout, all under a configurable prefix (default "toolrelay:"):

- `<prefix>log:<channel>` — a Stream; event entries have ids "<seq>-0" and a
  field `e` (a delta: `d`) holding orjson `{"type", "data"}`; `end` and `pause`
  delete the turn's `d` entries (its `output_item.done` events hold the text)
  and write the stream anew (Redis frees deleted entries only with their whole
  node); the end-of-turn marker is an entry "<seq>-<n>" (n ≥ 1, after the turn's
  last event) with a field `end`. A publish past `max_events` deletes the oldest.
- `<prefix>seq:<channel>` — the INCR counter the seqs come from.
- `<prefix>turn:<channel>` — "running" (a lease: it carries a ttl, renewed by
  the owner's heartbeat, unless started with `begin`), "paused" (no lease: the
  next `acquire` or `begin` goes on with the turn, `start:` kept) or "ended".
- `<prefix>start:<channel>` — the seq before the turn's first event.
- `PUBLISH`/`SUBSCRIBE` on `<prefix>control:<channel>` for control messages.
- The byte budget of all channels under the prefix (`max_bytes`, the server's
  `events_retain_mb`), shared by every worker: `<prefix>bytes` the total,
  `<prefix>sizes` each channel's part, `<prefix>lru` the channels by last write
  (`<prefix>tick` numbers the writes). Each event counts its payload and 64
  bytes, each channel `CHANNEL_COST`. Past the budget, the least recently written
  channels whose turn is not running give up their events (`<prefix>dropped:<channel>`
  keeps the newest seq lost: a reader before it ends; with a `seq_base`, the whole
  channel goes and a new life numbers above it), then the writing channel its
  oldest. A log that expired is taken off the count by the next publish.

INCR and XADD run in one Lua script, so concurrent publishers (in any worker)
never add seqs out of order; `acquire` checks and takes the lease in one
script too, so one caller wins. `end` sets a ttl on the channel's keys, `pause`
`PAUSE_KEPT` times that; `begin` and `acquire` remove it from the counter and
the log (and seed a missing counter from `seq_base`). Live reads use `XREAD BLOCK` with a
short timeout so `aclose` can stop subscribers without cancelling reads.
When the last reader leaves, the pool's idle connections are closed.
The scripts themselves are in `redis_scripts.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Any, Final

import orjson
import redis.asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError

from toolrelay.adapters.events import PAUSE_KEPT, Envelope, SeqBase
from toolrelay.adapters.events.codec import body_envelope, event_body
from toolrelay.adapters.events.redis_scripts import (
    BEGIN,
    CHANNEL_COST,
    END,
    FORGET,
    PAUSE,
    PUBLISH,
    RENEW,
)
from toolrelay.core.events import DELTA_EVENTS, Event

__all__ = ["CHANNEL_COST", "RedisBus"]

_EVENT_FIELD: Final = b"e"
_DELTA_FIELD: Final = b"d"
"""A delta's field: `end` deletes the finished turn's deltas (its items hold the text)."""
_IDLE_KEPT: Final = 4
"""Idle connections kept open when the last reader leaves."""


class RedisBus:
    """Event logs in Redis Streams and control messages over Redis pub/sub."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = "toolrelay:",
        max_events: int = 10_000,
        ttl: float = 3600,
        poll_interval: float = 0.5,
        batch: int = 500,
        seq_base: SeqBase | None = None,
        max_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        """`max_bytes`: what all channels' events under `prefix` may hold together, as
        counted in Redis (module doc)."""
        self._client = client
        self._seq_base = seq_base
        self._prefix = prefix
        self._max_events = str(max_events)
        self._max_bytes = str(max(1, int(max_bytes)))
        self._ttl_ms = str(max(1, int(ttl * 1000)))
        self._kept_ms = str(int(self._ttl_ms) * PAUSE_KEPT)
        """How long a paused channel, and a turn's start, are kept (ms)."""
        self._block_ms = max(1, int(poll_interval * 1000))
        self._poll_interval = poll_interval
        self._batch = batch
        self._publish = client.register_script(PUBLISH)
        self._begin = client.register_script(BEGIN)
        self._renew = client.register_script(RENEW)
        self._end = client.register_script(END)
        self._pause = client.register_script(PAUSE)
        self._forget = client.register_script(FORGET)
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._cleanups: set[asyncio.Future[None]] = set()
        self._closed = False

    @classmethod
    def from_url(
        cls,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "toolrelay:",
        max_events: int = 10_000,
        ttl: float = 3600,
        poll_interval: float = 0.5,
        seq_base: SeqBase | None = None,
        max_bytes: int = 64 * 1024 * 1024,
    ) -> RedisBus:
        """A bus whose connections open on first use (for sync setup code)."""
        client = aioredis.Redis.from_url(url)
        return cls(
            client,
            prefix=prefix,
            max_events=max_events,
            ttl=ttl,
            poll_interval=poll_interval,
            seq_base=seq_base,
            max_bytes=max_bytes,
        )

    @classmethod
    async def connect(
        cls,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "toolrelay:",
        max_events: int = 10_000,
        ttl: float = 3600,
        poll_interval: float = 0.5,
        seq_base: SeqBase | None = None,
        max_bytes: int = 64 * 1024 * 1024,
    ) -> RedisBus:
        """A bus whose server answered a PING, so a wrong url fails at startup."""
        bus = cls.from_url(
            url,
            prefix=prefix,
            max_events=max_events,
            ttl=ttl,
            poll_interval=poll_interval,
            seq_base=seq_base,
            max_bytes=max_bytes,
        )
        try:
            await bus._client.ping()
        except BaseException:
            await bus._client.aclose()
            raise
        return bus

    # -- log ---------------------------------------------------------------

    async def publish(self, channel: str, event: Event) -> int:
        payload = orjson.dumps(event_body(event, time.time()))
        field = _DELTA_FIELD if event.type in DELTA_EVENTS else _EVENT_FIELD
        seq = await self._publish(
            keys=self._all_keys(channel), args=self._args(channel, payload, field)
        )
        return int(seq)

    async def begin(self, channel: str) -> int:
        start = await self._start(channel, 0)
        assert start is not None
        return start

    async def acquire(self, channel: str, *, ttl: float) -> int | None:
        return await self._start(channel, max(1, int(ttl * 1000)))

    async def _start(self, channel: str, lease_ms: int) -> int | None:
        base = self._seq_base() if self._seq_base is not None else 0
        keys = [*self._keys(channel), self._start_key(channel)]
        start = int(await self._begin(keys=keys, args=[base, lease_ms, self._kept_ms]))
        return None if start < 0 else start

    async def renew(self, channel: str, *, ttl: float) -> bool:
        keys = [self._keys(channel)[2]]
        return bool(await self._renew(keys=keys, args=[max(1, int(ttl * 1000))]))

    async def turn_start(self, channel: str) -> int:
        value = await self._client.get(self._start_key(channel))
        return int(value) if value is not None else 0

    def _start_key(self, channel: str) -> str:
        return f"{self._prefix}start:{channel}"

    async def end(self, channel: str) -> None:
        await self._end(keys=self._all_keys(channel), args=self._args(channel))

    async def pause(self, channel: str) -> None:
        args = [*self._args(channel), self._kept_ms]
        await self._pause(keys=self._all_keys(channel), args=args)

    async def forget(self, channel: str) -> None:
        await self._forget(keys=self._all_keys(channel), args=self._args(channel))

    async def retained_bytes(self) -> int:
        """What all channels' events under this prefix cost to keep, as counted in Redis
        (each event its JSON and 64 bytes; for tests and metrics)."""
        value = await self._client.get(f"{self._prefix}bytes")
        return int(value) if value is not None else 0

    async def last_seq(self, channel: str) -> int:
        value = await self._client.get(self._keys(channel)[0])
        return int(value) if value is not None else 0

    async def turn_running(self, channel: str) -> bool:
        return bool(await self._client.get(self._keys(channel)[2]) == b"running")

    async def subscribe(
        self, channel: str, *, after: int = 0, until_end: bool = True
    ) -> AsyncGenerator[Envelope, None]:
        """XREAD from "<after>-0" on; checks for the end only once caught up."""
        seq_key, log_key, turn_key = self._keys(channel)
        dropped_key = f"{self._prefix}dropped:{channel}"
        cursor = after
        last_id: bytes | str = f"{after}-0"
        caught_up = True
        self._enter()
        try:
            while not self._closed:
                # one MGET, so the counter, the turn state and the hole are read at once
                seq, state, dropped = await self._client.mget(seq_key, turn_key, dropped_key)
                if cursor < int(dropped or 0):  # events after the cursor were dropped
                    return
                if caught_up and until_end and state == b"ended" and cursor >= int(seq or 0):
                    return
                reply = await self._client.xread(
                    {log_key: last_id}, count=self._batch, block=self._block_ms
                )
                entries = reply[0][1] if reply else []
                caught_up = len(entries) < self._batch
                for entry_id, fields in entries:
                    last_id = entry_id
                    envelope = _decode(entry_id, fields)
                    if envelope is not None and envelope.seq > cursor:
                        yield envelope
                        cursor = envelope.seq
        finally:
            self._leave()

    # -- control -----------------------------------------------------------

    async def send_control(self, channel: str, message: dict[str, Any]) -> int:
        return int(await self._client.publish(self._control_key(channel), orjson.dumps(message)))

    async def control(self, channel: str) -> AsyncGenerator[dict[str, Any], None]:
        """Listens from the first `__anext__`; polls so that `aclose` can end it."""
        if self._closed:
            return
        self._enter()
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self._control_key(channel))
            while not self._closed:
                message = await pubsub.get_message(timeout=self._poll_interval)
                if message is not None and message["type"] == "message":
                    yield orjson.loads(message["data"])
        finally:
            self._leave()
            await self._unsubscribe(pubsub)

    async def _unsubscribe(self, pubsub: PubSub) -> None:
        """Release the pub/sub connection even when the listener is being cancelled.

        The usual way to stop a listener is to cancel its task; the cleanup then runs
        in a task of its own that `aclose` waits for, so no connection stays subscribed.
        """
        cleanup = asyncio.ensure_future(pubsub.aclose())  # type: ignore[no-untyped-call]
        self._cleanups.add(cleanup)
        cleanup.add_done_callback(self._cleanups.discard)
        await asyncio.shield(cleanup)

    async def aclose(self) -> None:
        """Let live readers notice (one poll interval), then close the connection pool."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._poll_interval * 2 + 0.5):
                await self._idle.wait()
        if self._cleanups:
            await asyncio.gather(*self._cleanups, return_exceptions=True)
        await self._client.aclose()

    async def ping(self) -> None:
        """A Redis PING; raises when the server cannot be reached."""
        await self._client.ping()

    # -- helpers -----------------------------------------------------------

    def _keys(self, channel: str) -> list[str]:
        p = self._prefix
        return [f"{p}seq:{channel}", f"{p}log:{channel}", f"{p}turn:{channel}"]

    def _all_keys(self, channel: str) -> list[str]:
        """What the log scripts touch: the channel's keys, the budget's, the turn's start."""
        p = self._prefix
        budget = [f"{p}bytes", f"{p}sizes", f"{p}lru", f"{p}tick"]
        return [*self._keys(channel), *budget, self._start_key(channel)]

    def _args(self, channel: str, payload: bytes = b"", field: bytes = b"") -> list[Any]:
        limits = [self._max_events, self._ttl_ms]
        base = self._seq_base() if self._seq_base is not None and payload else None
        renumbered = "1" if self._seq_base is not None else "0"
        budget = [self._max_bytes, self._prefix, renumbered, base or 0]
        return [payload, *limits, field, channel, *budget]

    def _control_key(self, channel: str) -> str:
        return f"{self._prefix}control:{channel}"

    def _enter(self) -> None:
        self._active += 1
        self._idle.clear()

    def _leave(self) -> None:
        self._active -= 1
        if self._active == 0:
            self._idle.set()
            if not self._closed:
                cleanup = asyncio.ensure_future(self._release_idle())
                self._cleanups.add(cleanup)
                cleanup.add_done_callback(self._cleanups.discard)

    async def _release_idle(self) -> None:
        """Close the pool's idle connections (a few stay) once no reader is left.

        redis-py keeps every connection a peak ever needed (each live reader
        holds one in a blocking XREAD), so without this the open sockets stay at
        the busiest moment's count. The idle connections are taken out of the pool
        (`get_available_connection`, with no await between, so no other task can
        pick one up while it closes), the surplus disconnected, and all handed
        back: a disconnected one costs no socket and reconnects when next used.
        (`disconnect(inuse_connections=False)` closes connections that other tasks
        may take meanwhile.)
        """
        pool = self._client.connection_pool
        taken: list[AbstractConnection] = []
        with contextlib.suppress(RedisConnectionError):  # at the pool's limit: all are taken
            while not taken or taken[-1].is_connected:  # a closed or new one: no open one left
                taken.append(pool.get_available_connection())  # type: ignore[no-untyped-call]
        kept = {id(c) for c in [c for c in taken if c.is_connected][:_IDLE_KEPT]}
        closing = [c for c in taken if id(c) not in kept]
        try:
            await asyncio.gather(*(c.disconnect() for c in closing), return_exceptions=True)
        finally:
            # the closed ones first: the pool hands out the last released first, so the open
            # ones stay above the closed ones, where the next clean-up stops
            for connection in [*closing, *(c for c in taken if id(c) in kept)]:
                await pool.release(connection)


def _decode(entry_id: bytes, fields: dict[bytes, bytes]) -> Envelope | None:
    """An event entry as an Envelope; markers (no `e` field) give None."""
    payload = fields.get(_EVENT_FIELD) or fields.get(_DELTA_FIELD)
    if payload is None:
        return None
    return body_envelope(int(entry_id.split(b"-", 1)[0]), orjson.loads(payload))
