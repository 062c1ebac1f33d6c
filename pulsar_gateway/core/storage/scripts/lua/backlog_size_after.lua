--[[ backlog_size_after: the estimated size (bytes) of the entries after a position, read
only (Pulsar's admin getBacklogSizeByMessageId, ManagedLedgerImpl.getEstimatedBacklogSize,
which sums the sizes of the ledgers after the position's, estimating within one).

The entries after the position are counted ledger by ledger: a ledger's entries are
numbered 0, 1, 2, ... without gaps (append_entries.lua), so its last entry's number says how
many it holds: two single-entry reads per ledger, whatever its length. The size is that
count times the stream's average entry size (MEMORY USAGE / XLEN), as the topic stats
estimate backlog sizes.

KEYS[1] topic stream   ARGV[1] the position's stream id ("L-E")
Returns the estimated size in bytes (0 for an empty or missing stream).
]]
local stream = KEYS[1]
local length = redis.call('XLEN', stream)
if length == 0 then return 0 end
local size = redis.call('MEMORY', 'USAGE', stream) or 0
local ledger, entry = split_id(ARGV[1])
local count = 0
-- the rest of the position's own ledger
local top = redis.call(
  'XREVRANGE', stream, string.format('%d-18446744073709551615', ledger), '-', 'COUNT', 1)[1]
if top then
  local top_ledger, top_entry = split_id(top[1])
  if top_ledger == ledger and top_entry > entry then count = top_entry - entry end
end
-- every later ledger, whole
local from = string.format('%d-0', ledger + 1)
while true do
  local first = redis.call('XRANGE', stream, from, '+', 'COUNT', 1)[1]
  if not first then break end
  local next_ledger, first_entry = split_id(first[1])
  local last = redis.call(
    'XREVRANGE', stream, string.format('%d-18446744073709551615', next_ledger), '-',
    'COUNT', 1)[1]
  local _, last_entry = split_id(last[1])
  count = count + last_entry - first_entry + 1
  from = string.format('%d-0', next_ledger + 1)
end
return math.floor(size * math.min(count, length) / length)
