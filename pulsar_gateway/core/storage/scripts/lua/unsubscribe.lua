--[[ unsubscribe: delete a subscription (Pulsar CommandUnsubscribe). Refused while other
consumers are connected, as Pulsar does.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] uid of the consumer asking
Returns {code, message}: 0 OK; 1 ConsumerBusy (other consumers connected)
]]
local k = sub_keys()
local group, uid = ARGV[1], ARGV[2]
if group_exists(k.stream, group) then
  reap_expired(k, group, now_ms(), PARKED)
end
local others = redis.call('ZCARD', k.consumers)
if redis.call('ZSCORE', k.consumers, uid) then others = others - 1 end
if others > 0 then
  return {1, 'Subscription has other connected consumers'}
end
if group_exists(k.stream, group) then
  redis.call('XGROUP', 'DESTROY', k.stream, group)
end
redis.call('HDEL', k.subs, group)
redis.call('DEL', k.consumers, k.info, k.ranges, k.joined, k.acksets, k.delayed, k.properties)
return {0, 'OK'}
