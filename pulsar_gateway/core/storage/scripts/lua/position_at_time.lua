--[[ position_at_time: the position just before the first entry stored at or after a time,
read only: where a read by time starts (the Spark data source's startingTime and
endingTime). Entry ids say nothing of time; broker timestamps do (lib.lua first_stored_at).

KEYS[1] topic stream   ARGV[1] time (ms)
Returns the stream id to read after: just before that entry; the last entry's id when every
entry is older; '0' when the stream is empty or missing.
]]
-- (by broker timestamp, the time Redis stored the entry: not seek.lua's publish-time rule)
local stream = KEYS[1]
local first = first_stored_at(stream, tonumber(ARGV[1]))
if first then return id_before(first) end
local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
return last and last[1] or '0'
