"""The Lua scripts behind the event log: each one is a single atomic step in Redis.

Layout of one session's event log (``P`` is the key prefix, ``S`` the session id, inside a hash
tag so a session's keys share a cluster slot):

- ``P e:{S}`` a hash: field ``<stream>`` holds the stream's last seq, ``<stream>:d`` exists once
  the stream is done. A stream exists exactly while its field does.
- ``P e:{S}:<stream>`` a Redis stream. Event ``n`` (1-based, the interface's seq) has the
  entry id ``n-0`` and the fields ``t`` (append time, ms), ``m`` (the JSON message; absent
  for the priming event) and ``k`` (the appending call's write token, see ``APPEND``).
  Entries ``n-1``, ``n-2`` … are markers (``done``, ``gone``) written only to wake readers
  blocked in ``XREAD``; they carry no event.

A request stream served by a live process has a lease, ``P e:{S}:lease:<stream>``, renewed by that
process's heartbeat; the hash field ``<stream>:r`` holds the stream's request ids. A stream that
is not done and has lost its lease may belong to a process that died: ``SETTLE`` ends it with the
error replies the caller prepared ("send it again"), but only once the lapse has been seen for a
grace period *while Redis took writes*. The first ``SETTLE`` that finds the lease gone only notes
when (field ``<stream>:s``, Redis time) and the owner's next renewal erases the note. A lease can
also lapse because Redis refused writes for a while (out of memory, a read-only replica, failing
writes): then every process's writes failed, the note could not be written either, and the owner,
still running the request, renews within the grace once Redis takes writes again. So a renewal
failure never tells a client to resend a request that is still running; a dead process's streams
are settled a grace period later than its lease (RELIABILITY H12).

Retention: ``XADD … MAXLEN ~ N`` bounds the length, and events older than the maximum age are
trimmed with ``XTRIM MINID`` (the boundary found from the ``t`` fields, a few batches per
append, so the cost is spread over appends). Both keys expire when nothing is appended for the
maximum age.
"""

from __future__ import annotations

_HELPERS = """
local function split(id)
  local ms, sq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(sq)
end
local function marker(key, seq, what, now)
  -- the next id after the stream's last entry, in the ms part of the last event
  local id = seq .. '-1'
  local last = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)[1]
  if last then
    local ms, sq = split(last[1])
    if ms == seq then id = seq .. '-' .. (sq + 1) end
  end
  redis.call('XADD', key, id, 't', now, 'x', what)
end
"""

# KEYS: hash, stream. ARGV: stream id, ttl ms
OPEN = """
if redis.call('HSETNX', KEYS[1], ARGV[1], 0) == 1 then
  redis.call('DEL', KEYS[2])  -- the remains of a discarded stream of the same name
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

# KEYS: hash, stream. ARGV: stream id, payload ('' = priming), final ('1'/'0'), max length,
# now ms, cutoff ms, ttl ms, write token, retry ('1'/'0'). Returns the new seq, or -1 for an
# unknown stream.
# The token (kept in the entry's field ``k``) names one append: a retry after an attempt whose
# outcome was unknown (a timeout: Redis may have run it) passes the same token and retry '1',
# and gets the seq of the entry that attempt added, if it did (among the stream's last 64
# entries), instead of a second copy. Every append also looks at the last 4 entries for its
# token: an attempt that reaches Redis only after its own retry (both sat in sockets while Redis
# was stalled) is then the one that adds nothing.
APPEND = _HELPERS + """
local state = redis.call('HMGET', KEYS[1], ARGV[1], ARGV[1] .. ':d')
if not state[1] then return -1 end
local scan = 4
if ARGV[9] == '1' then scan = 64 end
for _, entry in ipairs(redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', scan)) do
  if entry[2][5] == 'k' and entry[2][6] == ARGV[8] then
    return tonumber(string.match(entry[1], '^(%d+)-'))
  end
end
local seq = tonumber(state[1]) + 1
local ending = ARGV[3] == '1' and not state[2]
if ending then
  redis.call('HSET', KEYS[1], ARGV[1], seq, ARGV[1] .. ':d', 1)
else
  redis.call('HSET', KEYS[1], ARGV[1], seq)
end
if ARGV[2] == '' then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], seq .. '-0', 't', ARGV[5])
else
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], seq .. '-0', 't', ARGV[5], 'm', ARGV[2], 'k', ARGV[8])
end
if ending then  -- the entry just added is the last: the marker follows it directly
  redis.call('XADD', KEYS[2], seq .. '-1', 't', ARGV[5], 'x', 'done')
