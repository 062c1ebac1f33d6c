--[[ policy_cas: compare-and-set one policy of a namespace or topic, for policies that are
maps changed one entry at a time (the backlog quota map: Pulsar changes one quota type per
request). The gateway reads the value, computes the new one and sends both; a change made
meanwhile by another admin on any gateway makes this call fail, and the gateway reads again
(Pulsar's metadata store does the same with versioned writes: "Concurrent modification").

KEYS[1] the policy hash (P:policies:ns:<ns> or P:policies:topic:<topic>)
ARGV[1] policy name (hash field)
ARGV[2] the value the gateway read ('' when the field was absent)
ARGV[3] the new value ('' to delete the field)

Returns 1 when written, 0 when the field no longer holds ARGV[2].
]]
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then
  current = ''
end
if current ~= ARGV[2] then
  return 0
end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
return 1
