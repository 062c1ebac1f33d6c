--[[ topic_terminate: terminate a topic partition (Pulsar's admin terminate,
ManagedLedgerImpl.asyncTerminate): from now on append_entries.lua stores nothing on it.
Terminating it again answers the same last entry.

KEYS[1] topic stream   KEYS[2] ledger hash
Returns the id of the topic's last entry ('-' when it has none).
]]
local stream, ledger = KEYS[1], KEYS[2]
local done = redis.call('HGET', ledger, 'x')
if done then return done end
local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
local id = last and last[1] or '-'
redis.call('HSET', ledger, 'x', id)
return id
