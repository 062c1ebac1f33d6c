--[[ failover_active: which consumer of a Failover subscription is active now.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] partition index (-1 for a non-partitioned topic)
Returns the active consumer's uid, or '' when there is none.
]]
return failover_active(sub_keys(), tonumber(ARGV[1]), now_ms()) or ''
