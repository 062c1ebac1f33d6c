--[[ reap_consumers: release every consumer of a subscription whose lease expired (its
gateway was killed or cut off from Redis), handing its unacked entries back.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name
Returns the number of entries handed back.
]]
local k = sub_keys()
if not group_exists(k.stream, ARGV[1]) then return 0 end
return reap_expired(k, ARGV[1], now_ms(), PARKED)
