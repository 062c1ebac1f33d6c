--[[ backlog_usage: what a topic partition's backlog uses of its backlog quotas (Pulsar
PersistentTopic.isSizeBacklogExceeded and checkTimeBacklogExceeded): its size and the age
of its oldest unacknowledged message.

Size (destination_storage): the slowest subscription's backlog, the consumer group with the
most unacknowledged entries (lib.lua group_backlogs), times the stream's average entry size
(lib.lua entry_bytes): an estimate, as Pulsar's ManagedLedger.getEstimatedBacklogSize is.
Age (message_age): now (the Redis clock) minus the broker timestamp of the oldest entry a
subscription has not acknowledged (Pulsar reads the entry after the oldest mark-delete
position with preciseTimeBasedBacklogQuotaCheck, else estimates from ledger close times;
here every entry carries its time, so the age is always the precise one). A topic without
subscriptions has no backlog.

KEYS[1] the topic partition's stream
(no ARGV)

Returns {size in bytes, age in ms}: {0, -1} when nothing is unacknowledged
]]
local stream = KEYS[1]
if redis.call('EXISTS', stream) == 0 then return {0, -1} end
local slowest, oldest = 0, nil
for _, g in ipairs(group_backlogs(stream)) do
  if g.unacked > slowest then slowest = g.unacked end
  if g.oldest and (not oldest or id_less(g.oldest, oldest)) then oldest = g.oldest end
end
local age = -1
if oldest then age = math.max(0, now_ms() - stored_time(stream, oldest)) end
return {math.floor(entry_bytes(stream) * slowest), age}
