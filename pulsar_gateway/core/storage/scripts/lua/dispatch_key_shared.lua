--[[ dispatch_key_shared: hand up to `permits` messages of a Key_Shared subscription to one
consumer, each key only ever to the consumer whose hash range covers it, in order.

An entry's sticky-key hash is its `h` field (0..65535, Murmur3 of the ordering key, else
the partition key; pulsar_gateway/core/model/key_shared.py). Entries without one go to whichever consumer
asks, as on a Shared subscription. Entries read for another consumer wait at the reserved
consumer WAITING .. owner until that consumer asks (its permits, its gateway); hashes no
consumer covers (STICKY gaps) wait at NO_OWNER until a consumer covering them joins.

Order of work, which is what keeps each key in order:
  1. route parked entries (redeliveries, and entries no consumer covered, handed back when
     a consumer joined) to their owners' waiting queues, oldest first, then scheduled messages now
     due; if more are parked or due than one call scans, stop after step 2 so nothing
     newer overtakes them;
  2. send this consumer's waiting entries, oldest first;
  3. read new entries, sending this consumer's, queueing the others', while fewer than
     LOOKAHEAD entries wait in total (Pulsar keySharedLookAheadMsgInReplayThreshold);
     entries whose deliver-at time is ahead are scheduled (lib.lua "Delayed delivery").
A recently joined consumer (join position in KEYS.joined) only gets entries up to its
join position until every entry up to there is acknowledged (scheduled messages aside):
its keys may still have unacked messages at the consumer that had them before (Pulsar's
recently-joined rule). A scheduled message is delivered when due, so it may overtake later
messages of its key, as in Pulsar.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] consumer uid   ARGV[3] permits (messages)
ARGV[4] expected messages per entry (>= 1)   ARGV[5] lease ms
ARGV[6..9] the unacked limits, as dispatch.lua's ARGV[9..12]

Returns {code, moved, next_due, late, now, room, ...}
  code 0 OK; moved 1 when entries were queued for other consumers or scheduled ahead of
  the earliest one before (wake the other gateways); next_due as dispatch.lua's; late: for
  each scheduled message this call took out of the index (to be sent to its key's owner),
  ms between its deliver-at time and now; now: Redis's clock (ms); room as dispatch.lua's;
  then per delivery: id, fields, redelivery_count, ack set ('' = none)
  code 2 consumer gone (its lease expired and it was reaped: close it)
  code 7 over an unacked limit (as dispatch.lua's)
]]
local SCAN = 200
local READ_LIMIT = 1000
local LOOKAHEAD = 20000

local k = sub_keys()
local group, uid, parked = ARGV[1], ARGV[2], PARKED
local remaining = tonumber(ARGV[3])
local per_entry = math.max(1, tonumber(ARGV[4]))

local refused = lease_and_active(k, group, uid, ARGV[5], '3', -1)
if refused then return refused end

local map = range_map(k)
local mine = WAITING .. uid
local late = {}
local now = now_ms()
local out = dispatch_reply(late, now)

local summary = redis.call('XPENDING', k.stream, group)
local room
refused, room = unacked_check(k, group, uid, ARGV, 6, summary)
if refused then return refused end
if room >= 0 then remaining = math.min(remaining, room * per_entry) end
local joinpos = redis.call('HGET', k.joined, uid)
if joinpos then
  -- the oldest unacked entry, scheduled ones aside (they are not at any consumer)
  local oldest = nil
  for _, c in ipairs(summary[4] or {}) do
    if c[1] ~= DELAYED then
      local p = redis.call('XPENDING', k.stream, group, '-', '+', 1, c[1])[1]
      if p and (oldest == nil or id_less(p[1], oldest)) then oldest = p[1] end
    end
  end
  if oldest == nil or id_less(joinpos, oldest) then
    redis.call('HDEL', k.joined, uid)
    joinpos = nil
  end
end

-- queue for: nil = send to this consumer now
local function route(fields)
  local h = field(fields, F_KEY_HASH)
  if not h then return nil end
  local owner = owner_of(map, tonumber(h))
  if owner == nil then return NO_OWNER end
  if owner ~= uid then return WAITING .. owner end
  if joinpos then return mine end
  return nil
end

-- 1. parked entries to their owners
local scanned = redis.call('XPENDING', k.stream, group, '-', '+', SCAN, parked)
for _, p in ipairs(scanned) do
  local entry = redis.call('XRANGE', k.stream, p[1], p[1])
  if entry[1] then
    local target = route(entry[1][2]) or mine
    claim_justid(k.stream, group, target, {p[1]})
    if target ~= mine then out[2] = 1 end
  else
    redis.call('XACK', k.stream, group, p[1])
    redis.call('HDEL', k.acksets, p[1])
  end
end
local truncated = #scanned == SCAN

-- 1b. scheduled messages now due, to their owners
local earliest = next_due(k, now)
if not truncated and earliest == 0 then
  local due = redis.call('ZRANGEBYSCORE', k.delayed, '-inf', now, 'WITHSCORES', 'LIMIT', 0, SCAN)
  local members = {}
  for i = 1, #due, 2 do
    local member = due[i]
    members[#members + 1] = member
    local id = member_id(member)
    local entry = redis.call('XRANGE', k.stream, id, id)
    if entry[1] then
      local target = route(entry[1][2]) or mine
      claim_justid(k.stream, group, target, {id})
      if target ~= mine then out[2] = 1 end
      late[#late + 1] = now - tonumber(due[i + 1])
    else
      redis.call('XACK', k.stream, group, id)
    end
  end
  if #members > 0 then redis.call('ZREM', k.delayed, unpack(members)) end
  truncated = #members == SCAN
  earliest = next_due(k, now)
end

-- 2. this consumer's waiting entries
local blocked = false
while remaining > 0 and not blocked do
  local pending = redis.call('XPENDING', k.stream, group, '-', '+', math.min(remaining, 100), mine)
  if #pending == 0 then break end
  for _, p in ipairs(pending) do
    if remaining <= 0 then break end
    if joinpos and id_less(joinpos, p[1]) then
      blocked = true
      break
    end
    local used = claim_and_emit(k, group, uid, p[1], p[4], out)
    if used then remaining = remaining - used end
  end
end

-- 3. new entries
local waiting = 0
for _, c in ipairs(summary[4] or {}) do
  if string.sub(c[1], 1, #WAITING) == WAITING then waiting = waiting + tonumber(c[2]) end
end
local schedule = new_schedule(k, group)
if not truncated then
  read_new(k, group, uid, remaining, per_entry, READ_LIMIT, function(entry)
    if held_back(schedule, entry, now) then return 0 end
    local target = route(entry[2])
    if not target then return emit(out, entry[1], entry[2], 0, nil) end
    -- read but not sent: the delivery XREADGROUP counted is taken back
    claim_justid(k.stream, group, target, {entry[1]}, 0)
    waiting = waiting + 1
    if target ~= mine then out[2] = 1 end
    return 0
  end, function() return waiting >= LOOKAHEAD or schedule.full() end)
end
local moved
moved, out[3] = schedule_reply(k, now, schedule, earliest)
if truncated then out[3] = 0 end
if moved == 1 then out[2] = 1 end
return out
