--[[ internal_stats: what Redis can tell of a topic partition's storage and cursors, for the
admin API's internalStats (Pulsar PersistentTopicInternalStats / ManagedLedgerInternalStats).
The Python side (pulsar_gateway/core/admin/internal_stats.py) names and formats the figures.

KEYS[1] topic stream   KEYS[2] compacted view stream   KEYS[3] ledger hash
KEYS[3 + i] consumers zset (uid -> lease expiry) of subscription ARGV[i]
ARGV[i] subscription names (those without a consumer group, non-persistent ones, are
skipped)

Returns {terminated} when the stream does not exist, else {stream, compacted, cursors,
ledgers, terminated}:
  stream    {length, last-generated-id, entries-added (-1 before Redis 7), first id or '',
             last id or '', memory usage (bytes)}
  compacted {length, memory usage} or {} when the topic was never compacted
  cursors   per subscription {name, pending, last-delivered-id, entries-read (-1 unknown),
             mark-delete id ('' = before the first entry), first unacked id or '', read
             position id ('' = past the last entry), live consumers, entries since the
             first unacked one (the span: at most SCAN_LIMIT entries from the first
             unacked one to the cursor, plus the read position's entry), acknowledged
             ranges within the span as a flat list {after id, last id, ...}}
  ledgers   {current ledger id or '', its entries, its blob bytes, then per ledger still
             in the stream (oldest first, at most MAX_LEDGERS) its id and the entry ids
             of its first and last stored entries}
  terminated  the ledger hash's terminated mark: '' when the topic was not terminated,
             else its last entry's id ('-' when it had none; topic_terminate.lua)

Entries are read one at a time, a few per subscription and ledger, never a span's: a span
is counted ledger by ledger (lib.lua walk_range: entry ids are consecutive within a ledger,
so two one-entry reads per ledger), and its acknowledged ranges are the gaps between
consecutive pending ids (XPENDING of the span: ids and counters, no entry), which the ids
alone give within a ledger and one read gives across ledgers. Reading the spans would copy
each of their entries into Lua: seconds of Redis time per call once 50 subscriptions span
thousands of 10 KB entries.
]]
local SCAN_LIMIT = 10000
local MAX_LEDGERS = 1000
local stream, compacted = KEYS[1], KEYS[2]
if redis.call('EXISTS', stream) == 0 then return {redis.call('HGET', KEYS[3], 'x') or ''} end

local info = redis.call('XINFO', 'STREAM', stream)
local first = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)[1]
local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
local stream_out = {
  tonumber(field(info, 'length')),
  field(info, 'last-generated-id'),
  tonumber(field(info, 'entries-added') or -1),
  first and first[1] or '',
  last and last[1] or '',
  redis.call('MEMORY', 'USAGE', stream) or 0,
}

local compacted_out = {}
if redis.call('EXISTS', compacted) == 1 then
  compacted_out = {redis.call('XLEN', compacted), redis.call('MEMORY', 'USAGE', compacted) or 0}
end

local groups = {}
for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
  groups[field(g, 'name')] = g
end
local now = string.format('(%d', now_ms())

-- The last entry between pending ids `a` < `b` (nil when they are neighbours): the end of
-- the acknowledged run after `a`.
local function last_between(a, b)
  local a_ledger, a_entry = split_id(a)
  local b_ledger, b_entry = split_id(b)
  if a_ledger == b_ledger then
    if b_entry > a_entry + 1 then return string.format('%d-%d', b_ledger, b_entry - 1) end
    return nil
  end
  local before = redis.call('XREVRANGE', stream, '(' .. b, '(' .. a, 'COUNT', 1)[1]
  return before and before[1]
end

local cursors = {}
for i, name in ipairs(ARGV) do
  local g = groups[name]
  if g then
    local cursor = field(g, 'last-delivered-id')
    local summary = redis.call('XPENDING', stream, name)
    local pending = tonumber(summary[1])
    local first_unacked = pending > 0 and summary[2] or ''
    -- everything up to the mark-delete position is acknowledged: the last entry before the
    -- first unacked one, else at or before the cursor; none when that is before the first
    -- entry, told without asking (XREVRANGE from there walks the whole stream to find none)
    local md = nil
    if first and (pending > 0 and id_less(first[1], first_unacked)
                  or pending == 0 and not id_less(cursor, first[1])) then
      local bound = pending > 0 and ('(' .. first_unacked) or cursor
      md = redis.call('XREVRANGE', stream, bound, '-', 'COUNT', 1)[1]
    end
    local read = redis.call('XRANGE', stream, '(' .. cursor, '+', 'COUNT', 1)[1]
    -- the span: the entries from the first unacked one to the cursor (at most SCAN_LIMIT),
    -- and the acknowledged runs in it, each after a pending entry
    local ranges, since = {}, 0
    if pending > 0 then
      local nth, last_id
      nth, since, last_id = walk_range(stream, first_unacked, cursor, SCAN_LIMIT)
      local span_end = nth or last_id
      local prev = nil
      if span_end then
        for _, p in ipairs(redis.call('XPENDING', stream, name, first_unacked, span_end, SCAN_LIMIT)) do
          local run_to = prev and last_between(prev, p[1])
          if run_to then
            ranges[#ranges + 1] = prev
            ranges[#ranges + 1] = run_to
          end
          prev = p[1]
        end
      end
      if prev and id_less(prev, span_end) then
        ranges[#ranges + 1] = prev
        ranges[#ranges + 1] = span_end
      end
    end
    if read then since = since + 1 end
    cursors[#cursors + 1] = {
      name, pending, cursor, tonumber(field(g, 'entries-read') or -1),
      md and md[1] or '', first_unacked, read and read[1] or '',
      redis.call('ZCOUNT', KEYS[3 + i], now, '+inf'), since, ranges,
    }
  end
end
-- the ledgers still in the stream: two reads per ledger, from the first entry on
local current = redis.call('HMGET', KEYS[3], 'id', 'e', 'b', 'x')
local ledgers = {current[1] or '', tonumber(current[2] or 0), tonumber(current[3] or 0)}
local entry = first
while entry and #ledgers < 3 + 3 * MAX_LEDGERS do
  local ledger, first_seq = split_id(entry[1])
  local top = string.format('%d-18446744073709551615', ledger)
  local last_in = redis.call('XREVRANGE', stream, top, entry[1], 'COUNT', 1)[1]
  local _, last_seq = split_id(last_in[1])
  ledgers[#ledgers + 1] = string.format('%d', ledger)
  ledgers[#ledgers + 1] = string.format('%d', first_seq)
  ledgers[#ledgers + 1] = string.format('%d', last_seq)
  entry = redis.call('XRANGE', stream, '(' .. top, '+', 'COUNT', 1)[1]
end
return {stream_out, compacted_out, cursors, ledgers, current[4] or ''}
