--[[ gateway_heartbeat: renew one gateway's membership of the fleet and read the members.

KEYS[1] gateways zset (gateway id -> lease expiry, ms)
ARGV[1] gateway id   ARGV[2] lease in ms (0 = leave the fleet)
Returns the ids of the live gateways (expired members are dropped).
]]
local now = now_ms()
if tonumber(ARGV[2]) > 0 then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
else
  redis.call('ZREM', KEYS[1], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, -1)
