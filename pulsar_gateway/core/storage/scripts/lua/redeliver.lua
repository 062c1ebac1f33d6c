--[[ redeliver: give a consumer's unacked entries back to the subscription
(REDELIVER_UNACKNOWLEDGED_MESSAGES: negative ack, ack timeout).

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] consumer uid
ARGV[3..] stream ids to redeliver; none = every unacked entry of the consumer (what the
          client sends for Exclusive and Failover: docs/binary_protocol.md
          "Consuming, acknowledging, seeking")

Only entries still pending and owned by this consumer move (an id already acked, or since
given to another consumer, is ignored, as Pulsar does). An id naming a chunk (entry field
u = "<chunk id>:<uuid>") brings the earlier chunks of its message this consumer holds
along: the 4.2.0 client nacks a chunked message by its last chunk only and could not
reassemble it otherwise (``lib/NegativeAcksTracker.cc`` in apache/pulsar-client-cpp v4.2.0;
docs/binary_protocol.md "Batches, compression and chunks").
Returns the number of entries parked.
]]
local stream, group, uid, parked = sub_keys().stream, ARGV[1], ARGV[2], PARKED
if not group_exists(stream, group) then return 0 end
if #ARGV == 2 then return park_all(stream, group, uid, parked) end
local ids, seen = {}, {}
local function add(id)
  if not seen[id] then
    seen[id] = true
    ids[#ids + 1] = id
  end
end
-- the earlier chunks of the chunked message whose chunk `id` is, held by this consumer
local function earlier_chunks(id, tag)
  local chunk_id, uuid = string.match(tag, '^(%d+):(.*)$')
  local left = tonumber(chunk_id or 0)
  if left == 0 then return end
  local held = redis.call('XPENDING', stream, group, '-', '(' .. id, 1000, uid)
  for j = #held, 1, -1 do
    local entry = redis.call('XRANGE', stream, held[j][1], held[j][1])
    local other = entry[1] and field(entry[1][2], F_CHUNK)
    if other and string.sub(other, -#uuid - 1) == ':' .. uuid then
      add(held[j][1])
      left = left - 1
      if left == 0 then return end
    end
  end
end
for i = 3, #ARGV do
  local p = redis.call('XPENDING', stream, group, ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == uid then
    add(ARGV[i])
    local entry = redis.call('XRANGE', stream, ARGV[i], ARGV[i])
    local tag = entry[1] and field(entry[1][2], F_CHUNK)
    if tag then earlier_chunks(ARGV[i], tag) end
  end
end
table.sort(ids, id_less)
claim_justid(stream, group, parked, ids)
return #ids
