--[[ inactive_topic: how long one topic partition has been inactive, for the sweep that
deletes inactive topics (Pulsar's PersistentTopic.checkGC and isActive(deleteMode)), read
from what every gateway of the fleet writes, on Redis's clock.

Active (isActive): a producer, a queued exclusive producer or a consumer holds a live lease;
in mode 'no-subscriptions' also while the topic has any subscription, in mode 'caught-up'
while a subscription has a backlog (unacknowledged entries, lib.lua group_backlogs). An
active topic gets its mark (ledger hash field 'a') set to now, as checkGC sets lastActive
when it finds the topic active. An inactive one has been so since the latest of: the mark,
its last append (field 't') and the end of any lease that ran out without being released
(a gateway that died). A topic found inactive without a mark gets one now: Pulsar starts
lastActive when a broker loads the topic, so no topic goes sooner than the inactive time
after a sweep first saw it.

Nothing is written for a topic that has no key at all (only its name in the namespace's
list: created and never used, or deleted while the caller listed it), so a sweep racing a
deletion leaves nothing behind; the caller keeps such a topic's first sighting itself.

KEYS[1] ledger hash   KEYS[2] subscriptions hash   KEYS[3] stream
KEYS[4] producer leases zset   KEYS[5] producer waiters zset
KEYS[6..] the consumer leases zset of each subscription named in ARGV[2..], in that order
ARGV[1] mode: 'no-subscriptions' (delete_when_no_subscriptions) or 'caught-up'
  (delete_when_subscriptions_caught_up)
ARGV[2..] the subscription names the caller read from KEYS[2]
Returns {code, inactive ms}
  code 0 active (mark set to now)
  code 1 inactive for `inactive ms` (0 when the mark was set just now)
  code 2 retry: the subscriptions changed since the caller read them
  code 3 the topic has no key: nothing stored, nothing to mark
]]
local ledger, subs, stream = KEYS[1], KEYS[2], KEYS[3]
local mode = ARGV[1]

local names = redis.call('HKEYS', subs)
if #names ~= #ARGV - 1 then return {2, 0} end
local known = {}
for i = 2, #ARGV do known[ARGV[i]] = true end
for _, name in ipairs(names) do
  if not known[name] then return {2, 0} end
end

local now = now_ms()
local active, last = false, 0
for i = 4, #KEYS do
  if redis.call('ZCOUNT', KEYS[i], '(' .. now, '+inf') > 0 then
    active = true
    break
  end
  local top = redis.call('ZREVRANGE', KEYS[i], 0, 0, 'WITHSCORES')
  if top[2] then last = math.max(last, tonumber(top[2])) end
end
local has_stream = redis.call('EXISTS', stream) == 1
if not active then
  if mode == 'no-subscriptions' then
    active = #names > 0
  elseif has_stream then
    for _, group in ipairs(group_backlogs(stream)) do
      if group.unacked > 0 then
        active = true
        break
      end
    end
  end
end

if active then
  redis.call('HSET', ledger, 'a', now)
  return {0, 0}
end
if not has_stream and #names == 0 and last == 0 and redis.call('EXISTS', ledger) == 0 then
  return {3, 0}
end
local seen = redis.call('HMGET', ledger, 'a', 't')
if not seen[1] then
  redis.call('HSET', ledger, 'a', now)
  return {1, 0}
end
last = math.max(last, tonumber(seen[1]), tonumber(seen[2]) or 0)
return {1, math.max(now - last, 0)}
