--[[ subscription_reset: reset a subscription's cursor (Pulsar admin resetCursor by time or
by position, PersistentSubscription.resetCursor), the way seek.lua repositions it: the
consumer group is recreated so delivery restarts at the position (everything before counts
as acknowledged, everything from it on as never delivered: pending entries, scheduled
index, ack sets and Key_Shared state go), and every consumer of the subscription, on every
gateway, is detached (its gateway finds the lease gone and closes it; the client
re-subscribes, as Pulsar disconnects the consumers before resetting).

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] 'group' or 'position'
group:    ARGV[3] group id to deliver after (by publish time "@<ms>": lib.lua
          group_position)
position: ARGV[3] stream id   ARGV[4] '1' isExcluded   ARGV[5] batch index (-1 none)
          (lib.lua cursor_position; inside a batch, the batch's first indexes count as
          acknowledged and the entry is redelivered with its ack set)
Returns the number of consumers detached, or -1 when the subscription does not exist.
]]
local k = sub_keys()
local group, parked = ARGV[1], PARKED
if not group_exists(k.stream, group) then return -1 end
local start, position, ackset = group_position(k.stream, ARGV[3]), nil, nil
if ARGV[2] == 'position' then
  position, ackset = cursor_position(k, ARGV[3], ARGV[4] == '1', tonumber(ARGV[5]))
  start = id_before(position)
end
redis.call('XGROUP', 'DESTROY', k.stream, group)
redis.call('XGROUP', 'CREATE', k.stream, group, start, 'MKSTREAM')
local detached = redis.call('ZCARD', k.consumers)
redis.call('DEL', k.consumers, k.info, k.ranges, k.joined, k.acksets, k.delayed)
if ackset then hold_partial(k, group, position, ackset, parked) end
return detached
