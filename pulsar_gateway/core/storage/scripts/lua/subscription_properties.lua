--[[ subscription_properties: read, or replace, a subscription's properties (PIP-105;
Pulsar's admin getSubscriptionProperties / updateSubscriptionProperties, which replaces
the whole map), only while the subscription exists.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] '1' replace, '0' read   ARGV[3..] name, value, ...
Returns -1 when there is no such subscription, else the properties as a flat list.
]]
local k = sub_keys()
local group = ARGV[1]
if redis.call('HEXISTS', k.subs, group) == 0 and not group_exists(k.stream, group) then
  return -1
end
if ARGV[2] == '1' then
  redis.call('DEL', k.properties)
  if #ARGV > 2 then redis.call('HSET', k.properties, unpack(ARGV, 3)) end
end
return redis.call('HGETALL', k.properties)
