"""The Lua scripts the Redis bus runs server-side, and the byte budget's constants.

They live apart from `redis.py` (the bus's Python side) because each is one atomic
step of the Redis layout and byte budget that `redis.py`'s module doc describes:
a publish (INCR and XADD, the budget kept), `begin`/`acquire`, a lease's renewal,
`end`, `pause` and `forget`. `_BUDGET` holds the Lua functions the log scripts share.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BEGIN", "CHANNEL_COST", "END", "FORGET", "PAUSE", "PUBLISH", "RENEW"]

CHANNEL_COST: Final = 2048
"""What a channel costs in the byte budget besides its events (its keys; as the memory
bus counts it), so many small channels are bounded too (the scripts hold it as 2048)."""

# Shared by the scripts that add to or delete from logs: the byte budget (`redis.py`'s module doc).
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

PUBLISH: Final = (
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
BEGIN: Final = """
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

RENEW: Final = """
if redis.call('GET', KEYS[1]) ~= 'running' then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
"""

# The marker goes right after the last event: "<seq>-<n>", n one past any earlier marker.
# KEYS[8]: the turn's start; the finished turn's deltas are deleted (not a hole).
END: Final = (
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
PAUSE: Final = (
    _BUDGET
    + """
touch()
drop_deltas(KEYS[2], ARGV[5], tonumber(redis.call('GET', KEYS[8]) or '0'))
redis.call('SET', KEYS[3], 'paused')
for _, i in ipairs({1, 2, 3, 8}) do redis.call('PEXPIRE', KEYS[i], ARGV[10]) end
return 0
"""
)

FORGET: Final = (
    _BUDGET
    + """
forget(ARGV[5])
remove(ARGV[5])
return 0
"""
)
