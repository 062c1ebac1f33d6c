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
* a view entry's ack set (the `a` field: which messages of a partly compacted batch are
  delivered) is combined with the subscription's own batch-index ack state.
When nothing at or before the horizon is left for this consumer the script answers code 100
and the caller runs the ordinary dispatch (dispatch.lua) for what follows the horizon.

KEYS: the subscription keys (lib.lua sub_keys), then the compaction hash (field `horizon`)
and the compacted view stream as the last two
ARGV: as dispatch.lua: [1] subscription name [2] consumer uid [3] permits (messages)
[4] expected messages per entry [5] lease ms [6] subscription type ('2' = Failover)
[7] partition index

Returns as dispatch.lua: {0, 0, -1, {}, now, -1, id, fields, redelivery_count, ack set or '', ...};
  code 2 consumer gone; 6 not the active Failover consumer, then the active uid;
  100 nothing at or before the horizon: use dispatch.lua
]]
local k = sub_keys()
local compaction, view = KEYS[#KEYS - 1], KEYS[#KEYS]
local group, uid, parked = ARGV[1], ARGV[2], PARKED
local remaining = tonumber(ARGV[3])
local per_entry = math.max(1, tonumber(ARGV[4]))

local horizon = redis.call('HGET', compaction, 'horizon')
if not horizon then return {100} end
local refused = lease_and_active(k, group, uid, ARGV[5], ARGV[6], ARGV[7])
if refused then return refused end

-- the stream id just before `id` ("L-E" -> "L-(E-1)" or "(L-1)-MAX")
local function before(id)
  local ms, seq = split_id(id)
  if seq > 0 then return string.format('%d-%d', ms, seq - 1) end
  return string.format('%d-18446744073709551615', ms - 1)
end

local function view_entry(id)
  local rows = redis.call('XRANGE', view, id, id)
  return rows[1] and rows[1][2]
end

-- "1" where both ack sets deliver (either may be absent; a missing char is "0")
local function both(a, b)
  if not a then return b end
  if not b then return a end
  local out = {}
  for i = 1, math.max(#a, #b) do
    out[i] = (string.sub(a, i, i) == '1' and string.sub(b, i, i) == '1') and '1' or '0'
  end
  return table.concat(out)
end

local out = dispatch_reply({}, now_ms())

-- Append a view entry; returns the permits it costs.
local function deliver(id, fields, redeliveries, own_ackset)
  return append_delivery(out, id, fields, redeliveries, both(field(fields, F_ACK_SET), own_ackset))
end

-- 1. parked redeliveries at or before the horizon, from the view
while remaining > 0 do
  local pending = redis.call('XPENDING', k.stream, group, '-', horizon, math.min(remaining, 100), parked)
  if #pending == 0 then break end
  for _, p in ipairs(pending) do
    if remaining <= 0 then break end
    local fields = view_entry(p[1])
    -- plain XCLAIM counts a delivery, as dispatch.lua's does
    local claimed = redis.call('XCLAIM', k.stream, group, uid, 0, p[1])[1]
    if fields and claimed and claimed[2] then
      local own = redis.call('HGET', k.acksets, p[1])
      remaining = remaining - deliver(p[1], fields, p[4], own or nil)
    else
      -- compacted out by a later compaction, or gone
      redis.call('XACK', k.stream, group, p[1])
      redis.call('HDEL', k.acksets, p[1])
    end
  end
end

-- 2. the view after the cursor, up to the horizon
local cursor = last_delivered(k.stream, group)
if cursor and id_less(cursor, horizon) then
  local first = redis.call('XRANGE', k.stream, '-', '+', 'COUNT', 1)[1]
  while remaining > 0 do
    local want = math.max(1, math.floor(remaining / per_entry))
    local rows = redis.call('XRANGE', view, '(' .. cursor, horizon, 'COUNT', want)
    for _, row in ipairs(rows) do
      if remaining <= 0 then break end
      local id, fields = row[1], row[2]
      if first and not id_less(id, first[1]) then
        redis.call('XGROUP', 'SETID', k.stream, group, before(id))
        redis.call('XREADGROUP', 'GROUP', group, uid, 'COUNT', 1, 'STREAMS', k.stream, '>')
      else
        redis.call('XGROUP', 'SETID', k.stream, group, id)
      end
      remaining = remaining - deliver(id, fields, 0, nil)
      cursor = id
    end
    if #rows < want and remaining > 0 then
      -- the view is exhausted: everything else up to the horizon is compacted out
      redis.call('XGROUP', 'SETID', k.stream, group, horizon)
      break
    end
    if #rows == 0 then break end
  end
end

if deliveries_in(out) == 0 then return {100} end
return out
