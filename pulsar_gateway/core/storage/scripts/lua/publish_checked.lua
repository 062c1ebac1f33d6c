--[[ publish_checked: append an entry after the checks a plain XADD cannot make, atomically
with the append: deduplication (Pulsar MessageDeduplication.isDuplicate and
recordMessagePersisted) and, for exclusive producers, that no other producer has fenced
this one since it got the topic (the topic epoch is still its own).

KEYS[1] topic stream   KEYS[2] last sequence ids hash (producer name -> highest sequence id)
KEYS[3] topic epoch string
ARGV[1] stored blob    ARGV[2] number of messages when a batch of more than one, else ''
ARGV[3] the producer's topic epoch, or '' to skip the fencing check
ARGV[4] producer name, or '' when deduplication is off
ARGV[5] sequence id of the entry (CommandSend.sequence_id; a batch's first, a chunk's
        message's)
ARGV[6] highest sequence id to record (a batch's last), or '' for a chunk that is not the
        last of its message: all chunks share the sequence id and only the last one records
        it, so chunks 1..n-1 are never taken for duplicates of chunk 0
ARGV[7] Key_Shared sticky-key hash (entry field h), or '' when the entry has no key
ARGV[8] "<chunk id>:<uuid>" for a chunk (entry field u), or ''
ARGV[9] deliver-at ms of a delayed message (entry field d), or ''
Returns the new entry's stream id; false for a duplicate (nothing stored); 0 when the
producer was fenced (nothing stored).
Sequence ids are compared as Lua numbers: exact below 2^53.
]]
if ARGV[3] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[3] then
  return 0
end
local dedup = ARGV[4] ~= ''
if dedup then
  local last = redis.call('HGET', KEYS[2], ARGV[4])
  if last and tonumber(ARGV[5]) <= tonumber(last) then
    return false
  end
end
local args = {'XADD', KEYS[1], '*', F_BLOB, ARGV[1]}
if ARGV[2] ~= '' then
  args[#args + 1] = F_NUM_MESSAGES
  args[#args + 1] = ARGV[2]
end
for i, name in ipairs({F_KEY_HASH, F_CHUNK, F_DELIVER_AT}) do -- ARGV[7..9]
  if ARGV[6 + i] ~= '' then
    args[#args + 1] = name
    args[#args + 1] = ARGV[6 + i]
  end
end
local id = redis.call(unpack(args))
if dedup and ARGV[6] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[4], ARGV[6])
end
return id
