--[[ settle_read: hand back what a native read (dispatch.lua ARGV[8]) may not deliver.

The gateway read new entries for consumer `uid` with XREADGROUP right after dispatch.lua, in
the same pipeline, so they are pending at `uid`. It delivers those the permits and the
subscription allow and settles the rest here:

* handed back: the entries after the last one the permits allowed, or everything read when
  dispatch.lua refused (consumer gone, not the active Failover consumer): a run at the end
  of the read. When the group's cursor is still where the read left it, they are un-read,
  exactly as dispatch.lua un-reads what it reads beyond the permits (XACK, and the cursor
  set back before the first of them). Otherwise (another read went past them meanwhile)
  they are parked with their delivery count reset (read, never sent), and the next dispatch
  hands them out first, in id order: either way an Exclusive or Failover subscription keeps
  its order.
* scheduled (Shared): entries whose deliver-at time (PIP-26) was ahead of dispatch.lua's
  `now`, as dispatch.lua schedules those it reads itself.

Each id is acted on only while it is still pending at `uid`: a consumer release or a reaping
may have parked it first (then dispatch.lua's redelivery path schedules one that is not
due). A `uid` that is no longer a consumer of the subscription (dispatch.lua answered
"consumer gone" and the read re-created it in the group) is removed from the group with
whatever it holds, so nothing stays pending at a consumer no reaping would find
(reap_consumers.lua also sweeps such consumers, should this call never come).

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] consumer uid   ARGV[3] the last id the read returned
ARGV[4] n, the number of ids to hand back, then those n ids (ascending)
then pairs: id, deliver-at (ms since epoch) of entries to schedule

Returns {moved, next_due} as dispatch.lua's reply header (moved 1: entries were scheduled
ahead of the earliest one before; next_due: ms until the earliest scheduled entry, -1 none).
]]
local k = sub_keys()
local group, uid, last_read = ARGV[1], ARGV[2], ARGV[3]
local n = tonumber(ARGV[4])
if not group_exists(k.stream, group) then return {0, -1} end

-- the ids of this call still pending at uid, in one XPENDING over their range (which also
-- holds the entries of the read that were sent, pending at uid too: no count limit)
local first, last
local function widen(id)
  if not first or id_less(id, first) then first = id end
  if not last or id_less(last, id) then last = id end
end
for i = 5, #ARGV do
  if i < 5 + n or (i - 5 - n) % 2 == 0 then widen(ARGV[i]) end
end
local held = {}
if first then
  for _, p in ipairs(redis.call('XPENDING', k.stream, group, first, last, 1000000000, uid)) do
    held[p[1]] = true
  end
end

local back = {}
for i = 5, 4 + n do
  if held[ARGV[i]] then back[#back + 1] = ARGV[i] end
end
if #back > 0 then
  if #back == n and last_delivered(k.stream, group) == last_read then
    redis.call('XACK', k.stream, group, unpack(back))
    redis.call('XGROUP', 'SETID', k.stream, group, id_before(back[1]))
  else
    claim_justid(k.stream, group, PARKED, back, 0)
  end
end

local now = now_ms()
local earliest = next_due(k, now)
local schedule = new_schedule(k, group)
for i = 5 + n, #ARGV - 1, 2 do
  if held[ARGV[i]] then schedule.add(ARGV[i], ARGV[i + 1]) end
end
local moved, due = schedule_reply(k, now, schedule, earliest)

if not redis.call('ZSCORE', k.consumers, uid) then
  park_all(k.stream, group, uid, PARKED)
  redis.call('XGROUP', 'DELCONSUMER', k.stream, group, uid)
end
return {moved, due}
