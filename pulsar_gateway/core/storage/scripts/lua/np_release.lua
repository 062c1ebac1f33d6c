--[[ np_release: remove a consumer from a non-persistent subscription's registry; the
subscription ends (leaves the topic's subscriptions hash) with its last consumer, as a
Pulsar non-persistent subscription does.

KEYS[1] registry zset (member -> lease expiry ms)   KEYS[2] topic subscriptions hash
ARGV[1] member   ARGV[2] subscription name
Returns the number of consumers left.
]]
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms())
local left = redis.call('ZCARD', KEYS[1])
if left == 0 then redis.call('HDEL', KEYS[2], ARGV[2]) end
return left
