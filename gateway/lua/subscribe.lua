--[[ subscribe: attach a consumer to a subscription, creating the subscription on first use.

KEYS[1] topic stream               KEYS[2] subscriptions hash (name -> type)
KEYS[3] consumers zset (uid -> lease expiry ms)     KEYS[4] consumer names hash (uid -> name)
ARGV[1] subscription name (the consumer group)
ARGV[2] subscription type: '0' Exclusive, '1' Shared, '2' Failover, '3' Key_Shared
ARGV[3] initial position if the subscription is created: '$' Latest, '0' Earliest
ARGV[4] consumer uid      ARGV[5] consumer name      ARGV[6] lease ms
ARGV[7] parked consumer name

Returns {code, message, handed_back}
  code 0 OK; 1 ConsumerBusy (Exclusive already has a live consumer, or the subscription has
  live consumers of another type: Pulsar ServerCnx/AbstractSubscription rules)
  handed_back: entries returned to the subscription from consumers whose lease expired
]]
local stream, subs, consumers, names = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local group, sub_type, position, uid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local parked = ARGV[7]
local now = now_ms()

local handed_back = 0
if group_exists(stream, group) then
  handed_back = reap_expired(stream, group, consumers, names, now, parked)
end

local existing = redis.call('HGET', subs, group)
if existing and redis.call('ZCARD', consumers) > 0 then
  if existing ~= sub_type then
    return {1, 'Subscription is of a different type', handed_back}
  end
  if sub_type == '0' then
    return {1, 'Exclusive consumer is already connected', handed_back}
  end
end

local created = redis.pcall('XGROUP', 'CREATE', stream, group, position, 'MKSTREAM')
if type(created) == 'table' and created.err and not string.find(created.err, 'BUSYGROUP') then
  return redis.error_reply(created.err)
end
redis.call('HSET', subs, group, sub_type)
redis.call('ZADD', consumers, now + tonumber(ARGV[6]), uid)
redis.call('HSET', names, uid, ARGV[5])
return {0, 'OK', handed_back}
