--[[ subscription_create: create a subscription without a consumer (Pulsar admin
createSubscription): a consumer group at the given position, listed in the topic's
subscriptions hash (type '0' until a consumer attaches and sets its own; Pulsar's type is
"None" then).

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name
ARGV[2] group id to deliver after: '$' latest, '0' earliest, or the id just before the
        first entry to deliver
Returns 1 created, 0 the subscription exists already (Pulsar 409)
]]
local k = sub_keys()
local group = ARGV[1]
if group_exists(k.stream, group) or redis.call('HEXISTS', k.subs, group) == 1 then
  return 0
end
redis.call('XGROUP', 'CREATE', k.stream, group, ARGV[2], 'MKSTREAM')
redis.call('HSET', k.subs, group, '0')
return 1
