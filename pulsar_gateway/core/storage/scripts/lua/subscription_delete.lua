--[[ subscription_delete: delete a subscription (Pulsar admin deleteSubscription), persistent
or not. Refused while consumers are connected anywhere in the fleet, unless forced: then
their leases are deleted with the subscription, so each gateway finds its consumers gone
and closes them (the clients reconnect, as Pulsar's deleteForcefully disconnects them).

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] '1' force
ARGV[3] '1' check only (busy or not; nothing is deleted)
Returns {code, consumers}: code 0 deleted, 1 busy (consumers connected, not forced),
-1 no such subscription; consumers = live consumers found (detached when forced)
]]
local k = sub_keys()
local group, force = ARGV[1], ARGV[2] == '1'
local exists = group_exists(k.stream, group)
if not exists and redis.call('HEXISTS', k.subs, group) == 0 then return {-1, 0} end
local now = now_ms()
if exists then reap_expired(k, group, now, PARKED) end
redis.call('ZREMRANGEBYSCORE', k.np_consumers, '-inf', now)
local live = redis.call('ZCARD', k.consumers) + redis.call('ZCARD', k.np_consumers)
if live > 0 and not force then return {1, live} end
if ARGV[3] == '1' then return {0, live} end
if exists then redis.call('XGROUP', 'DESTROY', k.stream, group) end
redis.call('HDEL', k.subs, group)
redis.call(
  'DEL', k.consumers, k.info, k.ranges, k.joined, k.acksets, k.np_consumers, k.delayed,
  k.properties)
return {0, live}
