--[[ scheduled_list: one page of a subscription's scheduled messages, earliest deliver-at
first, optionally within a window of deliver-at times (admin API; Pulsar has no such call).

The delayed entries right at the cursor are scheduled first (lib.lua open_schedule), so
the list is complete while no consumer reads. Index members no longer held by DELAYED
(expired by TTL, acknowledged by id) are dropped as they are met. The window is a ZRANGE
BYSCORE range (https://redis.io/docs/latest/commands/zrange/): '-inf' and '+inf' for no
bound, '(' before a bound that is excluded.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] offset   ARGV[3] page size
ARGV[4] most entries to schedule ahead
ARGV[5] window start (ZRANGE min)   ARGV[6] window end (ZRANGE max)
Returns {code, total, in_window, id, deliver_at, fields, ...}: code 0 OK (total = scheduled
messages of the subscription, lib.lua scheduled_count; in_window = index members due in the
window, ZCOUNT); 1 no such subscription
]]
local k = sub_keys()
local group = ARGV[1]
if not open_schedule(k, group, tonumber(ARGV[4])) then return {1, 0, 0} end
local low, high = ARGV[5], ARGV[6]
local out = {0, 0, redis.call('ZCOUNT', k.delayed, low, high)}
local page = redis.call('ZRANGE', k.delayed, low, high, 'BYSCORE', 'LIMIT', ARGV[2], ARGV[3], 'WITHSCORES')
for i = 1, #page, 2 do
  local id = member_id(page[i])
  local held = redis.call('XPENDING', k.stream, group, id, id, 1)[1]
  local entry = redis.call('XRANGE', k.stream, id, id)[1]
  if held and held[2] == DELAYED and entry then
    out[#out + 1] = id
    out[#out + 1] = page[i + 1]
    out[#out + 1] = entry[2]
  else
    redis.call('ZREM', k.delayed, page[i])
  end
end
out[2] = scheduled_count(k.stream, group)
return out
