--[[ inactive_subscriptions: how long each subscription of one topic partition has been
without a consumer, for the sweep that deletes expired subscriptions (Pulsar's
PersistentTopic.checkInactiveSubscriptions, against the cursor's lastActive, which a
consumer's arrival and departure and its acknowledgements set).

A subscription with a live consumer lease gets its mark (the field LAST_ACTIVE of its
consumer-info hash) set to now; once marked, every consumer leaving sets it too (lib.lua
release_consumer: Pulsar's removeConsumer). One without a live consumer has been inactive
since the latest of its mark and the end of any consumer lease that ran out without being
released yet (a gateway that died); one without a mark gets it now, as Pulsar's cursor
starts lastActive when it is opened. The mark lives in a hash that every deletion of the
subscription deletes, so a subscription made again under the same name starts afresh; a
seek or cursor reset also deletes it, which only postpones an expiry.

KEYS[1] subscriptions hash
KEYS[2i], KEYS[2i + 1] the consumer leases zset and consumer-info hash of subscription
  ARGV[i]
ARGV[1..] subscription names
Returns {name, inactive ms, ...}: each named subscription that exists and has no live
consumer (inactive ms 0 when its mark was set just now)
]]
local subs = KEYS[1]
local now = now_ms()
local out = {}
for i = 1, #ARGV do
  local name, consumers, info = ARGV[i], KEYS[2 * i], KEYS[2 * i + 1]
  if redis.call('HEXISTS', subs, name) == 1 then
    if redis.call('ZCOUNT', consumers, '(' .. now, '+inf') > 0 then
      redis.call('HSET', info, LAST_ACTIVE, now)
    else
      local seen = tonumber(redis.call('HGET', info, LAST_ACTIVE))
      local inactive = 0
      if seen then
        local top = redis.call('ZREVRANGE', consumers, 0, 0, 'WITHSCORES')
        local last = math.max(seen, tonumber(top[2]) or 0)
        inactive = math.max(now - last, 0)
      else
        redis.call('HSET', info, LAST_ACTIVE, now)
      end
      out[#out + 1] = name
      out[#out + 1] = inactive
    end
  end
end
return out
