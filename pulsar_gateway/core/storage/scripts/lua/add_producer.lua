--[[ add_producer: register a producer on a topic for the whole fleet, applying Pulsar's
name and access-mode rules (AbstractTopic.incrementTopicEpochIfNeeded, internalAddProducer).

KEYS[1] producers zset (name -> lease expiry ms)
KEYS[2] producer owners hash (name -> "<mode>:<epoch>:<uid>")
KEYS[3] waiters zset (uid of a queued WaitForExclusive producer -> lease expiry ms)
KEYS[4] topic epoch string
KEYS[5] last sequence ids hash (name -> highest stored sequence id; deduplication)
ARGV[1] producer name      ARGV[2] owner uid (fleet-unique)
ARGV[3] access mode: '0' Shared, '1' Exclusive, '2' WaitForExclusive, '3' ExclusiveWithFencing
ARGV[4] producer epoch (CommandProducer.epoch: the client's reconnect counter)
ARGV[5] '1' when the client chose the name (user_provided_producer_name), else '0'
ARGV[6] topic epoch the client echoes (CommandProducer.topic_epoch), '' when absent
ARGV[7] lease ms
ARGV[8] '1' to return the producer's last sequence id (deduplication enabled)
ARGV[9] '1' when this is a queued WaitForExclusive producer trying again

Returns {code, message, topic_epoch, last_sequence_id, others_removed}
  code 0 OK (registered); 3 ProducerBusy; 4 ProducerFenced; 5 queued (WaitForExclusive:
  registered as a waiter, retry when the topic's producers change)
  topic_epoch: -1 when the topic never had an exclusive producer
  last_sequence_id: -1 unless ARGV[8] and a sequence id is stored
  others_removed: how many other producers/waiters this call removed (fenced or
  superseded); when > 0 the caller must notify the topic's producer channel
]]
local producers, owners, waiters, epoch_key, sequences = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local name, uid, mode = ARGV[1], ARGV[2], ARGV[3]
local producer_epoch = tonumber(ARGV[4])
local user_provided = ARGV[5] == '1'
local client_topic_epoch = ARGV[6] ~= '' and tonumber(ARGV[6]) or nil
local lease = tonumber(ARGV[7])
local now = now_ms()

-- Producers whose gateway stopped renewing (killed, cut off) no longer count.
for _, expired in ipairs(redis.call('ZRANGEBYSCORE', producers, '-inf', now)) do
  redis.call('ZREM', producers, expired)
  redis.call('HDEL', owners, expired)
end
redis.call('ZREMRANGEBYSCORE', waiters, '-inf', now)

local function parse_owner(value)
  local m, e, u = string.match(value, '^(%d+):(%d+):(.*)$')
  return m, tonumber(e), u
end

local function current_epoch()
  local e = redis.call('GET', epoch_key)
  return e and tonumber(e) or -1
end

local function last_sequence_id()
  if ARGV[8] ~= '1' then return -1 end
  local s = redis.call('HGET', sequences, name)
  return s and tonumber(s) or -1
end

local removed = 0

-- 1. The name. A registration left by this same logical producer (its connection dropped
-- and the client reconnected, possibly through another gateway, before the old one was
-- released) is superseded: the client only sends a higher epoch after giving the old
-- connection up, and a server-assigned name belongs to that one client. A user-chosen name
-- may be shared by mistake between processes, so it waits for the release or the lease
-- (Pulsar: Producer.isSuccessorTo, else ProducerBusy while the old connection is alive).
local existing = redis.call('HGET', owners, name)
if existing then
  local _, old_epoch, old_uid = parse_owner(existing)
  if old_uid ~= uid then
    if not user_provided and producer_epoch > old_epoch then
      redis.call('ZREM', producers, name)
      redis.call('HDEL', owners, name)
      removed = removed + 1
    else
      return {3, "Producer with name '" .. name .. "' is already connected to topic", -1, -1, 0}
    end
  end
end

-- 2. The access mode, against everyone else on the topic.
local others, exclusive_name = 0, nil
local entries = redis.call('HGETALL', owners)
for i = 1, #entries, 2 do
  if entries[i] ~= name then
    others = others + 1
    local m = parse_owner(entries[i + 1])
    if m ~= '0' then exclusive_name = entries[i] end
  end
end
local was_waiting = redis.call('ZREM', waiters, uid) == 1
if ARGV[9] == '1' and not was_waiting then
  -- Dropped from the queue meanwhile: fenced by an ExclusiveWithFencing producer (Pulsar
  -- fails its waiting producers with ProducerFenced), or its lease ran out.
  return {4, 'Fenced out while waiting for exclusive access', -1, -1, removed}
end
local queued = redis.call('ZCARD', waiters)

local function stale_epoch()
  return client_topic_epoch ~= nil and client_topic_epoch < current_epoch()
end

local function take_exclusive()
  -- Pulsar: setTopicEpoch(the producer's) on reconnect, else incrementTopicEpoch, whose
  -- first value is 0.
  local e = client_topic_epoch
  if e == nil then e = current_epoch() + 1 end
  redis.call('SET', epoch_key, e)
  return e
end

local topic_epoch
if mode == '0' then
  if exclusive_name or queued > 0 then
    return {3, 'Topic has an existing exclusive producer: ' .. (exclusive_name or '(waiting)'),
      -1, -1, removed}
  end
  topic_epoch = current_epoch()
elseif mode == '1' then
  if exclusive_name or queued > 0 then
    return {4, 'Topic has an existing exclusive producer: ' .. (exclusive_name or '(waiting)'),
      -1, -1, removed}
  elseif others > 0 then
    return {4, 'Topic has existing shared producers', -1, -1, removed}
  elseif stale_epoch() then
    return {4, 'Topic epoch has already moved. Current epoch: ' .. current_epoch() ..
      ', Producer epoch: ' .. client_topic_epoch, -1, -1, removed}
  end
  topic_epoch = take_exclusive()
elseif mode == '3' then
  -- Checked before fencing (Pulsar fences first): a fenced producer reconnecting with its
  -- old topic epoch must not fence the producer that replaced it.
  if stale_epoch() then
    return {4, 'Topic epoch has already moved. Current epoch: ' .. current_epoch() ..
      ', Producer epoch: ' .. client_topic_epoch, -1, -1, removed}
  end
  for i = 1, #entries, 2 do
    if entries[i] ~= name then
      redis.call('ZREM', producers, entries[i])
      redis.call('HDEL', owners, entries[i])
      removed = removed + 1
    end
  end
  removed = removed + queued
  redis.call('DEL', waiters)
  topic_epoch = take_exclusive()
elseif mode == '2' then
  -- A newcomer queues behind earlier waiters; a waiter trying again takes a free topic.
  if exclusive_name or others > 0 or (queued > 0 and not was_waiting) then
    redis.call('ZADD', waiters, now + lease, uid)
    return {5, 'Waiting for exclusive access', -1, -1, removed}
  elseif stale_epoch() then
    return {4, 'Topic epoch has already moved. Current epoch: ' .. current_epoch() ..
      ', Producer epoch: ' .. client_topic_epoch, -1, -1, removed}
  end
  topic_epoch = take_exclusive()
else
  return redis.error_reply('invalid producer access mode ' .. mode)
end

redis.call('ZADD', producers, now + lease, name)
redis.call('HSET', owners, name, mode .. ':' .. producer_epoch .. ':' .. uid)
return {0, 'OK', topic_epoch, last_sequence_id(), removed}
