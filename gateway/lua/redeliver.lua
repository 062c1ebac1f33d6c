--[[ redeliver: give a consumer's unacked entries back to the subscription
(REDELIVER_UNACKNOWLEDGED_MESSAGES: negative ack, ack timeout).

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] consumer uid   ARGV[3] parked consumer name
ARGV[4..] stream ids to redeliver; none = every unacked entry of the consumer (what the
          client sends for Exclusive and Failover, protocol brief 3.3)

Only entries still pending and owned by this consumer move (an id already acked, or since
given to another consumer, is ignored, as Pulsar does).
Returns the number of entries parked.
]]
local stream, group, uid, parked = sub_keys().stream, ARGV[1], ARGV[2], ARGV[3]
if not group_exists(stream, group) then return 0 end
if #ARGV == 3 then return park_all(stream, group, uid, parked) end
local ids = {}
for i = 4, #ARGV do
  local p = redis.call('XPENDING', stream, group, ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == uid then ids[#ids + 1] = ARGV[i] end
end
claim_justid(stream, group, parked, ids)
return #ids
