--[[ position_at_time: the position just before the first entry stored at or after a time,
read only: where a read by time starts (the Spark data source's startingTime and
endingTime). Entry ids say nothing of time; broker timestamps do (lib.lua first_stored_at).

KEYS[1] topic stream   ARGV[1] time (ms)
Returns the stream id to read after: just before that entry; the last entry's id when every
entry is older; '0' when the stream is empty or missing.
]]
return group_position(KEYS[1], '@' .. ARGV[1])
