--[[ renew_leases: extend the leases of a gateway's live consumers of one subscription.

KEYS[1] consumers zset (uid -> lease expiry ms)
ARGV[1] lease ms   ARGV[2..] consumer uids
Returns the uids whose lease was already gone (reaped): the gateway must close them.
]]
local expiry = now_ms() + tonumber(ARGV[1])
local lost = {}
for i = 2, #ARGV do
  if redis.call('ZADD', KEYS[1], 'XX', 'CH', expiry, ARGV[i]) == 0
      and not redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
