--[[ partitioned_metadata: change a namespace's topic list and partitioned-topic metadata
together (Pulsar's admin createPartitionedTopic, updatePartitionedTopic,
deletePartitionedTopic metadata step, createNonPartitionedTopic), so two gateways racing
on one name cannot both win.

KEYS[1] namespace topics set (full names of topics and partitions)
KEYS[2] namespace partitioned hash (full topic name -> partition count)
ARGV[1] operation: 'create', 'update', 'delete' or 'create-non-partitioned'
ARGV[2] full topic name (never a partition name)
ARGV[3] partition count (create, update)
ARGV[4] '1' to skip the unexpected-partition check (update with force)
ARGV[5] the most topics the namespace may hold, partitions counted (create,
        create-non-partitioned; 0: no limit: Pulsar's maxTopicsPerNamespace)

Returns {code, message, count}
  code 0 OK (count: the previous partition count; 0 for create)
  code 1 conflict: the name is in use (409 in Pulsar's AdminResource)
  code 2 not found: not a partitioned topic (update, delete)
  code 3 refused count: fewer partitions than now (422 in Pulsar's
         internalUpdatePartitionedTopicAsync)
  code 4 the namespace would hold more than ARGV[5] topics (412 in Pulsar's
         internalCreatePartitionedTopic)
]]
local topics, partitioned = KEYS[1], KEYS[2]
local op, name = ARGV[1], ARGV[2]
local prefix = name .. '-partition-'

-- The highest index i of an existing '<name>-partition-<i>' topic, or -1.
local function max_partition_index()
  local max = -1
  for _, member in ipairs(redis.call('SMEMBERS', topics)) do
    if string.sub(member, 1, #prefix) == prefix then
      local digits = string.sub(member, #prefix + 1)
      if string.match(digits, '^[0-9]+$') and (digits == '0' or string.sub(digits, 1, 1) ~= '0') then
        local index = tonumber(digits)
        if index > max then max = index end
      end
    end
  end
  return max
end

local function exceeds_max_topics(adding)
  local max = tonumber(ARGV[5] or '0')
  return max > 0 and redis.call('SCARD', topics) + adding > max
end
local TOO_MANY = 'Exceed maximum number of topics in namespace.'

local function add_partitions(from, to)
  for i = from, to - 1 do redis.call('SADD', topics, prefix .. i) end
end

local current = tonumber(redis.call('HGET', partitioned, name) or '0')

if op == 'create' then
  local count = tonumber(ARGV[3])
  if current > 0 or redis.call('SISMEMBER', topics, name) == 1 then
    return {1, 'This topic already exists', 0}
  end
  local max = max_partition_index()
  if max >= count then
    return {1, string.format('The topic has a max partition index of %d, the number of '
      .. 'partitions must be at least %d', max, max + 1), 0}
  end
  if exceeds_max_topics(count) then return {4, TOO_MANY, 0} end
  redis.call('HSET', partitioned, name, count)
  add_partitions(0, count)
  return {0, 'OK', 0}
end

if op == 'update' then
  local count = tonumber(ARGV[3])
  if current <= 0 then
    return {2, string.format('Topic %s is not the partitioned topic.', name), 0}
  end
  if count < current then
    return {3, string.format("Expect partitions %d can't less than current partitions %d.",
      count, current), current}
  end
  if ARGV[4] ~= '1' then
    local max = max_partition_index()
    if max >= current then
      return {1, string.format('Exist unexpected topic partition(partition index grater than '
        .. 'current metadata maximum index %d) %s', current, prefix .. max), current}
    end
  end
  redis.call('HSET', partitioned, name, count)
  add_partitions(current, count)
  return {0, 'OK', current}
end

if op == 'delete' then
  if current <= 0 then
    return {2, string.format('Partitioned Topic %s not found', name), 0}
  end
  redis.call('HDEL', partitioned, name)
  for i = 0, current - 1 do redis.call('SREM', topics, prefix .. i) end
  return {0, 'OK', current}
end

if op == 'create-non-partitioned' then
  if current > 0 or redis.call('SISMEMBER', topics, name) == 1 then
    return {1, 'This topic already exists', current}
  end
  if exceeds_max_topics(1) then return {4, TOO_MANY, 0} end
  redis.call('SADD', topics, name)
  return {0, 'OK', 0}
end

return redis.error_reply('unknown operation ' .. tostring(op))
