--[[ append_entry: append one entry to a topic partition, in its current ledger, after the
checks a plain XADD cannot make, atomically.

Ledgers (Pulsar's ManagedLedgerImpl): the stream id of an entry is "L-E", its message id
(ledgerId L, entryId E). A ledger's id is the time Redis opened it (ms, always greater than
the previous ledger's id and than any broker timestamp stored in it), and its entries are
numbered 0, 1, 2, ... with no gap: entry E of ledger L is appended as "L-E", E being the
count of entries the ledger hash holds (Redis 6.2 has no "L-*").
The next append opens a new ledger once the current one is full, as currentLedgerIsFull
decides: it holds max-entries entries or max-size bytes, or is older than the maximum
rollover time, and in the first two cases is older than the minimum rollover time.
Every entry carries its broker timestamp (field F_BROKER_TIME: Redis's time, never before
its ledger's id), which time-based operations read.

Checks (only when asked): deduplication (Pulsar MessageDeduplication.isDuplicate and
recordMessagePersisted) and, for exclusive producers, that no other producer has fenced
this one since it got the topic (the topic epoch is still its own).

KEYS[1] topic stream   KEYS[2] ledger hash (id, e entries, b bytes, t last broker timestamp)
KEYS[3] last sequence ids hash (producer name -> highest sequence id)
KEYS[4] topic epoch string
ARGV[1] stored blob    ARGV[2] number of messages when a batch of more than one, else ''
ARGV[3] the producer's topic epoch, or '' to skip the fencing check
ARGV[4] producer name, or '' when deduplication is off
ARGV[5] sequence id of the entry (CommandSend.sequence_id; a batch's first, a chunk's
        message's), or '' when deduplication is off
ARGV[6] highest sequence id to record (a batch's last), or '' for a chunk that is not the
        last of its message: all chunks share the sequence id and only the last one records
        it, so chunks 1..n-1 are never taken for duplicates of chunk 0
ARGV[7] Key_Shared sticky-key hash (entry field h), or '' when the entry has no key
ARGV[8] "<chunk id>:<uuid>" for a chunk (entry field u), or ''
ARGV[9] deliver-at ms of a delayed message (entry field d), or ''
ARGV[10] ledger rollover "<max entries> <max bytes> <min ms> <max ms>"
Returns the new entry's stream id; false for a duplicate (nothing stored); 0 when the
producer was fenced (nothing stored).
Sequence ids are compared as Lua numbers: exact below 2^53.
]]
if ARGV[3] ~= '' and redis.call('GET', KEYS[4]) ~= ARGV[3] then
  return 0
end
local dedup = ARGV[4] ~= ''
if dedup then
  local last = redis.call('HGET', KEYS[3], ARGV[4])
  if last and tonumber(ARGV[5]) <= tonumber(last) then
    return false
  end
end

local now = now_ms()
local ledger = redis.call('HMGET', KEYS[2], 'id', 'e', 'b', 't')
local id, entries, bytes = tonumber(ledger[1]), tonumber(ledger[2]), tonumber(ledger[3])
local last_time = tonumber(ledger[4]) or 0
if id then
  local max_entries, max_bytes, min_ms, max_ms = string.match(
    ARGV[10], '^(%d+) (%d+) (%d+) (%d+)$')
  local age = now - id
  local full = entries >= tonumber(max_entries) or bytes >= tonumber(max_bytes)
  if (full or age >= tonumber(max_ms)) and age >= tonumber(min_ms) then id = nil end
end
if not id then
  -- A new ledger: after every id and broker timestamp stored so far (the stream's last
  -- id too, for a stream written before ledgers), so ids stay ordered and every entry of
  -- an earlier ledger was stored before this ledger's id.
  id = math.max(now, last_time + 1)
  local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
  if top then id = math.max(id, split_id(top[1]) + 1) end
  entries, bytes = 0, 0
  redis.call('HSET', KEYS[2], 'id', string.format('%d', id))
end
local time = math.max(now, id, last_time)

local args = {
  'XADD', KEYS[1], string.format('%d-%d', id, entries), F_BLOB, ARGV[1], F_BROKER_TIME,
  string.format('%d', time),
}
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
local entry_id = redis.call(unpack(args))
redis.call('HSET', KEYS[2], 'e', entries + 1, 'b', bytes + #ARGV[1],
  't', string.format('%d', time))
if dedup and ARGV[6] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[4], ARGV[6])
end
return entry_id
