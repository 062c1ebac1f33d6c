--[[ topic_maintenance: one topic's message TTL and retention, in one step of a round.

Pulsar semantics (cookbooks-retention-expiry; PersistentMessageExpiryMonitor,
ManagedLedgerImpl.internalTrimConsumedLedgers), on a stream:
  * TTL: an entry older than the TTL is acknowledged on every subscription, unacked or not
    (Pulsar moves the mark-delete position past it): its pending entries are XACKed and a
    group cursor behind it is moved past it. Age comes from the entry's publish time (the
    producer's clock, as MessageImpl.isEntryExpired reads it with Pulsar's broker entry
    metadata off, its default; lib.lua first_published_at finds where the expired ones
    end). Retention below goes by the broker timestamp, as Pulsar's goes by ledger times.
  * Retention: entries consumed by every subscription (before each group's oldest pending
    entry and after none of its cursors) and, once the topic was compacted, at or before the
    compaction horizon, are removed oldest first while older than the retention time
    (minutes >= 0) or while the stream is larger than the retention size (MB >= 0). Either
    limit at -1 is infinite. Unconsumed entries are never removed here.
  * A topic without subscriptions is trimmed only when ARGV[6] is '1' (an explicit retention
    policy); otherwise nothing of it is removed (docs/lifecycle.md explains why).

Work is bounded by ARGV[7] entries per call; `more` = 1 asks the caller to call again.

KEYS[1] topic stream          KEYS[2] subscriptions hash      KEYS[3] maintenance lock
KEYS[4] compaction hash (field `horizon`)
ARGV[1] owner (gateway id)    ARGV[2] lock time ms (the round interval)
ARGV[3] message TTL seconds (0 = off)
ARGV[4] retention minutes (-1 infinite)   ARGV[5] retention MB (-1 infinite)
ARGV[6] '1' to trim a topic that has no subscriptions
ARGV[7] budget: most entries to expire or remove in this call

Returns {code, expired, trimmed, more}
  code 0 done; 1 skipped: another gateway owns this topic's round
  expired: entries acknowledged by TTL, summed over subscriptions
  trimmed: entries removed from the stream
]]
local stream, lock, compaction = KEYS[1], KEYS[3], KEYS[4]

local owner = ARGV[1]
local ttl_s = tonumber(ARGV[3])
local keep_min, keep_mb = tonumber(ARGV[4]), tonumber(ARGV[5])
local trim_unsubscribed = ARGV[6] == '1'
local budget = tonumber(ARGV[7])

if not redis.call('SET', lock, owner, 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', lock) ~= owner then return {1, 0, 0, 0} end
end
if redis.call('EXISTS', stream) == 0 then return {0, 0, 0, 0} end

local now = now_ms()
local expired, trimmed, more = 0, 0, 0

local groups = group_cursors(stream)

-- 1. TTL: acknowledge what is older than the TTL on every subscription
if ttl_s > 0 then
  -- by publish time, as Pulsar's PersistentMessageExpiryMonitor (MessageImpl.isEntryExpired)
  local cutoff = published_before(stream, now - ttl_s * 1000)
  for _, g in ipairs(groups) do
    if budget <= 0 then more = 1; break end
    local name, want = g[1], budget
    local pending = redis.call('XPENDING', stream, name, '-', cutoff, want)
    if #pending > 0 then
      local args = {'XACK', stream, name}
      for _, p in ipairs(pending) do args[#args + 1] = p[1] end
      expired = expired + redis.call(unpack(args))
      budget = budget - #pending
      if #pending == want then more = 1 end
    end
    if budget > 0 then
      local skipped = redis.call('XRANGE', stream, '(' .. g[2], cutoff, 'COUNT', budget)
      if #skipped > 0 then
        redis.call('XGROUP', 'SETID', stream, name, skipped[#skipped][1])
        g[2] = skipped[#skipped][1]
        expired = expired + #skipped
        budget = budget - #skipped
        if budget <= 0 then more = 1 end
      end
    end
  end
end

-- 2. Retention: only entries every subscription has consumed
if (#groups > 0 or trim_unsubscribed) and budget > 0 and (keep_min >= 0 or keep_mb >= 0) then
  -- `bound`: the first entry that must stay (nil: every entry is consumed)
  local bound
  local function keep_from(id)
    if id and (bound == nil or id_less(id, bound)) then bound = id end
  end
  local function after(id)
    local next_entry = redis.call('XRANGE', stream, '(' .. id, '+', 'COUNT', 1)[1]
    return next_entry and next_entry[1]
  end
  for _, g in ipairs(groups) do
    local summary = redis.call('XPENDING', stream, g[1])
    if tonumber(summary[1]) > 0 then keep_from(summary[2]) else keep_from(after(g[2])) end
  end
  -- Once compacted, the compactor is a reader that has consumed up to its horizon
  -- (Pulsar's __compaction subscription): later entries wait for the next compaction.
  local horizon = redis.call('HGET', compaction, 'horizon')
  if horizon and horizon ~= '' then keep_from(after(horizon)) end

  -- the removable prefix, at most `budget` entries (+1 to see where it ends)
  local head
  if bound then
    head = redis.call('XRANGE', stream, '-', '(' .. bound, 'COUNT', budget + 1)
  else
    head = redis.call('XRANGE', stream, '-', '+', 'COUNT', budget + 1)
  end
  -- where the kept part starts when all of `head` goes (nil: the stream's end)
  local stop = bound
  if #head > budget then
    more = 1
    stop = head[#head][1]
    head[#head] = nil
  end

  -- Remove head[1..i] (those before `removed` are gone already).
  local removed = 0
  local function remove_through(i)
    if i <= removed then return end
    local first_kept = (head[i + 1] and head[i + 1][1]) or stop
    if first_kept then
      trimmed = trimmed + redis.call('XTRIM', stream, 'MINID', first_kept)
    else
      local ids = {'XDEL', stream}
      for j = removed + 1, i do ids[#ids + 1] = head[j][1] end
      trimmed = trimmed + redis.call(unpack(ids))
    end
    removed = i
  end
  -- time: age > retention time (entries are in time order, so a prefix)
  if keep_min >= 0 then
    local cut = now - keep_min * 60000
    local i = 0
    while i < #head and entry_time(head[i + 1]) < cut do i = i + 1 end
    remove_through(i)
  end
  -- size: the oldest consumed entries go while the stream is over the size limit, as
  -- Redis measures it (MEMORY USAGE: what the stream really costs, allocator included;
  -- sampled, so each call is cheap)
  if keep_mb >= 0 then
    local limit = keep_mb * 1048576
    while removed < #head and (redis.call('MEMORY', 'USAGE', stream) or 0) > limit do
      remove_through(removed + 1)
    end
  end
end

return {0, expired, trimmed, more}
