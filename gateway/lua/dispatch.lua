--[[ dispatch: hand up to `permits` messages of a subscription to one consumer.

Redeliveries (entries owned by the parked consumer) go first, oldest id first; then new
entries past the group's cursor. Permits count messages, not entries: a client batch of N
messages costs N permits. Like Pulsar's dispatchers, a whole entry is sent while at least one
permit remains (the last entry may overshoot). Entries read beyond that are un-read (XACK
and the cursor set back), so permits are honoured exactly.

KEYS[1] topic stream        KEYS[2] consumers zset (uid -> lease expiry ms)
ARGV[1] subscription name   ARGV[2] consumer uid   ARGV[3] permits (messages)
ARGV[4] expected messages per entry (>= 1), sizes the first read
ARGV[5] lease ms            ARGV[6] parked consumer name

Returns {code, id1, fields1, redelivery_count1, id2, ...}
  code 0 OK; 2 consumer gone (its lease expired and it was reaped: close it)
]]
local stream, consumers = KEYS[1], KEYS[2]
local group, uid, parked = ARGV[1], ARGV[2], ARGV[6]
local remaining = tonumber(ARGV[3])
local per_entry = math.max(1, tonumber(ARGV[4]))

if not redis.call('ZSCORE', consumers, uid) then return {2} end
redis.call('ZADD', consumers, 'XX', now_ms() + tonumber(ARGV[5]), uid)

local out = {0}

-- 1. redeliveries
while remaining > 0 do
  local pending = redis.call('XPENDING', stream, group, '-', '+', math.min(remaining, 100), parked)
  if #pending == 0 then break end
  for _, p in ipairs(pending) do
    if remaining <= 0 then break end
    local claimed = redis.call('XCLAIM', stream, group, uid, 0, p[1])
    local entry = claimed[1]
    if entry and entry[2] then
      out[#out + 1] = entry[1]
      out[#out + 1] = entry[2]
      out[#out + 1] = p[4]  -- deliveries so far = redeliveries after this one
      remaining = remaining - entry_size(entry[2])
    else
      -- trimmed from the stream meanwhile: nothing left to deliver
      redis.call('XACK', stream, group, p[1])
    end
  end
end

-- 2. new entries
while remaining > 0 do
  local want = math.max(1, math.floor(remaining / per_entry))
  local reply = redis.call('XREADGROUP', 'GROUP', group, uid, 'COUNT', want, 'STREAMS', stream, '>')
  if not reply then break end
  local entries = reply[1][2]
  for i, entry in ipairs(entries) do
    if remaining <= 0 then
      local args = {'XACK', stream, group}
      for j = i, #entries do args[#args + 1] = entries[j][1] end
      redis.call(unpack(args))
      redis.call('XGROUP', 'SETID', stream, group, entries[i - 1][1])
      return out
    end
    out[#out + 1] = entry[1]
    out[#out + 1] = entry[2]
    out[#out + 1] = 0
    remaining = remaining - entry_size(entry[2])
  end
  if #entries < want then break end
end
return out
