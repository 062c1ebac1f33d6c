--[[ release_consumer: a consumer closed or its connection dropped; its unacked entries go
back to the subscription for redelivery (counted as a redelivery when dispatched again).

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] consumer uid
Returns the number of entries handed back.
]]
return release_consumer(sub_keys(), ARGV[1], ARGV[2], PARKED)
