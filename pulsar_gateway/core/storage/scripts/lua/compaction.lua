--[[ compaction: the state of a topic's compaction, changed atomically (one script, four ops).

Pulsar's trigger refuses a second compaction while one runs (HTTP 409) and reports
NOT_RUN / RUNNING / SUCCESS / ERROR (LongRunningProcessStatus). Here the running compactor
holds a lease in the state hash, renewed as it works; a compactor whose gateway died loses
it, and a later trigger starts afresh. Only the holder of the current run token may commit.

KEYS[1] topic stream       KEYS[2] compaction hash      KEYS[3] compacted view stream
KEYS[4] view being built (stream)
ARGV[1] op: 'begin' | 'renew' | 'commit' | 'fail'
ARGV[2] run token          ARGV[3] lease ms (begin, renew)
        commit: ARGV[3] the new horizon, ARGV[4] '1' to replace the view with the one built,
                '0' to keep the view (nothing new was read)
        fail: ARGV[3] the error text

Returns
  begin  {0, old horizon or '', new horizon or ''}: started; the new horizon is the topic's
         last entry id now ('' when the topic has no entries)
         {1} another compaction is running;  {2} the topic does not exist
  renew / commit / fail  {0} done; {1} this run is no longer the current one
]]
local stream, state, view, building = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, token = ARGV[1], ARGV[2]
local now = now_ms()

if op == 'begin' then
  local status = redis.call('HGET', state, 'status')
  local lease = tonumber(redis.call('HGET', state, 'lease') or '0')
  if status == 'RUNNING' and lease > now then return {1} end
  if redis.call('EXISTS', stream) == 0 then return {2} end
  redis.call('DEL', building)
  redis.call('HSET', state, 'status', 'RUNNING', 'lastError', '', 'run', token,
    'lease', now + tonumber(ARGV[3]))
  local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
  return {0, redis.call('HGET', state, 'horizon') or '', last and last[1] or ''}
end

if redis.call('HGET', state, 'run') ~= token then return {1} end

if op == 'renew' then
  redis.call('HSET', state, 'lease', now + tonumber(ARGV[3]))
elseif op == 'commit' then
  -- Readers switch from the old view to the new one in this one step.
  if ARGV[4] == '1' then
    if redis.call('EXISTS', building) == 1 then
      redis.call('RENAME', building, view)
    else
      redis.call('DEL', view)  -- every key was deleted
    end
  end
  redis.call('HSET', state, 'status', 'SUCCESS', 'lastError', '')
  if ARGV[3] ~= '' then redis.call('HSET', state, 'horizon', ARGV[3]) end
  redis.call('HDEL', state, 'run', 'lease')
elseif op == 'fail' then
  redis.call('DEL', building)
  redis.call('HSET', state, 'status', 'ERROR', 'lastError', ARGV[3])
  redis.call('HDEL', state, 'run', 'lease')
end
return {0}
