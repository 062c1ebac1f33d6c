--[[ seek: reposition a subscription (Pulsar CommandSeek, PersistentSubscription.resetCursor).

Everything before the new position counts as acknowledged and everything from it on as
not yet delivered: the consumer group is recreated at the position, which drops its
pending entries (the scheduled ones too: re-read, they are scheduled again by their
deliver-at times), and every consumer of the subscription, on every gateway, is detached
(its gateway finds the lease gone and closes it, so the client re-subscribes, as Pulsar
closes consumers after a seek).

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] group id to restart after ('0' = from the start;
        "@<ms>" = by publish time: before the first entry published at or after that
        time,
        lib.lua group_position)
Returns the number of consumers detached, or -1 when the subscription does not exist.
]]
local k = sub_keys()
local group = ARGV[1]
if not group_exists(k.stream, group) then return -1 end
redis.call('XGROUP', 'DESTROY', k.stream, group)
redis.call('XGROUP', 'CREATE', k.stream, group, group_position(k.stream, ARGV[2]), 'MKSTREAM')
local detached = redis.call('ZCARD', k.consumers)
redis.call('DEL', k.consumers, k.info, k.ranges, k.joined, k.acksets, k.delayed)
return detached
