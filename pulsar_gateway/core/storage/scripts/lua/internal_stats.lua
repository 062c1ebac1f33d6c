--[[ internal_stats: what Redis can tell of a topic partition's storage and cursors, for the
admin API's internalStats (Pulsar PersistentTopicInternalStats / ManagedLedgerInternalStats).
The Python side (pulsar_gateway/core/admin/internal_stats.py) names and formats the figures.

KEYS[1] topic stream   KEYS[2] compacted view stream   KEYS[3] ledger hash
KEYS[3 + i] consumers zset (uid -> lease expiry) of subscription ARGV[i]
ARGV[i] subscription names (those without a consumer group, non-persistent ones, are
skipped)

Returns {} when the stream does not exist, else {stream, compacted, cursors, ledgers}:
  stream    {length, last-generated-id, entries-added (-1 before Redis 7), first id or '',
             last id or '', memory usage (bytes)}
  compacted {length, memory usage} or {} when the topic was never compacted
  cursors   per subscription {name, pending, last-delivered-id, entries-read (-1 unknown),
             mark-delete id ('' = before the first entry), first unacked id or '', read
             position id ('' = past the last entry), live consumers, entries since the
             first unacked one (scan capped at SCAN_LIMIT), acknowledged ranges after the
             mark-delete position as a flat list {after id, last id, ...}}
  ledgers   {current ledger id or '', its entries, its blob bytes, then per ledger still
             in the stream (oldest first, at most MAX_LEDGERS) its id and the entry ids
             of its first and last stored entries}
]]
local SCAN_LIMIT = 10000
local MAX_LEDGERS = 1000
local stream, compacted = KEYS[1], KEYS[2]
if redis.call('EXISTS', stream) == 0 then return {} end

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

local cursors = {}
for i, name in ipairs(ARGV) do
  local g = groups[name]
  if g then
    local cursor = field(g, 'last-delivered-id')
    local summary = redis.call('XPENDING', stream, name)
    local pending = tonumber(summary[1])
    local first_unacked = pending > 0 and summary[2] or ''
    -- everything up to the mark-delete position is acknowledged
    local bound = pending > 0 and ('(' .. first_unacked) or cursor
    local md = redis.call('XREVRANGE', stream, bound, '-', 'COUNT', 1)[1]
    local read = redis.call('XRANGE', stream, '(' .. cursor, '+', 'COUNT', 1)[1]
    -- acknowledged runs between the first unacked entry and the cursor
    local ranges, since = {}, 0
    if pending > 0 then
      local held = {}
      for _, p in ipairs(redis.call('XPENDING', stream, name, first_unacked, cursor, SCAN_LIMIT)) do
        held[p[1]] = true
      end
      local prev, run_from, run_to = nil, nil, nil
      for _, e in ipairs(redis.call('XRANGE', stream, first_unacked, cursor, 'COUNT', SCAN_LIMIT)) do
        since = since + 1
        if held[e[1]] then
          if run_from then
            ranges[#ranges + 1] = run_from
            ranges[#ranges + 1] = run_to
            run_from = nil
          end
        else
          if not run_from then run_from = prev end
          run_to = e[1]
        end
        prev = e[1]
      end
      if run_from then
        ranges[#ranges + 1] = run_from
        ranges[#ranges + 1] = run_to
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
local current = redis.call('HMGET', KEYS[3], 'id', 'e', 'b')
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
return {stream_out, compacted_out, cursors, ledgers}
