--[[ subscription_skip: skip messages of a subscription (Pulsar admin skipMessages,
ManagedCursor.asyncSkipEntries with IndividualDeletedEntries.Exclude) or clear its whole
backlog (skip_all, asyncClearBacklog).

Pulsar skips N *entries* from the mark-delete position, not counting acknowledged ones: a
client batch is one entry, a partly acknowledged batch too. Here the backlog in that order
is the pending entries, oldest first, then the entries after the cursor; the first N are
acknowledged (consumers holding some keep their connection, as in Pulsar: their later
acks are no-ops): lib.lua skip_entries, which backlog quota eviction shares. Scheduled
(delayed) messages are entries of the backlog like others; a skipped one leaves the
scheduled index. Clearing the backlog acknowledges everything up to the end of the stream
and empties the index and the ack sets.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] entries to skip, or -1 for all (clear backlog)
Returns the number of entries skipped, -1 when the subscription does not exist
]]
local k = sub_keys()
local group, wanted = ARGV[1], tonumber(ARGV[2])
if not group_exists(k.stream, group) then return -1 end

if wanted < 0 then
  local acked = ack_through(k, group, '+')
  redis.call('DEL', k.delayed, k.acksets, k.joined)
  return acked
end

return skip_entries(k, group, wanted)
