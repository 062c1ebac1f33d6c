--[[ reap_consumers: release every consumer of a subscription whose lease expired (its
gateway was killed or cut off from Redis), handing its unacked entries back.

Also hands back what a group consumer that is not a registered consumer holds (reserved
names aside): only a native read (dispatch.lua ARGV[8]) for a consumer reaped meanwhile can
leave one, when its gateway died before settle_read.lua removed it.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name
Returns the number of entries handed back.
]]
local k = sub_keys()
local group = ARGV[1]
if not group_exists(k.stream, group) then return 0 end
local moved = reap_expired(k, group, now_ms(), PARKED)
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', k.stream, group)) do
  local name = c[2]
  if string.sub(name, 1, #RESERVED_MARK) ~= RESERVED_MARK and not redis.call('ZSCORE', k.consumers, name) then
    moved = moved + park_all(k.stream, group, name, PARKED)
    redis.call('XGROUP', 'DELCONSUMER', k.stream, group, name)
  end
end
return moved
