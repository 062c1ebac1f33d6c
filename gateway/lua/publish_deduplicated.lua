--[[ publish_deduplicated: append an entry unless its producer already stored that sequence
id, and record the producer's highest sequence id in the same step (Pulsar
MessageDeduplication.isDuplicate / recordMessagePersisted, made atomic).

KEYS[1] topic stream   KEYS[2] last sequence ids hash (producer name -> highest sequence id)
ARGV[1] producer name
ARGV[2] sequence id of the entry (CommandSend.sequence_id; a batch's first, a chunk's message's)
ARGV[3] highest sequence id to record (a batch's last), or '' for a chunk that is not the
        last of its message: all chunks share the sequence id and only the last one records
        it, so chunks 1..n-1 are never taken for duplicates of chunk 0
ARGV[4] stored blob    ARGV[5] number of messages when a batch of more than one, else ''
Returns the new entry's stream id, or false for a duplicate (nothing stored).
Sequence ids are compared as Lua numbers: exact below 2^53.
]]
local last = redis.call('HGET', KEYS[2], ARGV[1])
if last and tonumber(ARGV[2]) <= tonumber(last) then
  return false
end
local id
if ARGV[5] ~= '' then
  id = redis.call('XADD', KEYS[1], '*', 'm', ARGV[4], 'n', ARGV[5])
else
  id = redis.call('XADD', KEYS[1], '*', 'm', ARGV[4])
end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
end
return id
