--[[ release_consumer: a consumer closed or its connection dropped; its unacked entries go
back to the subscription for redelivery (counted as a redelivery when dispatched again).

KEYS[1] topic stream   KEYS[2] consumers zset   KEYS[3] consumer names hash
ARGV[1] subscription name   ARGV[2] consumer uid   ARGV[3] parked consumer name
Returns the number of entries handed back.
]]
return release_consumer(KEYS[1], ARGV[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3])
