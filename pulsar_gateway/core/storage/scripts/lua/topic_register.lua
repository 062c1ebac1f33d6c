--[[ topic_register: record a topic in its namespace's topic list as a producer or consumer
attaches, creating it if the rules allow (Pulsar's BrokerService.getTopic with
createIfMissing = isAllowAutoTopicCreation, then checkMaxTopicsPerNamespace), atomically
with the count so two gateways cannot both take the last place.

KEYS[1] namespace topics set (full names of topics and partitions)
KEYS[2] namespace partitioned hash (full topic name -> partition count)
ARGV[1] full topic or partition name
ARGV[2] '1' when the topic may be created on first use, else '0'
ARGV[3] the most topics the namespace may hold, partitions counted (0: no limit)
ARGV[4] the partitioned topic's name when ARGV[1] is a partition, else ''
ARGV[5] the partition's index when ARGV[4] is set

Returns 0 known (or a partition of an existing partitioned topic: listed again),
        1 created, 2 refused: does not exist and may not be created,
        3 refused: the namespace holds its most topics
]]
local topics, partitioned = KEYS[1], KEYS[2]
local name = ARGV[1]
if redis.call('SISMEMBER', topics, name) == 1 then return 0 end
if ARGV[4] ~= '' then
  local count = tonumber(redis.call('HGET', partitioned, ARGV[4]) or '0')
  if tonumber(ARGV[5]) < count then
    redis.call('SADD', topics, name)
    return 0
  end
end
if ARGV[2] ~= '1' then return 2 end
local max = tonumber(ARGV[3])
if max > 0 and redis.call('SCARD', topics) >= max then return 3 end
redis.call('SADD', topics, name)
return 1
