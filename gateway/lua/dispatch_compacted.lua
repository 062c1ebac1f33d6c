--[[ dispatch_compacted: dispatch for a read_compacted subscription, up to the horizon.

Pulsar (CompactedTopicImpl): a read_compacted cursor at or before the compaction horizon
reads the compacted ledger, then the topic after the horizon. Here the subscription stays
one consumer group on the topic's stream, so acks, cumulative acks, redelivery, release and
reaping work unchanged; only what is delivered up to the horizon differs:

* an entry of the compacted view is claimed into the group's pending list by setting the
  cursor just before its id and reading one entry (XGROUP SETID + XREADGROUP), and
  delivered with the view's fields (the rewritten batch and its ack_set);
* topic entries between view entries are skipped by moving the cursor past them: they are
  compacted out, so the subscription has consumed them;
* a view entry already trimmed from the topic by retention is delivered without entering
  the pending list (it cannot: the group can only own existing entries) and the cursor
  moves past it;
* a parked redelivery at or before the horizon is delivered from the view, or acknowledged
  if a later compaction dropped it.
When nothing at or before the horizon is left for this consumer the script answers code 3
and the caller runs the ordinary dispatch (dispatch.lua) for what follows the horizon.

KEYS[1] topic stream        KEYS[2] consumers zset (uid -> lease expiry ms)
KEYS[3] compaction hash (field `horizon`)      KEYS[4] compacted view stream
ARGV[1] subscription name   ARGV[2] consumer uid   ARGV[3] permits (messages)
ARGV[4] expected messages per entry (>= 1)     ARGV[5] lease ms     ARGV[6] parked consumer

Returns {code, id1, fields1, redelivery_count1, ...} as dispatch.lua
  code 0 OK; 2 consumer gone; 3 nothing here: use dispatch.lua
]]
local stream, consumers, compaction, view = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local group, uid, parked = ARGV[1], ARGV[2], ARGV[6]
local remaining = tonumber(ARGV[3])
local per_entry = math.max(1, tonumber(ARGV[4]))

local horizon = redis.call('HGET', compaction, 'horizon')
if not horizon or horizon == '' then return {3} end
if not redis.call('ZSCORE', consumers, uid) then return {2} end
redis.call('ZADD', consumers, 'XX', now_ms() + tonumber(ARGV[5]), uid)

-- the stream id just before `id` ("ms-seq" -> "ms-(seq-1)" or "(ms-1)-MAX")
local function before(id)
  local ms, seq = split_id(id)
  if seq > 0 then return string.format('%d-%d', ms, seq - 1) end
  return string.format('%d-18446744073709551615', ms - 1)
end

local function view_entry(id)
  local rows = redis.call('XRANGE', view, id, id)
  return rows[1] and rows[1][2]
end

local out = {0}

-- 1. parked redeliveries at or before the horizon, from the view
while remaining > 0 do
  local pending = redis.call('XPENDING', stream, group, '-', horizon, math.min(remaining, 100), parked)
  if #pending == 0 then break end
  for _, p in ipairs(pending) do
    if remaining <= 0 then break end
    local fields = view_entry(p[1])
    -- plain XCLAIM counts a delivery, as dispatch.lua's does
    local claimed = redis.call('XCLAIM', stream, group, uid, 0, p[1])[1]
    if fields and claimed and claimed[2] then
      out[#out + 1] = p[1]
      out[#out + 1] = fields
      out[#out + 1] = p[4]
      remaining = remaining - entry_size(fields)
    else
      redis.call('XACK', stream, group, p[1])  -- compacted out since, or gone
    end
  end
end

-- 2. the view after the cursor, up to the horizon
local cursor = last_delivered(stream, group)
if cursor and id_less(cursor, horizon) then
  local first = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)[1]
  while remaining > 0 do
    local want = math.max(1, math.floor(remaining / per_entry))
    local rows = redis.call('XRANGE', view, '(' .. cursor, horizon, 'COUNT', want)
    for _, row in ipairs(rows) do
      if remaining <= 0 then break end
      local id, fields = row[1], row[2]
      if first and not id_less(id, first[1]) then
        redis.call('XGROUP', 'SETID', stream, group, before(id))
        redis.call('XREADGROUP', 'GROUP', group, uid, 'COUNT', 1, 'STREAMS', stream, '>')
      else
        redis.call('XGROUP', 'SETID', stream, group, id)
      end
      out[#out + 1] = id
      out[#out + 1] = fields
      out[#out + 1] = 0
      remaining = remaining - entry_size(fields)
      cursor = id
    end
    if #rows < want and remaining > 0 then
      -- the view is exhausted: everything else up to the horizon is compacted out
      redis.call('XGROUP', 'SETID', stream, group, horizon)
      break
    end
    if #rows == 0 then break end
  end
end

if #out == 1 then return {3} end
return out
