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
from toolrelay.core.events import DELTA_EVENTS, Event

__all__ = ["RedisBus"]

_EVENT_FIELD: Final = b"e"
_DELTA_FIELD: Final = b"d"
"""A delta's field: `end` deletes the finished turn's deltas (its items hold the text)."""
CHANNEL_COST: Final = 2048
"""What a channel costs in the byte budget besides its events (its keys; as the memory
bus counts it), so many small channels are bounded too (the scripts hold it as 2048)."""
_IDLE_KEPT: Final = 4
"""Idle connections kept open when the last reader leaves."""

# Shared by the scripts that add to or delete from logs: the byte budget (module doc).
# KEYS[4..7]: bytes, sizes, lru, tick; ARGV[5]: the channel, ARGV[6]: max bytes,
# ARGV[7]: the prefix, ARGV[3]: the ttl in ms, ARGV[8]: '1' with a seq base, ARGV[9]:
# where a publish starts a channel that has no counter (0: from 0).
_BUDGET: Final = """
local function size_of(fields)
  if fields[1] == 'end' then return 0 end
  return string.len(fields[2]) + 64
end
local function account(channel, delta)
  if delta == 0 then return tonumber(redis.call('GET', KEYS[4]) or '0') end
  delta = string.format('%d', delta)  -- never "-0"
  redis.call('HINCRBY', KEYS[5], channel, delta)
  return redis.call('INCRBY', KEYS[4], delta)
end
-- all of a channel's keys go (with a seq base: a new life numbers above this one)
local function remove(name)
  for _, kind in ipairs({'seq:', 'log:', 'turn:', 'start:', 'dropped:'}) do
    redis.call('DEL', ARGV[7] .. kind .. name)
  end
end
local function seq_of(id)
  return tonumber(string.match(id, '^(%d+)-'))
end
-- delete the given entries of a log; returns the new total
local function drop(log, channel, entries, hole)
  local freed, newest = 0, nil
  for _, entry in ipairs(entries) do
    freed = freed + size_of(entry[2])
    newest = entry[1]
    redis.call('XDEL', log, entry[1])
  end
  if hole and newest then
    local key = ARGV[7] .. 'dropped:' .. channel
    local was = tonumber(redis.call('GET', key) or '0')
    if seq_of(newest) > was then redis.call('SET', key, seq_of(newest), 'PX', ARGV[3]) end
  end
  return account(channel, -freed)
end
-- delete the turn's deltas (entries after `from`), not a hole: its items hold the text; a
-- stream frees what XDEL deleted only with its whole node: written anew, it does
local function drop_deltas(log, channel, from)
  local deltas = {}
  for _, entry in ipairs(redis.call('XRANGE', log, string.format('%d-0', from + 1), '+')) do
    if entry[2][1] == 'd' then deltas[#deltas + 1] = entry end
  end
  if #deltas == 0 then return end
  drop(log, channel, deltas, false)
  local kept = redis.call('XRANGE', log, '-', '+')
  redis.call('DEL', log)
  for _, entry in ipairs(kept) do redis.call('XADD', log, entry[1], unpack(entry[2])) end
end
-- take a channel off the count, its events and its `CHANNEL_COST`; returns the new total
local function forget(name)
  local total = account(name, -tonumber(redis.call('HGET', KEYS[5], name) or '0'))
  redis.call('HDEL', KEYS[5], name)
  redis.call('ZREM', KEYS[6], name)
  return total
end
-- forget channels whose log expired (their ttl after the end), oldest first, a few a call
local function sweep()
  for _, name in ipairs(redis.call('ZRANGE', KEYS[6], 0, 3)) do
    if redis.call('EXISTS', ARGV[7] .. 'log:' .. name) == 1 then return end
    forget(name)
  end
end
-- the channel written now, first in the least recently written order; new: its cost counted
local function touch()
  if redis.call('ZADD', KEYS[6], redis.call('INCR', KEYS[7]), ARGV[5]) == 1 then
    return account(ARGV[5], 2048)  -- CHANNEL_COST
  end
  return tonumber(redis.call('GET', KEYS[4]) or '0')
end
-- over the budget: other channels whose turn is not running give up their events, least
-- recently written first; then the writing channel its oldest (its newest stays)
local function make_room(total, log)
  local max = tonumber(ARGV[6])
  local start = 0
  while total > max do
    local names = redis.call('ZRANGE', KEYS[6], start, start + 31)
    if #names == 0 then break end
    for _, name in ipairs(names) do
      if total <= max then break end
      if name ~= ARGV[5] and redis.call('GET', ARGV[7] .. 'turn:' .. name) ~= 'running' then
        local other = ARGV[7] .. 'log:' .. name
        local last = redis.call('XREVRANGE', other, '+', '-', 'COUNT', 1)
        if ARGV[8] == '1' then
          remove(name)
        else  -- a reader still before its newest event has lost events: it ends
          redis.call('DEL', other)
          if #last > 0 then
            redis.call('SET', ARGV[7] .. 'dropped:' .. name, seq_of(last[1][1]), 'PX', ARGV[3])
          end
        end
        total = forget(name)
        start = start - 1
      end
    end
    start = start + #names
  end
  while total > max and redis.call('XLEN', log) > 1 do
    local count = math.min(32, redis.call('XLEN', log) - 1)
    total = drop(log, ARGV[5], redis.call('XRANGE', log, '-', '+', 'COUNT', count), true)
  end
  return total
end
"""

