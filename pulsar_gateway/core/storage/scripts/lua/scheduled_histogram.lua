--[[ scheduled_histogram: how many of a subscription's scheduled messages are due in each of
a row of time buckets (admin API; Pulsar has no such call).

The delayed entries right at the cursor are scheduled first (lib.lua open_schedule), as
for scheduled_list, so the counts are complete while no consumer reads. Counts are of the
index (ZCOUNT, https://redis.io/docs/latest/commands/zcount/): a member no longer held by
DELAYED that no listing has dropped yet still counts.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] most entries to schedule ahead
ARGV[3..] the bucket bounds b0 < b1 < ... < bn (deliver-at ms): bucket i is [b(i-1), b(i))
Returns {code, total, before, after, count_1, ..., count_n}: code 0 OK (total = index
members, before = due before b0, after = due at or after bn, so before + counts + after =
total); 1 no such subscription
]]
local k = sub_keys()
local group = ARGV[1]
if not open_schedule(k, group, tonumber(ARGV[2])) then return {1, 0, 0, 0} end
local last = #ARGV
local out = {
  0,
  redis.call('ZCARD', k.delayed),
  redis.call('ZCOUNT', k.delayed, '-inf', '(' .. ARGV[3]),
  redis.call('ZCOUNT', k.delayed, ARGV[last], '+inf'),
}
for i = 3, last - 1 do
  out[#out + 1] = redis.call('ZCOUNT', k.delayed, ARGV[i], '(' .. ARGV[i + 1])
end
return out
