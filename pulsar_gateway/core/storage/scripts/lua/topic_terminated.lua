--[[ topic_terminated: whether a topic partition was terminated (topic_terminate.lua), read
only: a producer is refused on it, a consumer told when it has read it all.

KEYS[1] ledger hash
Returns 1 when terminated, else 0.
]]
return redis.call('HEXISTS', KEYS[1], 'x')
