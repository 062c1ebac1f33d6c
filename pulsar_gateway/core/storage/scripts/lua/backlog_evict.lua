--[[ backlog_evict: the backlog quota policy consumer_backlog_eviction, which drops the
oldest unacknowledged messages where the other policies block producers (Pulsar
BacklogQuotaManager.dropBacklogForSizeLimit and dropBacklogForTimeLimit), on one topic
partition in one step. The script checks the quota itself, so gateways that run it for the
same topic at once evict once: the later calls find the backlog under the limit.

By size (destination_storage): when the slowest subscription's backlog (measured as
backlog_usage.lua does) is over the limit, every subscription whose backlog is over the
target (Pulsar: 90% of the limit) skips its oldest entries (lib.lua skip_entries), Pulsar's
count: int((backlog - target) / backlog * entries in its backlog).
By age (message_age): when the oldest unacknowledged message is older than the limit,
every subscription acknowledges the entries stored more than the target ago (lib.lua
ack_through: pending ones acked, a cursor behind them moved past them).
Consumers stay connected; their later acks of evicted messages are no-ops, as in Pulsar.

KEYS[1] the topic partition's stream
KEYS[2i], KEYS[2i + 1] the scheduled index and the ack sets of subscription ARGV[3 + i]
ARGV[1] 'size' or 'age'
ARGV[2] the limit (bytes or ms): nothing changes unless the backlog is over it
ARGV[3] the target (bytes or ms)
ARGV[4..] subscription names, read from the subscriptions hash just before (a
          subscription created since is left for the next check)

Returns {evicted, cut}: evicted 1 when the backlog was over the limit (0: nothing changed),
cut the number of subscriptions whose backlog was cut
]]
local stream, mode = KEYS[1], ARGV[1]
local limit, target = tonumber(ARGV[2]), tonumber(ARGV[3])
if redis.call('EXISTS', stream) == 0 then return {0, 0} end

local listed = {}
for i = 4, #ARGV do
  local n = i - 3
  listed[ARGV[i]] = {stream = stream, delayed = KEYS[2 * n], acksets = KEYS[2 * n + 1]}
end
local groups = {}
for _, g in ipairs(group_backlogs(stream)) do
  if listed[g.name] then groups[#groups + 1] = g end
end

local cut = 0
if mode == 'size' then
  local bytes = entry_bytes(stream)
  local slowest = 0
  for _, g in ipairs(groups) do slowest = math.max(slowest, g.unacked) end
  if math.floor(bytes * slowest) <= limit then return {0, 0} end
  for _, g in ipairs(groups) do
    local backlog = bytes * g.unacked
    if backlog > target then
      local skip = math.floor((backlog - target) / backlog * g.unacked)
      if skip > 0 and skip_entries(listed[g.name], g.name, skip) > 0 then cut = cut + 1 end
    end
  end
  return {1, cut}
end

local now = now_ms()
local oldest
for _, g in ipairs(groups) do
  if g.oldest and (not oldest or id_less(g.oldest, oldest)) then oldest = g.oldest end
end
if not oldest or now - stored_time(stream, oldest) <= limit then return {0, 0} end
-- the entries stored before now - target: a prefix of the stream ('+': all of it)
local bound = stored_before(stream, now - target)
for _, g in ipairs(groups) do
  if g.oldest and (bound == '+' or id_less(g.oldest, string.sub(bound, 2))) then
    ack_through(listed[g.name], g.name, bound)
    cut = cut + 1
  end
end
return {1, cut}