_PUBLISH: Final = (
    _BUDGET
    + """
if ARGV[9] ~= '0' and redis.call('EXISTS', KEYS[1]) == 0 then  -- as `begin` seeds it
  redis.call('SET', KEYS[1], ARGV[9])
end
local seq = redis.call('INCR', KEYS[1])
redis.call('XADD', KEYS[2], string.format('%d-0', seq), ARGV[4], ARGV[1])
touch()
local total = account(ARGV[5], string.len(ARGV[1]) + 64)
local over = redis.call('XLEN', KEYS[2]) - tonumber(ARGV[2])
if over > 0 then  -- the oldest go (a gap at the start only)
  total = drop(KEYS[2], ARGV[5], redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', over), false)
end
sweep()
if total > tonumber(ARGV[6]) then make_room(total, KEYS[2]) end
if redis.call('GET', KEYS[3]) == 'ended' then
  for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
end
return seq
"""
)

# ARGV[1]: the seq base for a missing counter; ARGV[2]: lease ms, or 0 for no lease;
# ARGV[3]: how long the turn's start (KEYS[4]) is kept, ms. A paused turn goes on: its
# start stays (a new turn's is the last seq).
_BEGIN: Final = """
local state = redis.call('GET', KEYS[3])
if ARGV[2] ~= '0' and state == 'running' then return -1 end
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], ARGV[1]) end
if ARGV[2] == '0' then
  redis.call('SET', KEYS[3], 'running')
else
  redis.call('SET', KEYS[3], 'running', 'PX', ARGV[2])
end
redis.call('PERSIST', KEYS[1])
redis.call('PERSIST', KEYS[2])
local start = redis.call('GET', KEYS[4])
if state ~= 'paused' or not start then start = redis.call('GET', KEYS[1]) end
redis.call('SET', KEYS[4], start, 'PX', ARGV[3])
return tonumber(start)
"""

_RENEW: Final = """
if redis.call('GET', KEYS[1]) ~= 'running' then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
"""

# The marker goes right after the last event: "<seq>-<n>", n one past any earlier marker.
# KEYS[8]: the turn's start; the finished turn's deltas are deleted (not a hole).
_END: Final = (
    _BUDGET
    + """
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = 1
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #last > 0 then
  local ms, sub = string.match(last[1][1], '^(%d+)-(%d+)$')
  if tonumber(ms) == seq then n = tonumber(sub) + 1 end
end
redis.call('XADD', KEYS[2], string.format('%d-%d', seq, n), 'end', '1')
touch()
drop_deltas(KEYS[2], ARGV[5], tonumber(redis.call('GET', KEYS[8]) or '0'))
redis.call('SET', KEYS[3], 'ended')
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
return seq
"""
)

# No marker: readers wait on. The keys (the start's too) are kept `PAUSE_KEPT` times the
# ttl (ARGV[10], ms); the next begin or acquire takes the ttl off again.
_PAUSE: Final = (
    _BUDGET
    + """
touch()
drop_deltas(KEYS[2], ARGV[5], tonumber(redis.call('GET', KEYS[8]) or '0'))
redis.call('SET', KEYS[3], 'paused')
for _, i in ipairs({1, 2, 3, 8}) do redis.call('PEXPIRE', KEYS[i], ARGV[10]) end
return 0
"""
)

_FORGET: Final = (
    _BUDGET
    + """
forget(ARGV[5])
remove(ARGV[5])
return 0
"""
)


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
        self._publish = client.register_script(_PUBLISH)
        self._begin = client.register_script(_BEGIN)
        self._renew = client.register_script(_RENEW)
        self._end = client.register_script(_END)
        self._pause = client.register_script(_PAUSE)
        self._forget = client.register_script(_FORGET)
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
