--[[ lib.lua: helpers prepended to every script (after the generated prelude of names:
F_BLOB and the other entry fields, PARKED, DELAYED, WAITING, NO_OWNER; see
pulsar_gateway/core/storage/scripts/__init__.py). Not a script itself.

Rules of these scripts:
  * Each script touches only the keys of one topic partition (one hash tag, one cluster slot).
  * Time comes from Redis (TIME), never from a gateway, so leases mean the same on every
    gateway whatever their clocks say.
  * Within a consumer group the pending-entries list (PEL) is the subscription's unacked set.
    The reserved consumer PARKED owns entries waiting for redelivery; a move to it uses
    XCLAIM JUSTID, which does not count a delivery, and the move out of it (dispatch) uses
    plain XCLAIM, which does. So an entry's delivery count minus one is Pulsar's
    redelivery_count. Key_Shared adds reserved consumers WAITING .. uid (read for that
    consumer, not sent yet) and NO_OWNER (hash covered by nobody).
  * Subscription scripts take the same KEYS, in the order of SubscriptionKeys.all (keys.py):
    see sub_keys().
]]

local HASH_SPACE = 65536

-- KEYS of a subscription script, by name.
local function sub_keys()
  return {
    stream = KEYS[1], subs = KEYS[2], consumers = KEYS[3], info = KEYS[4],
    ranges = KEYS[5], joined = KEYS[6], acksets = KEYS[7], np_consumers = KEYS[8],
    delayed = KEYS[9], properties = KEYS[10],
  }
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Microseconds as a decimal string (a number this large would be concatenated in
-- exponent notation, losing digits).
local function now_us()
  local t = redis.call('TIME')
  return t[1] .. string.format('%06d', tonumber(t[2]))
end

-- true when the consumer group exists on the stream
local function group_exists(stream, group)
  local reply = redis.pcall('XPENDING', stream, group)
  return type(reply) ~= 'table' or reply.err == nil
end

