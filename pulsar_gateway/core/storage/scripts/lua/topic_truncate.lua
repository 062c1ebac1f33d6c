--[[ topic_truncate: delete every entry of a topic partition but the last (Pulsar's admin
truncateTopic deletes the ledgers no cursor needs, keeping the current one), after the
caller moved every subscription's cursor to the end. The last entry stays so the topic's
last message id and its next entry ids go on as before.

KEYS[1] topic stream
Returns the number of entries deleted.
]]
local stream = KEYS[1]
local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
if not last then return 0 end
return redis.call('XTRIM', stream, 'MINID', last[1])
