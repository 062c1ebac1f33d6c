--[[ scheduled_cancel: cancel one scheduled message of a subscription (admin API; Pulsar has
no such call). It is acknowledged on this subscription, so it is never delivered to it;
other subscriptions keep their own schedule.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] stream id   ARGV[3] most entries to schedule ahead
Returns 1 cancelled; 0 not scheduled on this subscription (delivered, acknowledged, not
delayed, or not read yet behind undelivered messages); -1 no such subscription
]]
local k = sub_keys()
local group, id = ARGV[1], ARGV[2]
if not open_schedule(k, group, tonumber(ARGV[3])) then return -1 end
if redis.call('ZREM', k.delayed, delay_member(id)) == 0 then return 0 end
local acked = redis.call('XACK', k.stream, group, id)
redis.call('HDEL', k.acksets, id)
return acked
