--[[ dispatch: hand up to `permits` messages of an Exclusive, Shared or Failover subscription
to one consumer.

Redeliveries (entries owned by the parked consumer) go first, oldest id first; then, on a
Shared subscription, scheduled messages now due, earliest deliver-at first; then new entries
past the group's cursor. Permits count messages, not entries: a client batch of N messages
costs N permits (a partly acknowledged batch only its unacked messages). Like Pulsar's
dispatchers, a whole entry is sent while at least one permit remains (the last entry may
overshoot). Entries read beyond that are un-read (XACK and the cursor set back), so permits
are honoured exactly. On Failover only the active consumer gets anything, and consumers
whose lease ran out are released first (lib.lua lease_and_active).

Delayed delivery (PIP-26) applies to Shared subscriptions only: a new entry whose deliver-at
time (field `d`) is still ahead is scheduled (lib.lua "Delayed delivery") instead of sent,
at most SCHEDULE_CHUNK per call. Exclusive and Failover deliver in order, immediately. A
parked entry whose deliver-at time is still ahead is scheduled too, not redelivered: it was
read natively (ARGV[8]) by a gateway that died, or whose consumer left, before it could
schedule it.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] consumer uid   ARGV[3] permits (messages)
ARGV[4] expected messages per entry (>= 1), sizes the first read
ARGV[5] lease ms
ARGV[6] subscription type ('0' Exclusive, '1' Shared, '2' Failover)
ARGV[7] partition index (-1 if none)
ARGV[8] '1': native read. Step 3 is left to the caller, which sends `XREADGROUP GROUP <name>
  <uid> COUNT n STREAMS <stream> >` right after this call in the same pipeline, so new
  entries reach it without passing through Lua (half of this script's cost when it reads
  them itself). The caller then hands back with settle_read.lua what it may not deliver:
  entries beyond the permits left after this reply's deliveries, everything read when this
  call refused, and (Shared) entries whose deliver-at time is ahead of this reply's `now`.
  '0': the script reads them itself.
ARGV[9..12] Shared only: the unacked limits, consumer limit, consumer blocked (1/0),
  subscription limit, subscription blocked (1/0) (lib.lua unacked_check; a limit of 0 is
  none); nothing is sent over them, and no more entries than the room they leave

Returns {code, ...}
  code 0 OK, then `moved` (1: entries were scheduled ahead of the earliest one before, wake
  the other gateways so they learn the new time), then `next_due` (ms until the earliest
  scheduled entry: 0 = call again now, -1 = none), then `late` (for each scheduled message
  sent by this call, ms between its deliver-at time and now: the lateness metric), then
  `now` (Redis's clock, ms), then `room` (entries the consumer may still get under the
  unacked limits after this reply's: what a native read may deliver; -1 = no limit), then
  per delivery: id, fields, redelivery_count, ack set ('' = none)
  code 2 consumer gone (its lease expired and it was reaped: close it)
  code 6 not the active Failover consumer, then the active consumer's uid
  code 7 over an unacked limit, then the consumer's and the subscription's unacked entries
  and which limit they are over (lib.lua unacked_check)
]]
local k = sub_keys()
local group, uid, parked = ARGV[1], ARGV[2], PARKED
local remaining = tonumber(ARGV[3])
local per_entry = math.max(1, tonumber(ARGV[4]))
local shared = ARGV[6] == '1'
local native = ARGV[8] == '1'

local refused = lease_and_active(k, group, uid, ARGV[5], ARGV[6], ARGV[7])
if refused then return refused end
local room = -1
if shared then
  refused, room = unacked_check(k, group, uid, ARGV, 9)
  if refused then return refused end
  if room >= 0 then remaining = math.min(remaining, room * per_entry) end
end

local late = {}
local now = now_ms()
local out = dispatch_reply(late, now)
local schedule = shared and new_schedule(k, group)

-- 1. redeliveries
while remaining > 0 do
  local pending = redis.call('XPENDING', k.stream, group, '-', '+', math.min(remaining, 100), parked)
  if #pending == 0 then break end
  for _, p in ipairs(pending) do
    if remaining <= 0 then break end
    -- deliveries so far = redeliveries after this one
    local used = claim_and_emit(k, group, uid, p[1], p[4], out, schedule, now)
    if used then remaining = remaining - used end
  end
end

-- 2. scheduled messages now due
local earliest = shared and next_due(k, now)
if earliest == 0 then
  while remaining > 0 do
    local due = redis.call('ZRANGEBYSCORE', k.delayed, '-inf', now, 'WITHSCORES', 'LIMIT', 0, math.min(remaining, 100))
    if #due == 0 then break end
    local sent = {'ZREM', k.delayed}
    for i = 1, #due, 2 do
      if remaining <= 0 then break end
      sent[#sent + 1] = due[i]
      local used = claim_and_emit(k, group, uid, member_id(due[i]), 0, out)
      if used then
        remaining = remaining - used
        late[#late + 1] = now - tonumber(due[i + 1])
      end
    end
    redis.call(unpack(sent))
  end
  earliest = next_due(k, now)
end

-- 3. new entries (unless the caller reads them natively)
if not native then
  read_new(k, group, uid, remaining, per_entry, math.huge, function(entry)
    if held_back(schedule, entry, now) then return 0 end
    return emit(out, entry[1], entry[2], 0, nil)
  end, schedule and schedule.full)
end

if schedule then out[2], out[3] = schedule_reply(k, now, schedule, earliest) end
if room >= 0 then out[6] = math.max(room - deliveries_in(out), 0) end
return out
