--[[ renew_producer_leases: extend the leases of a gateway's producers on one topic.

KEYS[1] producers zset   KEYS[2] producer owners hash   KEYS[3] waiters zset
ARGV[1] lease ms         ARGV[2] number N of registered producers
ARGV[3 .. 2+2N] pairs (producer name, owner uid)     ARGV[3+2N ..] uids of queued waiters
Returns the uids that no longer own their registration (fenced, superseded, or reaped
after their lease ran out): the gateway must close them.
]]
local producers, owners, waiters = KEYS[1], KEYS[2], KEYS[3]
local expiry = now_ms() + tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local lost = {}
for i = 0, n - 1 do
  local name, uid = ARGV[3 + 2 * i], ARGV[4 + 2 * i]
  local owner = redis.call('HGET', owners, name)
  if owner and string.match(owner, '^%d+:%d+:(.*)$') == uid then
    redis.call('ZADD', producers, expiry, name)
  else
    lost[#lost + 1] = uid
  end
end
for i = 3 + 2 * n, #ARGV do
  if redis.call('ZADD', waiters, 'XX', 'CH', expiry, ARGV[i]) == 0
      and not redis.call('ZSCORE', waiters, ARGV[i]) then
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