end
local cutoff = tonumber(ARGV[6])
local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)[1]
if first and tonumber(first[2][2]) < cutoff then
  -- find the first entry young enough; at most 4 batches now, the rest on later appends
  local start = '-'
  local boundary = nil
  for round = 1, 4 do
    local batch = redis.call('XRANGE', KEYS[2], start, '+', 'COUNT', 128)
    if #batch == 0 then break end
    for _, entry in ipairs(batch) do
      if tonumber(entry[2][2]) >= cutoff then
        boundary = entry[1]
        break
      end
    end
    if boundary then break end
    local ms, sq = split(batch[#batch][1])
    start = ms .. '-' .. (sq + 1)
    if round == 4 then boundary = start end
  end
  if boundary then redis.call('XTRIM', KEYS[2], 'MINID', boundary) end
end
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('PEXPIRE', KEYS[2], ARGV[7])
return seq
"""

# KEYS: hash, stream. ARGV: stream id, now ms, ttl ms. Returns 1, or -1 for an unknown stream.
FINISH = _HELPERS + """
local last = redis.call('HGET', KEYS[1], ARGV[1])
if not last then return -1 end
if redis.call('HSETNX', KEYS[1], ARGV[1] .. ':d', 1) == 1 then
  marker(KEYS[2], tonumber(last), 'done', ARGV[2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
"""

# KEYS: hash, stream. ARGV: stream id, after, count.
# Returns {-1} (unknown stream or position, or trimmed), or {0, done, seq, payload, seq, payload…}.
READ = """
local last = redis.call('HGET', KEYS[1], ARGV[1])
if not last then return {-1} end
last = tonumber(last)
local after = tonumber(ARGV[2])
if after > last or after < 0 then return {-1} end
local done = redis.call('HEXISTS', KEYS[1], ARGV[1] .. ':d')
local firstkept = last + 1
local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)[1]
if first then
  local ms, sq = string.match(first[1], '^(%d+)-(%d+)$')
  firstkept = tonumber(ms)
  if sq ~= '0' then firstkept = firstkept + 1 end
end
if after < firstkept - 1 then return {-1} end
local out = {0, 0}
if after == last then
  out[2] = done
  return out
end
local seen = after
local batch = redis.call('XRANGE', KEYS[2], (after + 1) .. '-0', '+', 'COUNT', ARGV[3])
for _, entry in ipairs(batch) do
  local ms, sq = string.match(entry[1], '^(%d+)-(%d+)$')
  if sq == '0' then
    seen = tonumber(ms)
    out[#out + 1] = seen
    out[#out + 1] = entry[2][4] or ''
  end
end
if seen == last then out[2] = done end
return out
"""

# Discarding a stream: a stream that is done has no blocked reader (a read of a done stream
# returns at once), so it simply goes; one that is not done gets a ``gone`` marker first, to wake
# the readers blocked in XREAD, who then find it gone, and goes two seconds later.
_DISCARD = """
local function discard(hash, key, id, now)
  local state = redis.call('HMGET', hash, id, id .. ':d')
  if not state[1] then return 0 end
  redis.call('HDEL', hash, id, id .. ':d', id .. ':r', id .. ':s')
  if state[2] then
    redis.call('DEL', key)
  else
    marker(key, tonumber(state[1]), 'gone', now)
    redis.call('PEXPIRE', key, 2000)
  end
  return 1
end
"""

# KEYS: hash, stream. ARGV: stream id, now ms.
DISCARD = _HELPERS + _DISCARD + """
return discard(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
"""

# KEYS: hash, stream, lease, then the streams to discard first. ARGV: stream id, request ids (JSON;
# '' for no lease), lease ms, max length, now ms, ttl ms, then the ids of the streams to discard.
# Opens the stream (afresh: the remains of a discarded one of the same name go), takes its lease
# and appends the priming event: what a request stream needs before anything runs, in one step.
# Returns the priming event's seq (1 unless the stream was open already).
BEGIN = _HELPERS + _DISCARD + """
for i = 4, #KEYS do discard(KEYS[1], KEYS[i], ARGV[i + 3], ARGV[5]) end
local seq = 1
if redis.call('HSETNX', KEYS[1], ARGV[1], 1) == 1 then
  redis.call('DEL', KEYS[2])
else
  seq = tonumber(redis.call('HGET', KEYS[1], ARGV[1])) + 1
  redis.call('HSET', KEYS[1], ARGV[1], seq)
  redis.call('HDEL', KEYS[1], ARGV[1] .. ':s')
end
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[1] .. ':r', ARGV[2])
  redis.call('SET', KEYS[3], 1, 'PX', ARGV[3])
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], seq .. '-0', 't', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return seq
"""

# KEYS: hash. ARGV: stream key prefix, now ms. Every stream of the session goes.
DROP = _HELPERS + """
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local name = fields[i]
  local suffix = string.sub(name, -2)
  if suffix ~= ':d' and suffix ~= ':r' and suffix ~= ':s' then
    local key = ARGV[1] .. name
    marker(key, tonumber(fields[i + 1]), 'gone', ARGV[2])
    redis.call('PEXPIRE', key, 2000)
  end
end
redis.call('DEL', KEYS[1])
return 1
"""

# KEYS: hash, lease. ARGV: stream id, request ids (JSON), ttl ms. Returns 0 for an unknown stream.
# The owner is alive: a lapse another process noted (``<stream>:s``) is forgotten.
LEASE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1] .. ':r', ARGV[2])
redis.call('HDEL', KEYS[1], ARGV[1] .. ':s')
redis.call('SET', KEYS[2], 1, 'PX', ARGV[3])
return 1
"""

# KEYS: hash, lease. ARGV: stream id. The request ids (JSON) of a stream whose lease is gone
# while it is not done; nil otherwise.
ORPHANED = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return false end
if redis.call('HEXISTS', KEYS[1], ARGV[1] .. ':d') == 1 then return false end
if redis.call('EXISTS', KEYS[2]) == 1 then return false end
return redis.call('HGET', KEYS[1], ARGV[1] .. ':r')
"""

# KEYS: hash, stream, lease. ARGV: stream id, now ms, ttl ms, grace ms, messages… Appends the
# messages and ends the stream, only if it is still orphaned and has been for the grace period,
# counted from when a settle first found it so (one process settles it, once). Returns 1 when
# settled, 0 when not orphaned, -1 when orphaned for less than the grace (noted now or before).
SETTLE = _HELPERS + """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('HEXISTS', KEYS[1], ARGV[1] .. ':d') == 1 then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local clock = redis.call('TIME')  -- Redis's clock: the processes' clocks may disagree
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local seen = tonumber(redis.call('HGET', KEYS[1], ARGV[1] .. ':s'))
if not seen then
  redis.call('HSET', KEYS[1], ARGV[1] .. ':s', now)
  return -1
end
if now - seen < tonumber(ARGV[4]) then return -1 end
redis.call('HDEL', KEYS[1], ARGV[1] .. ':s')
local seq = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
for i = 5, #ARGV do
  seq = seq + 1
  redis.call('XADD', KEYS[2], seq .. '-0', 't', ARGV[2], 'm', ARGV[i])
end
redis.call('HSET', KEYS[1], ARGV[1], seq)
redis.call('HSET', KEYS[1], ARGV[1] .. ':d', 1)
marker(KEYS[2], seq, 'done', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
"""


# Key rings shared by every process (the requestState sealing key). A ring is a JSON list,
# newest first, of {"k": hex secret, "f": ms from which the key may sign}.

# KEYS: ring. ARGV: hex secret, now ms. The ring, created with this one key if there is none.
KEYRING = """
local raw = redis.call('GET', KEYS[1])
if raw then return raw end
raw = cjson.encode({{k = ARGV[1], f = tonumber(ARGV[2])}})
redis.call('SET', KEYS[1], raw)
return raw
"""

# KEYS: ring. ARGV: hex secret, now ms, activate in ms, keep ms. Prepends a key that signs from
# now + activate-in (at once on an empty ring), drops keys superseded more than keep ago.
ROTATE = """
local raw = redis.call('GET', KEYS[1])
local ring = {}
if raw then ring = cjson.decode(raw) end
local now = tonumber(ARGV[2])
local from = now + tonumber(ARGV[3])
if #ring == 0 then from = now end
local out = {{k = ARGV[1], f = from}}
local newer = nil
for _, key in ipairs(ring) do
  if newer and newer.f + tonumber(ARGV[4]) < now then break end
  out[#out + 1] = key
  newer = key
end
raw = cjson.encode(out)
redis.call('SET', KEYS[1], raw)
return raw
"""


# Sessions. ``P s:<id>`` holds the state; ``P sessions`` is the expiry index (id scored by the
# ms its idle time runs out). The index decides: a session whose score is past is expired even
# while its key lingers (the key outlives it by a grace period, so the reaper can hand the state
# to the terminate hook). Whoever removes an id from the index owns its ending: exactly one.

# KEYS: index. ARGV: state key prefix, subscription key prefix, now ms, max count. Returns {id,
# state, subscriptions, id, state, subscriptions, ...} of the sessions it took out of the index
# (state '' when the key was already gone); both keys go.
REAP = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[3], 'LIMIT', 0, tonumber(ARGV[4]))
local out = {}
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  local key = ARGV[1] .. id
  local subs = ARGV[2] .. id
  out[#out + 1] = id
  out[#out + 1] = redis.call('GET', key) or ''
  out[#out + 1] = redis.call('SMEMBERS', subs)
  redis.call('DEL', key, subs)
end
return out
"""

# KEYS: state, index, subscriptions. ARGV: id, now ms, expiry ms (absolute), key ttl ms. 1 when the
# session is alive (its idle time restarted, its subscriptions kept as long), 0 when it is gone or
# already expired.
TOUCH = """
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) <= tonumber(ARGV[2]) then return 0 end
if redis.call('PEXPIRE', KEYS[1], ARGV[4]) == 0 then return 0 end
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
"""

# A session's resource subscriptions live beside its state, in the set ``P u:<id>``, so that
# subscribing writes one member instead of the whole state (RELIABILITY H5). The set expires
# with the state (every save and touch renews both) and is deleted with it.

# KEYS: subscriptions, state. ARGV: uri, max count, key ttl ms. 1 when the session follows ``uri``
# (added now or before), 0 when it already follows the maximum: the budget holds atomically,
# whichever processes subscribe at once.
SUBSCRIBE = """
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 1 end
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('SADD', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[2])
if ttl <= 0 then ttl = ARGV[3] end
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
"""

# KEYS: state, subscriptions. ARGV: the state as read, the state without its subscriptions, uris...
# Moves the subscriptions a state written by an earlier version holds inline into the set, once,
# only if the state is still what was read (a concurrent save wins).
MIGRATE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
if #ARGV > 2 then
  redis.call('SADD', KEYS[2], unpack(ARGV, 3))
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
end
return 1
"""

# Holds: a key owned by one holder for a while (the one standalone GET stream of a session).
# KEYS: hold. ARGV: owner, ttl ms. 1 when taken or renewed by its owner, 0 when someone else holds it.
HOLD = """
local owner = redis.call('GET', KEYS[1])
if owner and owner ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

# KEYS: hold. ARGV: owner. Lets go only of what this owner holds.
UNHOLD = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""

# -- budget allowances (mcphost.budgets.BudgetShare) ------------------------------------------------
#
# ``P l:<budget>:<principal>``: a hash, one field per process holding an allowance of that
# principal's budget, valued ``units:deadline:seq`` (deadline in Redis milliseconds, seq the
# process's write counter: an older write than the one recorded is ignored). A field past its
# deadline (its process stopped renewing) no longer counts and is removed by the next script that
# reads the hash. The key itself expires with its latest deadline. Both scripts answer, per key,
# what the other processes hold, so a process knows how much room its principal has.
_ALLOWANCES = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function parse(value)
  local units, deadline, seq = string.match(value or '', '^(%d+):(%d+):(%d+)$')
  return tonumber(units), tonumber(deadline), tonumber(seq)
end
-- What the live fields other than ``node``'s hold together, and the seq of ``node``'s own field
-- (-1: none); removes the fields that expired, and makes the key expire with the latest deadline.
local function tally(key, node, now)
  local others, mine_seq, latest = 0, -1, 0
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    local units, deadline, s = parse(fields[i + 1])
    if fields[i] == node then
      mine_seq = s or -1
      if deadline and deadline > latest then latest = deadline end
    elseif not units or deadline <= now then
      redis.call('HDEL', key, fields[i])
    else
      others = others + units
      if deadline > latest then latest = deadline end
    end
  end
  if latest > now then redis.call('PEXPIRE', key, latest - now) end
  return others, mine_seq
end
"""

# KEYS: the allowances hash. ARGV: process, want, need, limit, ttl ms, seq, spare.
# Sets the process's allowance to min(want, limit - the others' live allowances) when that is at
# least ``need``, plus up to ``spare`` units but never more than half of what stays free (so the
# other processes always find room while the principal is not near its limit). Returns {the
# allowance, or -1 when refused (nothing changed), what the others hold}.
BUDGET_LEASE = _ALLOWANCES + """
local now = now_ms()
local node, want, need = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local limit, ttl, seq = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local spare = tonumber(ARGV[7] or '0')
local others, mine_seq = tally(KEYS[1], node, now)
if seq < mine_seq then return {-1, others} end
local free = limit - others
local grant = math.min(want, free)
if grant < need then return {-1, others} end
grant = grant + math.max(0, math.min(spare, math.floor((free - grant) / 2)))
redis.call('HSET', KEYS[1], node, grant .. ':' .. (now + ttl) .. ':' .. seq)
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return {grant, others}
"""

# KEYS: allowances hashes. ARGV: process, ttl ms, seq, then one unit count per key (0: drop it).
# Records what the process holds, whatever the limit, and renews it (a write older than the one
# recorded is skipped); returns what the others hold, per key.
BUDGET_SETTLE = _ALLOWANCES + """
local now = now_ms()
local node, ttl, seq = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local answer = {}
for i, key in ipairs(KEYS) do
  local units = tonumber(ARGV[3 + i])
  local others, mine_seq = tally(key, node, now)
  if mine_seq <= seq then
    if units > 0 then
      redis.call('HSET', key, node, units .. ':' .. (now + ttl) .. ':' .. seq)
      if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
    else
      redis.call('HDEL', key, node)
    end
  end
  answer[i] = others
end
return answer
"""
