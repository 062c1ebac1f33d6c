--[[ delete_topic: delete every key of one topic partition (Pulsar's admin deleteTopic,
also used for each partition of deletePartitionedTopic). Without force it is refused while
any consumer holds a live lease, as Pulsar refuses while clients are connected
(PersistentTopic.delete -> TopicBusyException -> 412).

KEYS[1] topic stream   KEYS[2] subscriptions hash (name -> type)
KEYS[3..] the producer registry, epoch, deduplication, ledger and schema keys, then the keys of the
  subscriptions named in ARGV[3..] (SubscriptionKeys.all in keys.py, SUB_KEYS
  each); every zset among them but the scheduled-message indexes (the ninth key of each
  subscription's) is a lease set (member -> expiry ms) that makes the topic busy while a
  lease is live (a connected producer or consumer)
ARGV[1] '1' force   ARGV[2] '1' dry run (check only)
ARGV[3..] the subscription names the caller read from KEYS[2]

Returns {code, message, existed}
  code 0 OK (existed: 1 when the stream or a subscription was there)
  code 1 busy: a consumer is connected (and not force)
  code 2 retry: a subscription was created since the caller read the list
]]
local SUB_KEYS, SCHEDULED = 10, 9
local stream, subs = KEYS[1], KEYS[2]
local force, dry_run = ARGV[1] == '1', ARGV[2] == '1'
local topic_keys = #KEYS - SUB_KEYS * (#ARGV - 2)

local known = {}
for i = 3, #ARGV do known[ARGV[i]] = true end
for _, sub in ipairs(redis.call('HKEYS', subs)) do
  if not known[sub] then return {2, 'Subscriptions changed', 0} end
end

if not force then
  local now = now_ms()
  for i = 3, #KEYS do
    local scheduled = i > topic_keys and (i - topic_keys) % SUB_KEYS == SCHEDULED
    if not scheduled and redis.call('TYPE', KEYS[i]).ok == 'zset'
        and redis.call('ZCOUNT', KEYS[i], '(' .. now, '+inf') > 0 then
      return {1, 'Topic has active producers/subscriptions', 0}
    end
  end
end

local existed = redis.call('EXISTS', stream, subs) > 0 and 1 or 0
if not dry_run then
  redis.call('DEL', unpack(KEYS))
end
return {0, 'OK', existed}
