--[[ register_schema: append a new schema version, if nobody appended one meanwhile.
The gateway reads the versions, checks compatibility against them, then calls this with
the count it saw; a concurrent registration makes the count differ and the gateway retries.

KEYS[1] schemas list (index = version)
ARGV[1] number of versions the caller checked against   ARGV[2] the new version (JSON)
Returns the new version number, or -1 when the list changed meanwhile.
]]
if redis.call('LLEN', KEYS[1]) ~= tonumber(ARGV[1]) then return -1 end
return redis.call('RPUSH', KEYS[1], ARGV[2]) - 1
