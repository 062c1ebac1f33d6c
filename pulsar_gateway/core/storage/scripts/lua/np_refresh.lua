--[[ np_refresh: renew a gateway's consumers of one non-persistent subscription and read
the subscription's live consumers (every gateway picks Shared and Failover targets from
this list).

KEYS[1] registry zset (member '<type>|<consumer name>|<uid>' -> lease expiry ms)
ARGV[1] lease ms   ARGV[2..] this gateway's members
Returns {lost, live}: lost = this gateway's members whose lease had already expired (the
gateway closes them); live = every member with a live lease
]]
local registry = KEYS[1]
local now = now_ms()
local lost = {}
for i = 2, #ARGV do
  local score = redis.call('ZSCORE', registry, ARGV[i])
  if score and tonumber(score) > now then
    redis.call('ZADD', registry, now + tonumber(ARGV[1]), ARGV[i])
  else
    lost[#lost + 1] = ARGV[i]
  end
end
redis.call('ZREMRANGEBYSCORE', registry, '-inf', now)
return {lost, redis.call('ZRANGE', registry, 0, -1)}
