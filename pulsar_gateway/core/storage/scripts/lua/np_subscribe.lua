--[[ np_subscribe: register a consumer of a non-persistent topic's subscription in the
fleet-wide registry, enforcing Pulsar's subscription rules (ServerCnx / NonPersistent
subscriptions: one Exclusive consumer; every consumer of a subscription of one type).

KEYS[1] registry zset of the subscription: member '<type>|<consumer name>|<uid>' -> lease
        expiry (ms, Redis clock)
KEYS[2] the topic's subscriptions hash (name -> type): lists the subscription while it has
        consumers, so an admin delete finds its registry
ARGV[1] member   ARGV[2] subscription type ('0' Exclusive, '1' Shared, '2' Failover)
ARGV[3] lease ms   ARGV[4] subscription name
Returns {code, message}: 0 OK; 1 ConsumerBusy
]]
local registry, member, sub_type = KEYS[1], ARGV[1], ARGV[2]
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', registry, '-inf', now)
for _, other in ipairs(redis.call('ZRANGE', registry, 0, -1)) do
  if string.sub(other, 1, 1) ~= sub_type then
    return {1, 'Subscription is of a different type'}
  end
  if sub_type == '0' then
    return {1, 'Exclusive consumer is already connected'}
  end
end
redis.call('ZADD', registry, now + tonumber(ARGV[3]), member)
redis.call('HSET', KEYS[2], ARGV[4], sub_type)
return {0, 'OK'}
