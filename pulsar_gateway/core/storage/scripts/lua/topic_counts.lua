--[[ topic_counts: what a producer or consumer checks before it attaches, in one read-only
call: whether the topic was terminated (topic_terminate.lua), and what the limit policies
count (Pulsar's AbstractTopic.isProducersExceeded, isSubscriptionsExceeded,
PersistentSubscription's consumer count, AbstractTopic.isConsumersExceededOnTopic): live
producers (unexpired leases), the topic's subscriptions, whether one subscription exists and
how many live consumers it has, and, when asked, the live consumers of every subscription.

KEYS[1] producer leases zset   KEYS[2] subscriptions hash   KEYS[3] the subscription's
consumer leases zset ('' subscription: the topic's counts only)   KEYS[4] ledger hash
ARGV[1] subscription name ('' for none)   ARGV[2] a producer name not to count (one
reconnecting before its lease ran out is not a new producer)   ARGV[3] '' or the prefix of
the subscriptions' consumer leases zsets ('P:{T}:consumers:', same slot as KEYS[2]): count
the topic's consumers (one ZCOUNT per subscription, so only when a limit asks for it)
Returns {producers, subscriptions, subscription exists 1|0, its consumers, terminated 1|0,
the topic's consumers (0 unless ARGV[3])}
]]
local now = now_ms()
local producers = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
if ARGV[2] ~= '' then
  local expiry = redis.call('ZSCORE', KEYS[1], ARGV[2])
  if expiry and tonumber(expiry) > now then producers = producers - 1 end
end
local subscriptions = redis.call('HLEN', KEYS[2])
local exists, consumers = 0, 0
if ARGV[1] ~= '' then
  exists = redis.call('HEXISTS', KEYS[2], ARGV[1])
  consumers = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
end
local on_topic = 0
if ARGV[3] ~= '' then
  for _, sub in ipairs(redis.call('HKEYS', KEYS[2])) do
    on_topic = on_topic + redis.call('ZCOUNT', ARGV[3] .. sub, '(' .. now, '+inf')
  end
end
return {producers, subscriptions, exists, consumers, redis.call('HEXISTS', KEYS[4], 'x'), on_topic}
