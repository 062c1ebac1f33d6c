--[[ append_entries: append entries to a topic partition, in its current ledger, each after
the checks a plain XADD cannot make, atomically. The entries are those one producer sent
during one event-loop tick of its gateway (a single entry when it sends one at a time): one
call for many entries, because a call's fixed cost (the clock, the ledger hash, the script
itself: about 10 µs on the machines we measure) is most of one entry's cost.

Ledgers (Pulsar's ManagedLedgerImpl): the stream id of an entry is "L-E", its message id
(ledgerId L, entryId E). A ledger's id is the time Redis opened it (ms, always greater than
the previous ledger's id and than any broker timestamp stored in it), and its entries are
numbered 0, 1, 2, ... with no gap: entry E of ledger L is appended as "L-E", E being the
count of entries the ledger hash holds (Redis 6.2 has no "L-*"). Before each entry a new
ledger is opened once the current one is full, as currentLedgerIsFull decides: it holds
max-entries entries or max-size bytes, or is older than the maximum rollover time, and in
every case is older than the minimum rollover time. Every entry carries its broker
timestamp (field F_BROKER_TIME: Redis's time, never before its ledger's id, never
decreasing), which time-based operations read, and the producer's publish time (field
F_PUBLISH_TIME, stored as given), which seek and reset by time compare (lib.lua
first_published_at).

A terminated topic (the ledger hash's field x, set by topic_terminate.lua) takes nothing:
every entry is answered 0, as a fenced producer's, and its producer closed (Pulsar's
PersistentTopic.publishMessage fails with TopicTerminatedException); the producer's next
PRODUCER learns why.

Checks (per entry, only when asked): deduplication (Pulsar MessageDeduplication
.isDuplicate and recordMessagePersisted) and, for exclusive producers, that no other
producer has fenced this one since it got the topic (the topic epoch is still its own).

KEYS[1] topic stream   KEYS[2] ledger hash (id, e entries, b bytes, t last broker timestamp)
KEYS[3] last sequence ids hash (producer name -> highest sequence id)
KEYS[4] topic epoch string
ARGV[1] ledger rollover: "<max entries> <max bytes> <min ms> <max ms>"
then 3 values per entry (an argument costs Redis about 0.3 µs: plain entries carry two):
  the stored blob; its options: '' for an entry with none of them (a single message, no
  key, not delayed, no checks), else
  "<n>,<epoch>,<seq>,<record>,<h>,<d>,<chunk length>,<chunk><producer name>" where each
  number may be empty for "none":
    n       number of messages of a client batch of more than one (entry field n)
    epoch   the producer's topic epoch, for the fencing check
    seq     sequence id of the entry (CommandSend.sequence_id; a batch's first, a chunk's
            message's), with deduplication
    record  highest sequence id to record (a batch's last), with deduplication; empty for
            a chunk that is not the last of its message: all chunks share the sequence id
            and only the last one records it, so chunks 1..n-1 are never taken for
            duplicates of chunk 0
    h       Key_Shared sticky-key hash (entry field h)
    d       deliver-at ms of a delayed message (entry field d)
    chunk   "<chunk id>:<uuid>" of a chunk (entry field u)
    producer name, the rest: with deduplication
  and its publish time (MessageMetadata.publish_time, ms, stored as field F_PUBLISH_TIME;
  '0' when the adapter knows none: no field is stored)
Returns one value per entry: its stream id; false for a duplicate (nothing stored); 0 when
the producer was fenced or the topic is terminated (nothing stored).
Sequence ids are compared as Lua numbers: exact below 2^53.
]]
-- Sent without lib.lua (scripts/__init__.py WITHOUT_LIB), and written for the per-message
-- path: every string.format, table and pattern match here costs a microsecond or two.
local stream, ledger_key, sequences, epoch_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local max_entries, max_bytes, min_ms, max_ms = string.match(
  ARGV[1], '^(%d+) (%d+) (%d+) (%d+)$')
max_entries, max_bytes = tonumber(max_entries), tonumber(max_bytes)
min_ms, max_ms = tonumber(min_ms), tonumber(max_ms)

local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
local ledger = redis.call('HMGET', ledger_key, 'id', 'e', 'b', 't', 'x')
if ledger[5] then
  local refused = {}
  for i = 2, #ARGV, 3 do refused[#refused + 1] = 0 end
  return refused
end
local id, entries, bytes = tonumber(ledger[1]), tonumber(ledger[2]), tonumber(ledger[3])
local time = tonumber(ledger[4]) or 0
local opened = false
local epoch -- read once, when an entry asks for the fencing check
-- the id's "L-" and the broker timestamp as text, made again only when a ledger opens
-- (number-to-text conversions are a good part of an entry's cost)
local prefix, stamp
if id then
  time = math.max(now, id, time)
  prefix, stamp = string.format('%d-', id), string.format('%d', time)
end

local out = {}
for base = 2, #ARGV, 3 do
  local blob, options, published = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  local result, n, epoch_of, seq, record, h, d, chunk, name
  if options ~= '' then
    local clen, at
    n, epoch_of, seq, record, h, d, clen, at = string.match(
      options, '^(%d*),(%d*),(%d*),(%d*),(%d*),(%-?%d*),(%d+),()')
    clen = tonumber(clen)
    chunk = string.sub(options, at, at + clen - 1)
    name = string.sub(options, at + clen)
    if epoch_of ~= '' then
      epoch = epoch or redis.call('GET', epoch_key) or ''
      if epoch ~= epoch_of then result = 0 end
    end
    if result == nil and name ~= '' then
      local last = redis.call('HGET', sequences, name)
      if last and tonumber(seq) <= tonumber(last) then result = false end
    end
  end
  if result == nil then
    if id then
      -- (an id ahead of the clock, opened within this call, is a ledger of age 0)
      local age = math.max(now - id, 0)
      if age >= min_ms and (age >= max_ms or entries >= max_entries or bytes >= max_bytes) then
        id = nil
      end
    end
    if not id then
      -- A new ledger: after every id and broker timestamp stored so far (the stream's last
      -- id too, for a stream written before ledgers), so ids stay ordered and every entry
      -- of an earlier ledger was stored before this ledger's id.
      id = math.max(now, time + 1)
      local top = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
      if top then
        local ms = tonumber(string.sub(top[1], 1, string.find(top[1], '-', 1, true) - 1))
        id = math.max(id, ms + 1)
      end
      entries, bytes, opened = 0, 0, true
      time = math.max(now, id, time)
      prefix, stamp = string.format('%d-', id), string.format('%d', time)
    end
    local sid = prefix .. entries
    if options == '' then
      if published ~= '0' then
        result = redis.call(
          'XADD', stream, sid, F_BLOB, blob, F_BROKER_TIME, stamp, F_PUBLISH_TIME, published)
      else
        result = redis.call('XADD', stream, sid, F_BLOB, blob, F_BROKER_TIME, stamp)
      end
    else
      local args = {'XADD', stream, sid, F_BLOB, blob, F_BROKER_TIME, stamp}
      if published ~= '0' then
        args[#args + 1] = F_PUBLISH_TIME
        args[#args + 1] = published
      end
      for _, field in ipairs({{F_NUM_MESSAGES, n}, {F_KEY_HASH, h}, {F_CHUNK, chunk},
                              {F_DELIVER_AT, d}}) do
        if field[2] ~= '' then
          args[#args + 1] = field[1]
          args[#args + 1] = field[2]
        end
      end
      result = redis.call(unpack(args))
      if name ~= '' and record ~= '' then redis.call('HSET', sequences, name, record) end
    end
    entries, bytes = entries + 1, bytes + #blob
  end
  out[#out + 1] = result
end
-- Numbers reach Redis as %.17g, which writes these integers (< 2^53) in full.
if opened then
  redis.call('HSET', ledger_key, 'id', id, 'e', entries, 'b', bytes, 't', time)
elseif id then
  redis.call('HSET', ledger_key, 'e', entries, 'b', bytes, 't', time)
end
return out
