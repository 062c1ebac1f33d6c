--[[ reap_consumers: release every consumer of a subscription whose lease expired (its
gateway was killed or cut off from Redis), handing its unacked entries back.

KEYS[1] topic stream   KEYS[2] consumers zset   KEYS[3] consumer names hash
ARGV[1] subscription name   ARGV[2] parked consumer name
Returns the number of entries handed back.
]]
if not group_exists(KEYS[1], ARGV[1]) then return 0 end
return reap_expired(KEYS[1], ARGV[1], KEYS[2], KEYS[3], now_ms(), ARGV[2])
