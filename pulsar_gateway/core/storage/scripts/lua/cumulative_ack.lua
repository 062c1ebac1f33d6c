--[[ cumulative_ack: acknowledge every message up to and including an id (Pulsar
CommandAck.AckType.Cumulative): pending entries <= id are acked and the cursor moves to id
if it is behind, so undelivered entries up to id are never delivered.

KEYS[1] topic stream   KEYS[2] ack sets hash of the subscription
ARGV[1] subscription name   ARGV[2] inclusive upper bound stream id
Returns the number of pending entries acked.
]]
local stream, acksets, group, upto = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
if not group_exists(stream, group) then return 0 end
local acked = 0
while true do
  local pending = redis.call('XPENDING', stream, group, '-', upto, 1000)
  if #pending == 0 then break end
  local args = {'XACK', stream, group}
  for _, p in ipairs(pending) do args[#args + 1] = p[1] end
  acked = acked + redis.call(unpack(args))
end
for _, id in ipairs(redis.call('HKEYS', acksets)) do
  if not id_less(upto, id) then redis.call('HDEL', acksets, id) end
end
local cursor = last_delivered(stream, group)
if cursor and id_less(cursor, upto) then
  redis.call('XGROUP', 'SETID', stream, group, upto)
end
return acked
