--[[ release_producer: a producer closed, its connection dropped, or it gave up waiting.
Removes its registration only if it still owns it (it may have been superseded or fenced).

KEYS[1] producers zset   KEYS[2] producer owners hash   KEYS[3] waiters zset
ARGV[1] producer name    ARGV[2] owner uid
Returns 1 when waiting producers should be told the topic changed, else 0.
]]
local producers, owners, waiters = KEYS[1], KEYS[2], KEYS[3]
local name, uid = ARGV[1], ARGV[2]
local removed = redis.call('ZREM', waiters, uid)
local owner = redis.call('HGET', owners, name)
if owner then
  local owner_uid = string.match(owner, '^%d+:%d+:(.*)$')
  if owner_uid == uid then
    redis.call('ZREM', producers, name)
    redis.call('HDEL', owners, name)
    removed = 1
  end
end
if removed == 1 and redis.call('ZCARD', waiters) > 0 then return 1 end
return 0
