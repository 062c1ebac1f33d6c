--[[ scheduled_reschedule: move one scheduled message of a subscription to a new deliver-at
time (admin API; Pulsar has no such call). A time not ahead makes it due at once; the
caller wakes the topic's dispatchers, which learn the new earliest time from dispatch.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] stream id   ARGV[3] new deliver-at (ms since epoch)
ARGV[4] most entries to schedule ahead
Returns 1 rescheduled; 0 not scheduled on this subscription; -1 no such subscription
]]
local k = sub_keys()
local group, id = ARGV[1], ARGV[2]
local member = delay_member(id)
if not open_schedule(k, group, tonumber(ARGV[4])) then return -1 end
if not redis.call('ZSCORE', k.delayed, member) then return 0 end
local held = redis.call('XPENDING', k.stream, group, id, id, 1)[1]
if not held or held[2] ~= DELAYED then
  redis.call('ZREM', k.delayed, member) -- expired or acknowledged meanwhile
  return 0
end
redis.call('ZADD', k.delayed, 'XX', ARGV[3], member)
return 1
