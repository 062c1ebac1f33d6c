--[[ backlog_size: estimate a topic partition's backlog in bytes, for backlog quota checks
(Pulsar's ManagedLedger.getEstimatedBacklogSize: the bytes from the slowest subscription's
oldest unacknowledged entry to the end of the topic).

The slowest subscription is the consumer group with the most entries not yet acknowledged:
its pending entries plus its lag (entries not yet delivered; XINFO GROUPS "lag", Redis 7).
Bytes are that count times the stream's average entry size (MEMORY USAGE / XLEN), an
estimate, as Pulsar's is. When Redis cannot tell a group's lag (Redis 6.2, or after
deletions it cannot account for) the whole stream counts, which errs on the side of the
quota. A topic without subscriptions has no backlog.

KEYS[1] the topic partition's stream
(no ARGV)

Returns the estimated backlog in bytes (0 when the stream or its groups do not exist).
]]
local stream = KEYS[1]
if redis.call('EXISTS', stream) == 0 then
  return 0
end
local length = redis.call('XLEN', stream)
if length == 0 then
  return 0
end
local slowest = 0
for _, group in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
  local pending, lag = 0, nil
  for i = 1, #group, 2 do
    if group[i] == 'pending' then
      pending = group[i + 1]
    elseif group[i] == 'lag' then
      lag = group[i + 1]
    end
  end
  if not lag then
    lag = length
  end
  local unacked = math.min(length, pending + lag)
  if unacked > slowest then
    slowest = unacked
  end
end
if slowest == 0 then
  return 0
end
local bytes = redis.call('MEMORY', 'USAGE', stream) or 0
return math.floor(bytes / length * slowest)
