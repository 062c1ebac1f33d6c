--[[ subscription_skip: skip messages of a subscription (Pulsar admin skipMessages,
ManagedCursor.asyncSkipEntries with IndividualDeletedEntries.Exclude) or clear its whole
backlog (skip_all, asyncClearBacklog).

Pulsar skips N *entries* from the mark-delete position, not counting acknowledged ones: a
client batch is one entry, a partly acknowledged batch too. Here the backlog in that order
is the pending entries, oldest first, then the entries after the cursor; the first N are
acknowledged (consumers holding some keep their connection, as in Pulsar: their later
acks are no-ops). Scheduled (delayed) messages are entries of the backlog like others; a
skipped one leaves the scheduled index. Clearing the backlog acknowledges everything up to
the end of the stream and empties the index and the ack sets.

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

local skipped = 0
while skipped < wanted do
  local pending = redis.call('XPENDING', k.stream, group, '-', '+', math.min(wanted - skipped, 1000))
  if #pending == 0 then break end
  local ids = {}
  for i, p in ipairs(pending) do ids[i] = p[1] end
  skipped = skipped + ack_pending(k, group, ids)
end
local cursor, moved = last_delivered(k.stream, group), false
while skipped < wanted do
  local want = math.min(wanted - skipped, 1000)
  local entries = redis.call('XRANGE', k.stream, '(' .. cursor, '+', 'COUNT', want)
  if #entries == 0 then break end
  cursor, moved = entries[#entries][1], true
  skipped = skipped + #entries
  if #entries < want then break end
end
if moved then redis.call('XGROUP', 'SETID', k.stream, group, cursor) end
return skipped
