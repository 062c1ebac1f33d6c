--[[ subscribe: attach a consumer to a subscription, creating the subscription on first use.

KEYS: the subscription keys (lib.lua sub_keys): stream, subscriptions hash (name -> type),
      consumers zset (uid -> lease expiry ms), consumer info hash, Key_Shared ranges,
      Key_Shared join positions, ack sets
ARGV[1] subscription name (the consumer group)
ARGV[2] subscription type: '0' Exclusive, '1' Shared, '2' Failover, '3' Key_Shared
ARGV[3] initial position if the subscription is created: '$' Latest, '0' Earliest, or an id
ARGV[4] consumer uid      ARGV[5] consumer name      ARGV[6] lease ms
ARGV[7] priority level    ARGV[8] partition index (-1 for a non-partitioned topic)
ARGV[9] Key_Shared mode: '0' AUTO_SPLIT, '1' STICKY ('' for other types)
ARGV[10] STICKY hash ranges "start-end,..." ('' otherwise)
ARGV[11] Key_Shared allowOutOfOrderDelivery: '1' skips the recently-joined ordering guard
ARGV[12] '1' durable, '0' non-durable (a reader's: deleted with its last consumer)

Returns {code, message, handed_back, active}
  code 0 OK; 1 ConsumerBusy (Exclusive already has a live consumer, or the subscription has
  live consumers of another type or Key_Shared mode: Pulsar ServerCnx/AbstractSubscription
  rules); 7 ConsumerAssignError (STICKY ranges invalid or taken)
  handed_back: entries returned to the subscription from consumers whose lease expired
  active: Failover's active consumer uid after this subscribe ('' for other types)
]]
local k = sub_keys()
local group, sub_type, position, uid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local parked, partition = PARKED, tonumber(ARGV[8])
local now = now_ms()

local handed_back = 0
if group_exists(k.stream, group) then
  handed_back = reap_expired(k, group, now, parked)
end

local live = redis.call('ZCARD', k.consumers)
local existing = redis.call('HGET', k.subs, group)
if existing and live > 0 then
  if existing ~= sub_type then
    return {1, 'Subscription is of a different type', handed_back, ''}
  end
  if sub_type == '0' then
    return {1, 'Exclusive consumer is already connected', handed_back, ''}
  end
  if sub_type == '3' and redis.call('HGET', k.ranges, KS_MODE) ~= ARGV[9] then
    return {1, 'Subscription is of a different Key_Shared mode', handed_back, ''}
  end
end

local created = redis.pcall('XGROUP', 'CREATE', k.stream, group, position, 'MKSTREAM')
if type(created) == 'table' and created.err and not string.find(created.err, 'BUSYGROUP') then
  return redis.error_reply(created.err)
end

if (sub_type == '0' or sub_type == '2') and redis.call('EXISTS', k.delayed) == 1 then
  -- Exclusive and Failover ignore delivery times (PIP-26): what the subscription had
  -- scheduled while it was Shared or Key_Shared is delivered now, in order.
  handed_back = handed_back + move_all(k.stream, group, DELAYED, parked)
  redis.call('DEL', k.delayed)
end

if sub_type == '3' then
  if live == 0 then redis.call('DEL', k.ranges, k.joined) end
  redis.call('HSET', k.ranges, KS_MODE, ARGV[9])
  if ARGV[9] == '1' then
    local err = ks_add_sticky(k, uid, ARGV[10])
    if err then return {7, err, handed_back, ''} end
  else
    ks_add_auto(k, uid)
  end
  if live > 0 and ARGV[11] ~= '1' then
    -- Keys that move to the newcomer may have unacked messages at other consumers: it gets
    -- nothing read after this point until everything read before it is acked (Pulsar's
    -- "recently joined consumers" rule).
    if tonumber(redis.call('XPENDING', k.stream, group)[1]) > 0 then
      redis.call('HSET', k.joined, uid, last_delivered(k.stream, group))
    end
  end
  -- Entries no consumer covered (STICKY gaps) are routed again by the new ranges. Entries
  -- already waiting for a consumer stay with it, even when their key moved to the
  -- newcomer: that consumer may still hold earlier messages of the key, unacknowledged or
  -- not yet handed to its application, which the newcomer would overtake (found by the
  -- chaos run, after a Redis restart left the old consumers holding their entries until
  -- their leases ran out). The old consumer delivers them in order, or they are parked,
  -- oldest first, with its unacked ones when it leaves (Pulsar PIP-379, "draining hashes",
  -- keeps a moved key's messages away from its new consumer likewise).
  if live > 0 then move_all(k.stream, group, NO_OWNER, parked) end
end

local before = nil
if sub_type == '2' then before = failover_active(k, partition, now) end

redis.call('HSET', k.subs, group, sub_type)
redis.call('ZADD', k.consumers, now + tonumber(ARGV[6]), uid)
redis.call('HSET', k.info, uid, ARGV[7] .. ' ' .. now_us() .. ' ' .. ARGV[12] .. ' ' .. ARGV[5])

local active = ''
if sub_type == '2' then
  active = failover_active(k, partition, now)
  if before and before ~= active then
    -- The active consumer changed: what the old one holds goes to the new one, in order
    -- (Pulsar rewinds the cursor on an active consumer change).
    handed_back = handed_back + park_all(k.stream, group, before, parked)
  end
end
return {0, 'OK', handed_back, active}
