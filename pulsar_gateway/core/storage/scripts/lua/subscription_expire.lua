--[[ subscription_expire: expire messages of a subscription (Pulsar admin expireMessages,
PersistentSubscription.expireMessages / PersistentMessageExpiryMonitor): everything older
than an age, or up to a position, is acknowledged on this subscription (Pulsar moves the
mark-delete position to the newest matching entry). Consumers stay connected.

By age: an entry has expired when its publish time (the producer's, stored with the entry;
lib.lua entry_publish_time) is more than `seconds` before now (MessageImpl.isEntryExpired:
now > publish time + ttl, Pulsar's broker entry timestamp being off by default); the
newest expired entry is found by publish time as Pulsar's expiry monitor finds it
(lib.lua first_published_at). As in PersistentSubscription.expireMessages, the
request is not issued (Pulsar 409) when the backlog is empty, or when consumers are
connected, the backlog is under 1000 entries (MINIMUM_BACKLOG_FOR_EXPIRY_CHECK) and its
oldest entry has not expired.

By position (ResetCursorData): the newest entry at or before the position is the new
mark-delete position (PersistentMessageExpiryMonitor.expireMessages(Position)); a position
with a batch index acknowledges the batch's indexes before it (lib.lua cursor_position).
Not issued when the position is after the topic's last entry.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] 'age' or 'position'
age:      ARGV[3] seconds
position: ARGV[3] stream id   ARGV[4] '1' isExcluded   ARGV[5] batch index (-1 none)
Returns 1 issued, 0 not issued (Pulsar 409), -1 no such subscription
]]
local k = sub_keys()
local group, mode, parked = ARGV[1], ARGV[2], PARKED
if not group_exists(k.stream, group) then return -1 end

if mode == 'age' then
  local cutoff = now_ms() - tonumber(ARGV[3]) * 1000
  local pending = tonumber(redis.call('XPENDING', k.stream, group)[1])
  local oldest = redis.call('XPENDING', k.stream, group, '-', '+', 1)[1]
  oldest = oldest and oldest[1]
  local cursor = last_delivered(k.stream, group)
  local unread = 0
  if pending < 1000 then
    unread = #redis.call('XRANGE', k.stream, '(' .. cursor, '+', 'COUNT', 1000 - pending)
  end
  if not oldest and unread > 0 then
    oldest = redis.call('XRANGE', k.stream, '(' .. cursor, '+', 'COUNT', 1)[1][1]
  end
  local backlog = pending + unread
  if backlog == 0 then return 0 end
  local now = string.format('(%d', now_ms())
  local connected = redis.call('ZCOUNT', k.consumers, now, '+inf') > 0
  if connected and backlog < 1000 and published_time(k.stream, oldest) >= cutoff then
    return 0
  end
  if cutoff > 0 then ack_through(k, group, published_before(k.stream, cutoff)) end
  return 1
end

local last = redis.call('XREVRANGE', k.stream, '+', '-', 'COUNT', 1)[1]
if not last or id_less(last[1], ARGV[3]) then return 0 end
local position, ackset = cursor_position(k, ARGV[3], ARGV[4] == '1', tonumber(ARGV[5]))
if not ackset then
  ack_through(k, group, position)
  return 1
end
-- A batch partly consumed: everything before it is acknowledged, and of the batch only
-- the indexes still to consume stay (ANDed with what was already acknowledged).
ack_through(k, group, '(' .. position)
local held = redis.call('XPENDING', k.stream, group, position, position, 1)[1]
if held then
  local current = redis.call('HGET', k.acksets, position) or string.rep('1', #ackset)
  local left = {}
  for i = 1, #ackset do
    left[i] = (string.sub(current, i, i) == '1' and string.sub(ackset, i, i) == '1') and '1' or '0'
  end
  local merged = table.concat(left)
  if ones(merged) == 0 then
    ack_pending(k, group, {position})
  else
    redis.call('HSET', k.acksets, position, merged)
  end
else
  hold_partial(k, group, position, ackset, parked)
end
return 1
