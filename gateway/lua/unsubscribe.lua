--[[ unsubscribe: delete a subscription (Pulsar CommandUnsubscribe). Refused while other
consumers are connected, as Pulsar does.

KEYS[1] topic stream   KEYS[2] subscriptions hash   KEYS[3] consumers zset
KEYS[4] consumer names hash
ARGV[1] subscription name   ARGV[2] uid of the consumer asking   ARGV[3] parked consumer name
Returns {code, message}: 0 OK; 1 ConsumerBusy (other consumers connected)
]]
local stream, subs, consumers, names = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local group, uid = ARGV[1], ARGV[2]
if group_exists(stream, group) then
  reap_expired(stream, group, consumers, names, now_ms(), ARGV[3])
end
local others = redis.call('ZCARD', consumers)
if redis.call('ZSCORE', consumers, uid) then others = others - 1 end
if others > 0 then
  return {1, 'Subscription has other connected consumers'}
end
if group_exists(stream, group) then
  redis.call('XGROUP', 'DESTROY', stream, group)
end
redis.call('HDEL', subs, group)
redis.call('DEL', consumers, names)
return {0, 'OK'}
