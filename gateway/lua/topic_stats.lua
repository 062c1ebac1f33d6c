--[[ topic_stats: per-subscription figures of one topic partition, read in one step (the
admin API's topic stats).

KEYS[1] topic stream   KEYS[2] subscriptions hash (name -> type)
Returns {name, type, delayed, ...}: delayed = scheduled messages not yet delivered (held by
DELAYED, lib.lua "Delayed delivery"; Pulsar's msgDelayed)
]]
local stream, subs = KEYS[1], KEYS[2]
local out = {}
local all = redis.call('HGETALL', subs)
for i = 1, #all, 2 do
  local delayed = 0
  if group_exists(stream, all[i]) then delayed = scheduled_count(stream, all[i]) end
  out[#out + 1] = all[i]
  out[#out + 1] = all[i + 1]
  out[#out + 1] = delayed
end
return out
