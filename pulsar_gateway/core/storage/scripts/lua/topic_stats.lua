--[[ topic_stats: the figures of one topic partition that live in Redis, read in one step
(admin topic stats, /metrics), so every gateway of the fleet reports the same.

KEYS[1] topic stream   KEYS[2] subscriptions hash (name -> type)
KEYS[3] gateway-stats hash (gateway id -> JSON report, pulsar_gateway/core/fleet/rates.py)
KEYS[4] producers zset (name -> lease expiry)
KEYS[5 + 2i], KEYS[6 + 2i] consumers zset and consumer-info hash of subscription ARGV[1 + i]
ARGV[1..] subscription names (those of the subscriptions hash, read just before)
Returns JSON: {now, length, added, first, last, size, producers = [names with a live lease],
reports = [report JSON texts], subs = [{name, type, cursor, backlog, pending, delayed,
parked, waiting, consumers = [{uid, name, priority, unacked}]}]}. backlog counts entries
after the cursor plus pending ones (Pulsar's msgBacklog is in entries too); pending
entries held by reserved consumers are parked (awaiting redelivery), delayed (scheduled)
or waiting (Key_Shared, read for a consumer but not sent); the rest are unacked.
]]
local stream, subs, reports, producers = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = now_ms()
local out = {now = now, length = 0, added = 0, first = '', last = '', size = 0}
-- the count of entries after `cursor`, when XINFO GROUPS cannot tell (lag is nil after
-- XGROUP SETID or a deletion inside the range): counted ledger by ledger without reading
-- the entries (lib.lua walk_after), up to a bound that keeps the script short. Reading
-- them took a topic with 90 subscriptions a second of Redis time per call.
local LAG_SCAN_LIMIT = 100000
local function count_after(cursor)
  local _, n = walk_after(stream, cursor, LAG_SCAN_LIMIT)
  return n
end

local groups = {}
if redis.call('EXISTS', stream) == 1 then
  local info = redis.call('XINFO', 'STREAM', stream)
  for i = 1, #info, 2 do
    local name, value = info[i], info[i + 1]
    if name == 'length' then out.length = value
    elseif name == 'entries-added' then out.added = value
    elseif name == 'last-generated-id' then out.last = value
    elseif name == 'first-entry' and value then out.first = value[1]
    end
  end
  out.size = redis.call('MEMORY', 'USAGE', stream) or 0
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local name, fields = nil, {}
    for i = 1, #g, 2 do fields[g[i]] = g[i + 1] end
    groups[fields['name']] = fields
  end
end

out.producers = {}
for i, member in ipairs(redis.call('ZRANGEBYSCORE', producers, now, '+inf')) do
  out.producers[i] = member
end
out.reports = redis.call('HVALS', reports)

out.subs = {}
for i, name in ipairs(ARGV) do
  local sub_type = redis.call('HGET', subs, name)
  if sub_type then
    local consumers_key, info_key = KEYS[3 + 2 * i], KEYS[4 + 2 * i]
    local s = {name = name, type = tonumber(sub_type), cursor = '', backlog = 0, pending = 0,
               delayed = 0, parked = 0, waiting = 0, consumers = {}}
    local group = groups[name]
    local by_consumer = {}
    if group then
      s.cursor = group['last-delivered-id']
      s.pending = group['pending']
      local lag = group['lag']
      if type(lag) ~= 'number' then lag = count_after(s.cursor) end
      s.backlog = lag + s.pending
      for _, c in ipairs(redis.call('XPENDING', stream, name)[4] or {}) do
        local owner, count = c[1], tonumber(c[2])
        if owner == DELAYED then s.delayed = count
        elseif string.sub(owner, 1, #WAITING) == WAITING then s.waiting = s.waiting + count
        elseif string.sub(owner, 1, #RESERVED_MARK) == RESERVED_MARK then s.parked = s.parked + count
        else by_consumer[owner] = count end
      end
    end
    for _, uid in ipairs(redis.call('ZRANGEBYSCORE', consumers_key, now, '+inf')) do
      local priority, _, cname = parse_info(redis.call('HGET', info_key, uid))
      s.consumers[#s.consumers + 1] = {uid = uid, name = cname, priority = priority,
                                       unacked = by_consumer[uid] or 0}
    end
    out.subs[#out.subs + 1] = s
  end
end
return cjson.encode(out)