-- XCLAIM ids to `owner` without counting a delivery; with `retrycount`, also set the
-- delivery counter (0 for entries read but never sent to a client).
local function claim_justid(stream, group, owner, ids, retrycount)
  if #ids == 0 then return end
  local args = {'XCLAIM', stream, group, owner, 0}
  for _, id in ipairs(ids) do args[#args + 1] = id end
  if retrycount then
    args[#args + 1] = 'RETRYCOUNT'
    args[#args + 1] = retrycount
  end
  args[#args + 1] = 'JUSTID'
  redis.call(unpack(args))
end

-- Move every pending entry of consumer `from` to consumer `to`. Returns how many moved.
local function move_all(stream, group, from, to)
  if from == to then return 0 end
  local moved = 0
  while true do
    local pending = redis.call('XPENDING', stream, group, '-', '+', 1000, from)
    if #pending == 0 then break end
    local ids = {}
    for i, p in ipairs(pending) do ids[i] = p[1] end
    claim_justid(stream, group, to, ids)
    moved = moved + #ids
  end
  return moved
end

local function park_all(stream, group, owner, parked)
  return move_all(stream, group, owner, parked)
end

-- "L-E" -> L, E (both fit a double exactly for any real stream id)
local function split_id(id)
  local dash = string.find(id, '-', 1, true)
  return tonumber(string.sub(id, 1, dash - 1)), tonumber(string.sub(id, dash + 1))
end

local function id_less(a, b)
  local ams, aseq = split_id(a)
  local bms, bseq = split_id(b)
  return ams < bms or (ams == bms and aseq < bseq)
end

-- The broker timestamp of a stored entry {id, fields}: its F_BROKER_TIME field, or for an
-- entry stored before ledgers (whose ledger id was the time it was stored) its id's first
-- part.
local function entry_time(entry)
  local fields = entry[2]
  for i = 1, #fields, 2 do
    if fields[i] == F_BROKER_TIME then return tonumber(fields[i + 1]) end
  end
  return (split_id(entry[1]))
end

-- The id of the first entry stored at or after `ts` (ms), nil when every entry is older.
-- Broker timestamps never decrease along the stream, and every entry of a ledger was
-- stored at or after the ledger's id and before the next ledger's (append_entries.lua), so
-- only the last ledger opened at or before `ts` is searched: a binary search over its
-- entry ids, each probe the first entry at or after an id (gaps left by trims are
-- skipped), about log2(entries per ledger) reads.
local function first_stored_at(stream, ts)
  local function first_from(start)
    return redis.call('XRANGE', stream, start, '+', 'COUNT', 1)[1]
  end
  local last = redis.call(
    'XREVRANGE', stream, string.format('%d-18446744073709551615', ts), '-', 'COUNT', 1)[1]
  if not last then
    local first = first_from('-')
    return first and first[1]
  end
  if entry_time(last) < ts then
    local after = first_from('(' .. last[1])
    return after and after[1]
  end
  local ledger, hi = split_id(last[1])
  local lo = 0
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if entry_time(first_from(string.format('%d-%d', ledger, mid))) >= ts then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return first_from(string.format('%d-%d', ledger, lo))[1]
end

-- The publish time of a stored entry {id, fields}: its F_PUBLISH_TIME field (the
-- producer's MessageMetadata.publish_time, as append_entries.lua stored it), or for an
-- entry stored without one its broker timestamp.
local function entry_publish_time(entry)
  local fields = entry[2]
  for i = 1, #fields, 2 do
    if fields[i] == F_PUBLISH_TIME then return tonumber(fields[i + 1]) end
  end
  return entry_time(entry)
end

-- The id of the first entry published at or after `ts` (ms), nil when none is: where a seek
-- or reset by time restarts. Pulsar (PersistentSubscription.resetCursor(timestamp) with
-- PersistentMessageFinder) finds the newest entry published before the timestamp
-- (MessageImpl.isEntryPublishedEarlierThan: publish time < timestamp) with a binary search
-- over the entries, taking publish times to rise along the ledger, and restarts at the entry
-- after it (at the first entry when none qualifies): a message published in the very
-- millisecond of the timestamp is delivered again. Publish times come from the producers'
-- clocks, so they are not the broker timestamps, nor ordered by them: the search is by
-- publish time, with the same assumption and the same binary search, over the stream ids.
-- "The first entry at or after id x is published at or after ts" only turns from false to
-- true as x grows, so it is bisected first over the ids' ledger part (at most 41 steps for
-- ms times), then over the entry numbers of the one ledger where it turns (at most 16 for a
-- 50,000-entry ledger): an XRANGE of one entry a step, whatever the clocks, and no
-- broker-time margin to guess.
local function first_published_at(stream, ts)
  local function first_from(start)
    return redis.call('XRANGE', stream, start, '+', 'COUNT', 1)[1]
  end
  -- past the boundary: published at or after ts, or no entry at all (past the last one)
  local function past(start)
    local entry = first_from(start)
    return entry == nil or entry_publish_time(entry) >= ts, entry
  end
  local first = first_from('-')
  if not first then return nil end
  if entry_publish_time(first) >= ts then return first[1] end
  local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
  if entry_publish_time(last) < ts then return nil end
  -- past(lo-0) is false and past(hi-0) true: the ledger where it turns
  local lo, hi = split_id(first[1]), split_id(last[1]) + 1
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    if past(string.format('%d-0', mid)) then hi = mid else lo = mid end
  end
  -- ledger lo's first entry is not past and everything from ledger lo + 1 on is: bisect
  -- its entry numbers the same way, up to one after its last entry
  local ledger = lo
  local _, seq_lo = split_id(first_from(string.format('%d-0', ledger))[1])
  local top = redis.call(
    'XREVRANGE', stream, string.format('%d-18446744073709551615', ledger), '-', 'COUNT', 1)[1]
  local _, seq_hi = split_id(top[1])
  seq_hi = seq_hi + 1
  while seq_hi - seq_lo > 1 do
    local mid = math.floor((seq_lo + seq_hi) / 2)
    if past(string.format('%d-%d', ledger, mid)) then seq_hi = mid else seq_lo = mid end
  end
  local _, found = past(string.format('%d-%d', ledger, seq_hi))
  return found and found[1]
end

-- The exclusive end of the entries stored before `ts`, as XRANGE/XPENDING take it.
local function stored_before(stream, ts)
  local first = first_stored_at(stream, ts)
  if first then return '(' .. first end
  return '+'
end

-- The exclusive end of the entries published before `ts` (first_published_at), as
-- XRANGE/XPENDING take it: the entries a message TTL of now - ts has expired.
local function published_before(stream, ts)
  local first = first_published_at(stream, ts)
  if first then return '(' .. first end
  return '+'
end

-- The broker timestamp of entry `id` (its ledger id when the entry is gone).
local function stored_time(stream, id)
  local entry = redis.call('XRANGE', stream, id, id)[1]
  if entry then return entry_time(entry) end
  return (split_id(id))
end

-- The publish time of entry `id` (entry_publish_time; its ledger id when the entry is gone).
local function published_time(stream, id)
  local entry = redis.call('XRANGE', stream, id, id)[1]
  if entry then return entry_publish_time(entry) end
  return (split_id(id))
end

-- {name, last-delivered-id} of every consumer group of the stream.
local function group_cursors(stream)
  local groups = {}
  for _, info in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local name, last
    for i = 1, #info, 2 do
      if info[i] == 'name' then name = info[i + 1] end
      if info[i] == 'last-delivered-id' then last = info[i + 1] end
    end
    groups[#groups + 1] = {name, last}
  end
  return groups
end

-- The group's last-delivered id (its read cursor), or nil when the group does not exist.
local function last_delivered(stream, group)
  for _, g in ipairs(group_cursors(stream)) do
    if g[1] == group then return g[2] end
  end
  return nil
end

-- Entry field value, or nil.
local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return nil
end

-- Number of messages in an entry: the `n` field for client batches, else 1.
local function entry_size(fields)
  local n = field(fields, F_NUM_MESSAGES)
  if n then return tonumber(n) end
  return 1
end

-- Unacked messages of a partly acknowledged batch: the '1's of its ack set.
local function ones(ackset)
  local _, count = string.gsub(ackset, '1', '')
  return count
end

-- Append one delivery {id, fields, redelivery_count, ack set or ''} to `out`; returns the
-- permits it costs: the unacked messages of a partly acknowledged batch, else its size.
local function append_delivery(out, id, fields, redeliveries, ackset)
  out[#out + 1] = id
  out[#out + 1] = fields
  out[#out + 1] = redeliveries
  out[#out + 1] = ackset or ''
  if ackset then return ones(ackset) end
  return entry_size(fields)
end

-- append_delivery with the subscription's stored ack set of the entry. Only entries
-- delivered before can have one, so callers pass `acksets` only for redeliveries.
local function emit(out, id, fields, redeliveries, acksets)
  local ackset = false
  if acksets then ackset = redis.call('HGET', acksets, id) end
  return append_delivery(out, id, fields, redeliveries, ackset)
end


-- The deliver-at time of an entry that must wait, or nil when it is due (or has none).
local function deliver_later(fields, now)
  local at = field(fields, F_DELIVER_AT)
  if at and tonumber(at) > now then return at end
  return nil
end

-- With `schedule` (a Shared subscription's new_schedule), schedule `entry` ({id, fields})
-- if its deliver-at time is still ahead of `now`; true when it was.
local function held_back(schedule, entry, now)
  if not schedule then return false end
  local at = deliver_later(entry[2], now)
  if not at then return false end
  schedule.add(entry[1], at)
  return true
end

-- Claim entry `id` (pending at `owner`) for consumer `uid`, counting a delivery, and emit it.
-- Returns the permits used, or nil when the entry left the stream meanwhile (then it is acked).
-- With `schedule` (a Shared subscription's new_schedule), an entry whose deliver-at time is
-- still ahead of `now` is scheduled instead (0 permits): only an entry read natively by a
-- gateway that died, or whose consumer left, before it scheduled the entry can be one
-- (dispatch.lua ARGV[8], settle_read.lua), and it must not be delivered early.
local function claim_and_emit(k, group, uid, id, delivered_before, out, schedule, now)
  local claimed = redis.call('XCLAIM', k.stream, group, uid, 0, id)
  local entry = claimed[1]
  if entry and entry[2] then
    if held_back(schedule, entry, now) then return 0 end
    return emit(out, entry[1], entry[2], delivered_before, k.acksets)
  end
  -- trimmed from the stream meanwhile (retention, TTL): nothing left to deliver
  redis.call('XACK', k.stream, group, id)
  redis.call('HDEL', k.acksets, id)
  return nil
end

-- Most entries one XREADGROUP asks for (also bounds what one read schedules at once).
local READ_BATCH = 250

-- Read new entries past the group's cursor for consumer `uid` and hand each to
-- `take(entry)`, which returns the permits it used (0 for an entry it queued elsewhere or
-- scheduled for later). Stops when the permits run out, the stream is exhausted, `limit`
-- entries were read or `full()` says so. Entries read beyond the permits are un-read (XACK
-- and the cursor set back before them), so permits are honoured exactly; as the permits
-- only run out after an entry was taken, an un-read entry always has a taken one before it.
-- A read that cost no permits makes the next one larger, so a run of scheduled or queued
-- entries is crossed in few reads.
local function read_new(k, group, uid, remaining, per_entry, limit, take, full)
  local examined = 0
  local boost = 1
  while remaining > 0 and examined < limit and not (full and full()) do
    local want = math.min(limit - examined, READ_BATCH,
      math.max(1, math.floor(remaining / per_entry)) * boost)
    local reply = redis.call('XREADGROUP', 'GROUP', group, uid, 'COUNT', want, 'STREAMS', k.stream, '>')
    if not reply then break end
    local entries = reply[1][2]
    local before = remaining
    for i, entry in ipairs(entries) do
      if remaining <= 0 then
        local args = {'XACK', k.stream, group}
        for j = i, #entries do args[#args + 1] = entries[j][1] end
        redis.call(unpack(args))
        redis.call('XGROUP', 'SETID', k.stream, group, entries[i - 1][1])
        return
      end
      examined = examined + 1
      remaining = remaining - take(entry)
    end
    if #entries < want then break end
    if remaining == before then boost = boost * 4 end
  end
end

-- ---------------------------------------------------------------------------------------
-- Delayed delivery (PIP-26), on Shared and Key_Shared subscriptions only: an entry whose
-- `d` field (deliver-at, ms since epoch) is later than now is not sent when read. It is
-- held by the reserved consumer DELAYED (still pending: unacked, and kept by retention) and
-- indexed in the subscription's `delayed` zset by its deliver-at time (member: delay_member). Dispatch moves due
-- entries out of it (only ever one script moves an entry: Lua is atomic across the fleet)
-- and tells the gateway when the next one is due, so it sleeps until exactly then.

-- Most entries one call schedules: bounds the time a script runs (about 3 ms at 1M
-- scheduled), so a flood of scheduled messages cannot stall other topics; the caller is
-- told to call again at once.
local SCHEDULE_CHUNK = 250

-- An index member: the stream id packed as two big-endian 64-bit integers, so entries due
-- at the same millisecond come out in stream order (a zset orders equal scores by member
-- bytes, and as text "5-10" sorts before "5-9"); 16 bytes, about a text id's size.
local function delay_member(id)
  local ms, seq = split_id(id)
  return struct.pack('>I8I8', ms, seq)
end

local function member_id(member)
  local ms, seq = struct.unpack('>I8I8', member)
  return string.format('%d-%d', ms, seq)
end

-- Milliseconds from `now` until the earliest scheduled entry: 0 when one is due, -1 none.
local function next_due(k, now)
  local head = redis.call('ZRANGE', k.delayed, 0, 0, 'WITHSCORES')
  if #head == 0 then return -1 end
  return math.max(0, tonumber(head[2]) - now)
end

-- A dispatch reply's {moved, next_due} after scheduling: `earliest` is next_due as the call
-- found it once due entries were taken; only a call that scheduled entries reads the index
-- again. moved = 1 when the earliest time came forward (other gateways must re-time).
local function schedule_reply(k, now, schedule, earliest)
  schedule.flush()
  local due = earliest
  if schedule.full() then
    due = 0
  elseif schedule.added() > 0 then
    due = next_due(k, now)
  end
  local moved = (due >= 0 and (earliest < 0 or due < earliest)) and 1 or 0
  return moved, due
end

-- Collects entries read that must wait and schedules them, SCHEDULE_CHUNK at a time, with
-- one XCLAIM (to DELAYED, delivery count reset: they were read, not sent) and one ZADD.
-- `added()` counts the entries scheduled; `full()` says SCHEDULE_CHUNK were: enough for one
-- call.
local function new_schedule(k, group)
  local ids, zadd, total = {}, {'ZADD', k.delayed}, 0
  local schedule = {}
  function schedule.flush()
    if #ids == 0 then return end
    claim_justid(k.stream, group, DELAYED, ids, 0)
    redis.call(unpack(zadd))
    ids, zadd = {}, {'ZADD', k.delayed}
  end
  function schedule.add(id, at)
    ids[#ids + 1] = id
    zadd[#zadd + 1] = at
    zadd[#zadd + 1] = delay_member(id)
    total = total + 1
    if #ids >= SCHEDULE_CHUNK then schedule.flush() end
  end
  function schedule.added() return total end
  function schedule.full() return total >= SCHEDULE_CHUNK end
  return schedule
end

-- Schedule the run of not-yet-due entries right at the group's cursor (at most `budget`),
-- stopping before the first entry that is due or not delayed (left unread). Admin calls use
-- it so a subscription's scheduled messages are listed even while no consumer reads.
local function schedule_ahead(k, group, now, budget)
  local schedule = new_schedule(k, group)
  local cursor = last_delivered(k.stream, group)
  while cursor and budget > 0 do
    local want = math.min(budget, READ_BATCH)
    local reply = redis.call('XREADGROUP', 'GROUP', group, DELAYED, 'COUNT', want, 'STREAMS', k.stream, '>')
    if not reply then break end
    local entries = reply[1][2]
    for i, entry in ipairs(entries) do
      local at = deliver_later(entry[2], now)
      if not at then
        local args = {'XACK', k.stream, group}
        for j = i, #entries do args[#args + 1] = entries[j][1] end
        redis.call(unpack(args))
        redis.call('XGROUP', 'SETID', k.stream, group, cursor)
        schedule.flush()
        return
      end
      schedule.add(entry[1], at)
      cursor = entry[1]
      budget = budget - 1
    end
    if #entries < want then break end
  end
  schedule.flush()
end

-- Scheduled messages of a subscription: the entries DELAYED holds (exact, where the index
-- may still hold members of entries expired by TTL or acknowledged by id).
local function scheduled_count(stream, group)
  for _, c in ipairs(redis.call('XPENDING', stream, group)[4] or {}) do
    if c[1] == DELAYED then return tonumber(c[2]) end
  end
  return 0
end

-- Admin scripts on a subscription's scheduled messages start here: false when the
-- subscription does not exist; else, on Shared and Key_Shared, the delayed entries at the
-- cursor are scheduled first (at most `budget`).
local function open_schedule(k, group, budget)
  local sub_type = redis.call('HGET', k.subs, group)
  if not sub_type or not group_exists(k.stream, group) then return false end
  if sub_type == '1' or sub_type == '3' then schedule_ahead(k, group, now_ms(), budget) end
  return true
end

-- ---------------------------------------------------------------------------------------
-- Consumer info: "<priority level> <join seq> <durable 1|0> <name>"

local function parse_info(value)
  local priority, seq, durable, name = string.match(value or '', '^(%-?%d+) (%d+) (%d) (.*)$')
  return tonumber(priority or 0), tonumber(seq or 0), name or '', durable ~= '0'
end

-- Failover: the active consumer among live ones (Pulsar
-- AbstractDispatcherSingleActiveConsumer.pickAndScheduleActiveConsumer): only the highest
-- priority (lowest level) counts; for a partition, consumers sorted by name and the one at
-- partition index mod count; for a non-partitioned topic, the earliest subscriber.
local function failover_active(k, partition, now)
  local uids = redis.call('ZRANGEBYSCORE', k.consumers, '(' .. now, '+inf')
  if #uids == 0 then return nil end
  local best, candidates = nil, {}
  for _, uid in ipairs(uids) do
    local priority, seq, name = parse_info(redis.call('HGET', k.info, uid))
    if best == nil or priority < best then
      best = priority
      candidates = {}
    end
    if priority == best then
      candidates[#candidates + 1] = {uid = uid, seq = seq, name = name}
    end
  end
  if partition >= 0 then
    table.sort(candidates, function(a, b)
      if a.name ~= b.name then return a.name < b.name end
      return a.uid < b.uid
    end)
    return candidates[(partition % #candidates) + 1].uid
  end
  table.sort(candidates, function(a, b)
    if a.seq ~= b.seq then return a.seq < b.seq end
    return a.uid < b.uid
  end)
  return candidates[1].uid
end

-- ---------------------------------------------------------------------------------------
-- Key_Shared hash ranges: "start-end,start-end" (inclusive)

local function parse_ranges(value)
  local ranges = {}
  for s, e in string.gmatch(value or '', '(%d+)%-(%d+)') do
    ranges[#ranges + 1] = {tonumber(s), tonumber(e)}
  end
  return ranges
end

local function format_ranges(ranges)
  local parts = {}
  for i, r in ipairs(ranges) do parts[i] = r[1] .. '-' .. r[2] end
  return table.concat(parts, ',')
end

-- Every consumer's ranges: list of {start, end, uid}, sorted by start.
local function range_map(k)
  local map = {}
  local all = redis.call('HGETALL', k.ranges)
  for i = 1, #all, 2 do
    if all[i] ~= KS_MODE then
      for _, r in ipairs(parse_ranges(all[i + 1])) do map[#map + 1] = {r[1], r[2], all[i]} end
    end
  end
  table.sort(map, function(a, b) return a[1] < b[1] end)
  return map
end

local function owner_of(map, h)
  for _, r in ipairs(map) do
    if h >= r[1] and h <= r[2] then return r[3] end
  end
  return nil
end

-- AUTO_SPLIT (Pulsar HashRangeAutoSplitStickyKeyConsumerSelector): the first consumer takes
-- the whole space; each later one takes the lower half of the largest range.
local function ks_add_auto(k, uid)
  local map = range_map(k)
  if #map == 0 then
    redis.call('HSET', k.ranges, uid, '0-' .. (HASH_SPACE - 1))
    return
  end
  local big = map[1]
  for _, r in ipairs(map) do
    if r[2] - r[1] > big[2] - big[1] then big = r end
  end
  if big[2] == big[1] then return nil end -- 65536 consumers: nothing left to split
  local middle = big[1] + math.floor((big[2] - big[1]) / 2)
  local owner_ranges = parse_ranges(redis.call('HGET', k.ranges, big[3]))
  for _, r in ipairs(owner_ranges) do
    if r[1] == big[1] then r[1] = middle + 1 end
  end
  redis.call('HSET', k.ranges, big[3], format_ranges(owner_ranges))
  redis.call('HSET', k.ranges, uid, big[1] .. '-' .. middle)
  return true
end

-- STICKY: the consumer's own ranges, refused when empty, malformed or overlapping another
-- consumer's (Pulsar HashRangeExclusiveStickyKeyConsumerSelector.validateKeySharedMeta).
-- Returns an error message or nil.
local function ks_add_sticky(k, uid, wanted)
  local ranges = parse_ranges(wanted)
  if #ranges == 0 then return 'Ranges for KeyShared policy must not be empty.' end
  for i, r in ipairs(ranges) do
    if r[1] > r[2] or r[2] >= HASH_SPACE then
      return 'Fixed hash range start > end or out of [0, 65535]: ' .. r[1] .. '-' .. r[2]
    end
    for j = i + 1, #ranges do
      local o = ranges[j]
      if r[1] <= o[2] and o[1] <= r[2] then
        return 'Ranges of one consumer overlap: ' .. format_ranges({r, o})
      end
    end
  end
  for _, taken in ipairs(range_map(k)) do
    for _, r in ipairs(ranges) do
      if r[1] <= taken[2] and taken[1] <= r[2] then
        return 'Range conflict with consumer ' .. taken[3] .. ': ' .. r[1] .. '-' .. r[2]
      end
    end
  end
  redis.call('HSET', k.ranges, uid, wanted)
  return nil
end

-- Forget a consumer's ranges. AUTO_SPLIT gives each of them to the consumer owning the
-- range just above (or just below, for the top range), as Pulsar's auto-split selector.
local function ks_remove(k, uid)
  local mine = parse_ranges(redis.call('HGET', k.ranges, uid))
  redis.call('HDEL', k.ranges, uid)
  redis.call('HDEL', k.joined, uid)
  if redis.call('HGET', k.ranges, KS_MODE) ~= '0' then return end
  for _, r in ipairs(mine) do
    local map = range_map(k)
    local heir = nil
    for _, o in ipairs(map) do
      if o[1] == r[2] + 1 then heir = {o, 'up'} end
      if o[2] == r[1] - 1 and heir == nil then heir = {o, 'down'} end
    end
    if heir then
      local o, dir = heir[1], heir[2]
      local theirs = parse_ranges(redis.call('HGET', k.ranges, o[3]))
      for _, t in ipairs(theirs) do
        if t[1] == o[1] then
          if dir == 'up' then t[1] = r[1] else t[2] = r[2] end
        end
      end
      redis.call('HSET', k.ranges, o[3], format_ranges(theirs))
    end
  end
end

-- ---------------------------------------------------------------------------------------
-- Consumer membership

-- Detach consumer `uid`: its unacked entries (and, on Key_Shared, those read for it but
-- not sent) go back to the subscription (parked), then it is forgotten. A non-durable
-- subscription (a reader's) goes with its last consumer, also when that consumer's gateway
-- died. Returns how many entries were handed back.
local function release_consumer(k, group, uid, parked)
  local _, _, _, durable = parse_info(redis.call('HGET', k.info, uid))
  if not durable and redis.call('ZCARD', k.consumers) <= 1 then
    if group_exists(k.stream, group) then redis.call('XGROUP', 'DESTROY', k.stream, group) end
    redis.call('HDEL', k.subs, group)
    redis.call(
      'DEL', k.consumers, k.info, k.ranges, k.joined, k.acksets, k.delayed, k.properties)
    return 0
  end
  local moved = 0
  if group_exists(k.stream, group) then
    moved = park_all(k.stream, group, uid, parked)
    redis.call('XGROUP', 'DELCONSUMER', k.stream, group, uid)
    if redis.call('HEXISTS', k.ranges, uid) == 1 then
      moved = moved + park_all(k.stream, group, WAITING .. uid, parked)
      redis.call('XGROUP', 'DELCONSUMER', k.stream, group, WAITING .. uid)
    end
  end
  if redis.call('HEXISTS', k.ranges, uid) == 1 then ks_remove(k, uid) end
  redis.call('ZREM', k.consumers, uid)
  if redis.call('HDEL', k.info, uid) == 1 and redis.call('HEXISTS', k.info, LAST_ACTIVE) == 1 then
    -- A consumer leaving makes the subscription last active now (Pulsar's removeConsumer
    -- -> cursor.updateLastActive), on subscriptions whose expiry is checked (the check
    -- wrote the field first: inactive_subscriptions.lua), so one that comes and goes
    -- between two checks is not missed.
    redis.call('HSET', k.info, LAST_ACTIVE, now_ms())
  end
  return moved
end

-- Release every consumer whose lease has expired (its gateway died or lost Redis).
local function reap_expired(k, group, now, parked)
  local moved = 0
  for _, uid in ipairs(redis.call('ZRANGEBYSCORE', k.consumers, '-inf', now)) do
    moved = moved + release_consumer(k, group, uid, parked)
  end
  return moved
end

-- Start of every dispatch: renew the consumer's lease and, on Failover, check it is the
-- active consumer. Returns nil to go on, else the script's reply: {2} consumer gone (its
-- lease expired and it was reaped), {6, active uid} not the active Failover consumer.
-- On Failover the consumers whose lease ran out are released first: one of them may have
-- been the active consumer (its gateway died), and its unacked entries must be parked,
-- to be redelivered first, before a successor reads past them; else the successor would
-- get later entries before them until the reaper's next round. Pulsar's single-active
-- dispatcher rewinds the cursor at every change of active consumer for the same reason
-- (PersistentDispatcherSingleActiveConsumer, "redeliver unacked messages").
local function lease_and_active(k, group, uid, lease_ms, sub_type, partition)
  if not redis.call('ZSCORE', k.consumers, uid) then return {2} end
  local now = now_ms()
  redis.call('ZADD', k.consumers, 'XX', now + tonumber(lease_ms), uid)
  if sub_type == '2' then
    reap_expired(k, group, now, PARKED)
    local active = failover_active(k, tonumber(partition), now)
    if active ~= uid then return {6, active or ''} end
  end
  return nil
end

-- Unacked limits of Shared and Key_Shared subscriptions (Pulsar's
-- maxUnackedMessagesPerConsumer and maxUnackedMessagesPerSubscription): the entries pending
-- at real consumers (the reserved ones aside: PARKED, DELAYED, WAITING, NO_OWNER), read
-- from XPENDING's summary (`summary` when the caller has it). `limits` is the script's
-- ARGV from index `at`: consumer limit, consumer blocked (1/0), subscription limit,
-- subscription blocked (1/0), as the gateway last learnt; a limit of 0 is none. A consumer
-- not blocked is refused once it holds its limit, a blocked one until it is down to half
-- (Consumer.removePendingAcks: unblocked at <= max / 2); the subscription likewise, but
-- unblocked below half (PersistentDispatcherMultipleConsumers.addUnAckedMessages: < max / 2).
-- Returns the refusal {7, consumer's unacked, subscription's unacked, consumer over (1/0),
-- subscription over (1/0)}, or nil and the room left: entries the consumer may still get
-- before a limit is reached (-1: no limit).
local function unacked_check(k, group, uid, limits, at, summary)
  local consumer_limit, consumer_blocked = tonumber(limits[at]) or 0, limits[at + 1] == '1'
  local sub_limit, sub_blocked = tonumber(limits[at + 2]) or 0, limits[at + 3] == '1'
  if consumer_limit <= 0 and sub_limit <= 0 then return nil, -1 end
  summary = summary or redis.call('XPENDING', k.stream, group)
  local mine, total = 0, 0
  for _, c in ipairs(summary[4] or {}) do
    if string.sub(c[1], 1, #RESERVED_MARK) ~= RESERVED_MARK then
      local n = tonumber(c[2])
      total = total + n
      if c[1] == uid then mine = n end
    end
  end
  local consumer_over, sub_over, room = false, false, -1
  if consumer_limit > 0 then
    if consumer_blocked then consumer_over = mine > math.floor(consumer_limit / 2)
    else consumer_over = mine >= consumer_limit end
    room = consumer_limit - mine
  end
  if sub_limit > 0 then
    if sub_blocked then sub_over = total >= math.max(math.floor(sub_limit / 2), 1)
    else sub_over = total >= sub_limit end
    if room < 0 or sub_limit - total < room then room = sub_limit - total end
  end
  if consumer_over or sub_over then
    return {7, mine, total, consumer_over and 1 or 0, sub_over and 1 or 0}, 0
  end
  return nil, math.max(room, 0)
end

-- The dispatch reply's header: {0, moved, next_due, late, now, room}; deliveries follow.
local function dispatch_reply(late, now)
  return {0, 0, -1, late, now, -1}
end

-- How many entries a dispatch reply carries (after its header).
local function deliveries_in(out)
  return (#out - 6) / 4
end

-- ---------------------------------------------------------------------------------------
-- Cursor moves of the admin API (Pulsar ManagedCursor: skip, clear backlog, expire, reset
-- to a batch index). A subscription's backlog, in Pulsar's order, is its pending entries
-- (oldest first) followed by the entries after the group's cursor; acknowledging one means
-- XACK, and forgetting it in the scheduled index and the ack sets, so no dispatch finds
-- it again.

-- Acknowledge pending entries `ids` of the subscription. Returns how many were pending.
local function ack_pending(k, group, ids)
  if #ids == 0 then return 0 end
  local xack, zrem, hdel = {'XACK', k.stream, group}, {'ZREM', k.delayed}, {'HDEL', k.acksets}
  for _, id in ipairs(ids) do
    xack[#xack + 1] = id
    zrem[#zrem + 1] = delay_member(id)
    hdel[#hdel + 1] = id
  end
  redis.call(unpack(zrem))
  redis.call(unpack(hdel))
  return redis.call(unpack(xack))
end

-- Acknowledge every message up to `bound` (a stream id; '(' in front makes it exclusive):
-- pending entries up to it are acked and a cursor behind it moves to the last entry up to
-- it, so none of them is delivered. Returns how many pending entries were acked.
local function ack_through(k, group, bound)
  local acked = 0
  while true do
    local pending = redis.call('XPENDING', k.stream, group, '-', bound, 1000)
    if #pending == 0 then break end
    local ids = {}
    for i, p in ipairs(pending) do ids[i] = p[1] end
    acked = acked + ack_pending(k, group, ids)
  end
  local cursor = last_delivered(k.stream, group)
  local last = redis.call('XREVRANGE', k.stream, bound, '(' .. cursor, 'COUNT', 1)[1]
  if last then redis.call('XGROUP', 'SETID', k.stream, group, last[1]) end
  return acked
end

-- ---------------------------------------------------------------------------------------
-- Backlogs, counted without reading them (admin skip, backlog quotas, internal stats).
-- Entry ids are consecutive within a ledger (append_entries.lua stores entry
-- `L-<entries in L>`; ids of the older ms-seq format are consecutive within a millisecond)
-- and only a stream's head is ever removed (retention), so the entries of a ledger are
-- counted from its first and last ids: two reads of one entry per ledger, whatever the
-- backlog's length.

-- Walk the entries `XRANGE stream from to` would return, ledger by ledger: `from` is an id,
-- or '(' and an id to start after it, `to` an id or '+'. With `n`, stops at the n-th one
-- (n >= 1) and returns its id and n; otherwise (or when there are fewer) returns nil, how
-- many there are and the id of the last one (nil when none).
local function walk_range(stream, from, to, n)
  local seen, last_id = 0, nil
  local to_ledger = to ~= '+' and split_id(to) or nil
  while true do
    local first = redis.call('XRANGE', stream, from, to, 'COUNT', 1)[1]
    if not first then return nil, seen, last_id end
    local ledger, entry = split_id(first[1])
    local top = to
    if ledger ~= to_ledger then top = string.format('%d-18446744073709551615', ledger) end
    local last = redis.call('XREVRANGE', stream, top, first[1], 'COUNT', 1)[1]
    local _, last_entry = split_id(last[1])
    local count = last_entry - entry + 1
    if n and seen + count >= n then
      return string.format('%d-%d', ledger, entry + n - seen - 1), n
    end
    seen, last_id = seen + count, last[1]
    from = '(' .. last[1]
  end
end

-- walk_range over the entries after `id`.
local function walk_after(stream, id, n)
  return walk_range(stream, '(' .. id, '+', n)
end

-- Every consumer group's backlog: {name, unacked, oldest} with `unacked` its
-- pending entries plus those after its cursor (Pulsar's backlog in entries), `oldest` the id
-- of its oldest unacknowledged entry (nil when none). The entries after the cursor are
-- XINFO's lag when Redis knows it (not on 6.2, nor after a cursor was set by XGROUP SETID),
-- else counted with walk_after.
local function group_backlogs(stream)
  local out = {}
  for _, info in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local g = {}
    for i = 1, #info, 2 do g[info[i]] = info[i + 1] end
    local name, cursor = g['name'], g['last-delivered-id']
    local lag = g['lag']
    if not lag then _, lag = walk_after(stream, cursor, nil) end
    local pending = redis.call('XPENDING', stream, name)
    local oldest = pending[2] or nil
    if not oldest and lag > 0 then
      local after = redis.call('XRANGE', stream, '(' .. cursor, '+', 'COUNT', 1)[1]
      oldest = after and after[1]
    end
    out[#out + 1] = {name = name, unacked = tonumber(pending[1]) + lag, oldest = oldest}
  end
  return out
end

-- The stream's average entry size in bytes as Redis measures it (MEMORY USAGE, sampled:
-- an estimate, as Pulsar's backlog size is); 0 for an empty stream.
local function entry_bytes(stream)
  local length = redis.call('XLEN', stream)
  if length == 0 then return 0 end
  return (redis.call('MEMORY', 'USAGE', stream) or 0) / length
end

-- Skip the `wanted` oldest unacknowledged entries of a subscription, in its backlog's order
-- (Pulsar ManagedCursor.skipEntries, IndividualDeletedEntries.Exclude): pending entries
-- first, oldest first, then the entries after the cursor, which moves past them. Returns
-- how many were skipped (fewer when the backlog is shorter).
local function skip_entries(k, group, wanted)
  local skipped = 0
  while skipped < wanted do
    local pending = redis.call('XPENDING', k.stream, group, '-', '+', math.min(wanted - skipped, 1000))
    if #pending == 0 then break end
    local ids = {}
    for i, p in ipairs(pending) do ids[i] = p[1] end
    skipped = skipped + ack_pending(k, group, ids)
  end
  if skipped < wanted then
    local position, count = walk_after(k.stream, last_delivered(k.stream, group), wanted - skipped)
    if not position and count > 0 then
      position = redis.call('XREVRANGE', k.stream, '+', '-', 'COUNT', 1)[1][1]
    end
    if position then redis.call('XGROUP', 'SETID', k.stream, group, position) end
    skipped = skipped + count
  end
  return skipped
end

-- Leave entry `id`, which must be the next one after the group's cursor, pending at
-- `parked` with only the batch indexes of `ackset` ("1" = unacked) to deliver, as if the
-- others had been acknowledged (Pulsar's position with an ack set, PIP-54). Returns false
-- (changing nothing) when `id` is not the next entry.
local function hold_partial(k, group, id, ackset, parked)
  local cursor = last_delivered(k.stream, group)
  local next_entry = redis.call('XRANGE', k.stream, '(' .. cursor, '+', 'COUNT', 1)[1]
  if not next_entry or next_entry[1] ~= id then return false end
  redis.call('XREADGROUP', 'GROUP', group, parked, 'COUNT', 1, 'STREAMS', k.stream, '>')
  -- read, not sent: no delivery counted (see the rules at the top)
  claim_justid(k.stream, group, parked, {id}, 0)
  redis.call('HSET', k.acksets, id, ackset)
  return true
end

-- The group id to set so that delivery starts at entry `id` (the id just before it).
local function id_before(id)
  local ms, seq = split_id(id)
  if seq > 0 then return string.format('%d-%d', ms, seq - 1) end
  if ms > 0 then return string.format('%d-18446744073709551615', ms - 1) end
  return '0'
end

-- A group id as the seek and reset scripts take it: a stream id, '0', or "@<ms>" for
-- "by publish time": just before the first entry published at or after that time (after
-- the last entry when none is; first_published_at), found here so no append slips between
-- lookup and reset.
local function group_position(stream, position)
  if string.sub(position, 1, 1) ~= '@' then return position end
  local first = first_published_at(stream, tonumber(string.sub(position, 2)))
  if first then return id_before(first) end
  local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
  return last and last[1] or '0'
end

-- Where a ResetCursorData (ledgerId:entryId = stream id `id`, isExcluded, batchIndex)
-- points, as Pulsar's PersistentTopicsBase.calculatePositionAckSet computes it: returns the
-- position's stream id and, for a position inside a batch, the ack set of the batch
-- indexes not yet consumed ("1"s; nil = the whole entry). Excluding an entry is Pulsar's
-- PositionImpl.getNext(): entry id + 1 in the same ledger, here "L-(E+1)". The batch
-- size comes from the stored entry (its `n` field; 0 when the entry is gone, which makes
-- Pulsar fall back to the entry position).
local function cursor_position(k, id, excluded, batch_index)
  local size = 0
  if batch_index >= 0 then
    local entry = redis.call('XRANGE', k.stream, id, id)[1]
    if entry then size = entry_size(entry[2]) end
  end
  local ms, seq = split_id(id)
  local after = string.format('%d-%d', ms, seq + 1)
  if size == 0 then
    if excluded then return after, nil end
    return id, nil
  end
  local consumed = batch_index
  if excluded then consumed = batch_index + 1 end
  if consumed >= size then return after, nil end
  if consumed <= 0 then return id, nil end
  return id, string.rep('0', consumed) .. string.rep('1', size - consumed)
end
