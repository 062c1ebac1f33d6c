--[[ ack_batch_index: acknowledge some messages of client batches (Pulsar batch-index ack,
CommandAck.message_id[].ack_set).

An entry's ack set is kept as a string of '0'/'1' (character i+1 = message i, '1' = not
yet acknowledged, as in Pulsar's ack_set). Each ack narrows it (bitwise AND); when no '1'
is left the entry itself is acknowledged and its ack set dropped. Ids no longer pending
(already acked, or from before a seek) are ignored.

KEYS[1] topic stream   KEYS[2] ack sets hash of the subscription
ARGV[1] subscription name   ARGV[2], ARGV[3], ...: pairs of stream id, ack set string
Returns the number of entries fully acknowledged.
]]
local stream, acksets, group = KEYS[1], KEYS[2], ARGV[1]
if not group_exists(stream, group) then return 0 end
local done = 0
for i = 2, #ARGV, 2 do
  local id, bits = ARGV[i], ARGV[i + 1]
  if redis.call('XPENDING', stream, group, id, id, 1)[1] then
    local old = redis.call('HGET', acksets, id)
    if old then
      local merged = {}
      for j = 1, math.max(#old, #bits) do
        local still = string.sub(old, j, j) == '1' and string.sub(bits, j, j) == '1'
        merged[j] = still and '1' or '0'
      end
      bits = table.concat(merged)
    end
    if string.find(bits, '1', 1, true) then
      redis.call('HSET', acksets, id, bits)
    else
      redis.call('XACK', stream, group, id)
      redis.call('HDEL', acksets, id)
      done = done + 1
    end
  end
end
return done
