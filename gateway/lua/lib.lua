--[[ lib.lua: helpers prepended to every script by gateway/scripts.py. Not a script itself.

Rules of these scripts:
  * Each script touches only the keys of one topic partition (one hash tag, one cluster slot).
  * Time comes from Redis (TIME), never from a gateway, so leases mean the same on every
    gateway whatever their clocks say.
  * Within a consumer group the pending-entries list (PEL) is the subscription's unacked set.
    The reserved consumer PARKED (ARGV) owns entries waiting for redelivery; a move to it uses
    XCLAIM JUSTID, which does not count a delivery, and the move out of it (dispatch) uses
    plain XCLAIM, which does. So an entry's delivery count minus one is Pulsar's
    redelivery_count.
]]

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- true when the consumer group exists on the stream
local function group_exists(stream, group)
  local reply = redis.pcall('XPENDING', stream, group)
  return type(reply) ~= 'table' or reply.err == nil
end

-- XCLAIM ids to `owner` without counting a delivery.
local function claim_justid(stream, group, owner, ids)
  if #ids == 0 then return end
  local args = {'XCLAIM', stream, group, owner, 0}
  for _, id in ipairs(ids) do args[#args + 1] = id end
  args[#args + 1] = 'JUSTID'
  redis.call(unpack(args))
end

-- Move every pending entry of `owner` to the parked consumer. Returns how many moved.
local function park_all(stream, group, owner, parked)
  if owner == parked then return 0 end
  local moved = 0
  while true do
    local pending = redis.call('XPENDING', stream, group, '-', '+', 1000, owner)
    if #pending == 0 then break end
    local ids = {}
    for i, p in ipairs(pending) do ids[i] = p[1] end
    claim_justid(stream, group, parked, ids)
    moved = moved + #ids
  end
  return moved
end

-- Detach consumer `uid`: its unacked entries go back to the subscription (parked),
-- then it is forgotten. Returns how many entries were handed back.
local function release_consumer(stream, group, consumers, names, uid, parked)
  local moved = 0
  if group_exists(stream, group) then
    moved = park_all(stream, group, uid, parked)
    redis.call('XGROUP', 'DELCONSUMER', stream, group, uid)
  end
  redis.call('ZREM', consumers, uid)
  redis.call('HDEL', names, uid)
  return moved
end

-- Release every consumer whose lease has expired (its gateway died or lost Redis).
local function reap_expired(stream, group, consumers, names, now, parked)
  local moved = 0
  for _, uid in ipairs(redis.call('ZRANGEBYSCORE', consumers, '-inf', now)) do
    moved = moved + release_consumer(stream, group, consumers, names, uid, parked)
  end
  return moved
end

-- "ms-seq" -> ms, seq (both fit a double exactly for any real stream id)
local function split_id(id)
  local dash = string.find(id, '-', 1, true)
  return tonumber(string.sub(id, 1, dash - 1)), tonumber(string.sub(id, dash + 1))
end

local function id_less(a, b)
  local ams, aseq = split_id(a)
  local bms, bseq = split_id(b)
  return ams < bms or (ams == bms and aseq < bseq)
end

-- The group's last-delivered id (its read cursor), or nil when the group does not exist.
local function last_delivered(stream, group)
  for _, info in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local name, last
    for i = 1, #info, 2 do
      if info[i] == 'name' then name = info[i + 1] end
      if info[i] == 'last-delivered-id' then last = info[i + 1] end
    end
    if name == group then return last end
  end
  return nil
end

-- Number of messages in an entry: the `n` field for client batches, else 1.
local function entry_size(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'n' then return tonumber(fields[i + 1]) end
  end
  return 1
end
