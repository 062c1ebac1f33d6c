--[[ copy_subscriptions: create subscriptions on a new partition of a partitioned topic at
its earliest position, so messages routed there before the subscription's consumers
discover the partition are not skipped (Pulsar's updatePartitionedTopic copies partition
0's durable subscriptions to new partitions at MessageId.earliest).

KEYS[1] the new partition's stream   KEYS[2] its subscriptions hash (name -> type)
ARGV[1], ARGV[2], ...: subscription name, subscription type, for each subscription
Returns the number of subscriptions created (existing ones are left alone).
]]
local stream, subs = KEYS[1], KEYS[2]
local created = 0
for i = 1, #ARGV, 2 do
  local ok = redis.pcall('XGROUP', 'CREATE', stream, ARGV[i], '0', 'MKSTREAM')
  if type(ok) == 'table' and ok.err then
    if not string.find(ok.err, 'BUSYGROUP') then return redis.error_reply(ok.err) end
  else
    created = created + 1
  end
  redis.call('HSETNX', subs, ARGV[i], ARGV[i + 1])
end
return created
