--[[ subscription_peek: the n-th entry of a subscription's backlog, 1-based (Pulsar admin
peekNthMessage, ManagedCursor.asyncGetNthEntry with IndividualDeletedEntries.Exclude):
acknowledged entries are not counted; pending ones (delivered and unacked, parked,
scheduled, waiting) come first, oldest first, then the entries after the cursor. A client
batch is one entry.

KEYS: the subscription keys (lib.lua sub_keys)
ARGV[1] subscription name   ARGV[2] position n >= 1
Returns {1, id, fields} found; {0} no such entry; {-1} no such subscription
]]
local k = sub_keys()
local group, n = ARGV[1], tonumber(ARGV[2])
if not group_exists(k.stream, group) then return {-1} end
local pending = tonumber(redis.call('XPENDING', k.stream, group)[1])
local id
if n <= pending then
  local skip = 0
  local from = '-'
  -- walk the pending list in chunks (XPENDING COUNT is O(COUNT))
  while true do
    local want = math.min(n - skip, 1000)
    local page = redis.call('XPENDING', k.stream, group, from, '+', want)
    if #page == 0 then break end
    if skip + #page >= n then
      id = page[n - skip][1]
      break
    end
    skip = skip + #page
    from = '(' .. page[#page][1]
  end
else
  local cursor = last_delivered(k.stream, group)
  local skip, want = pending, 0
  local from = '(' .. cursor
  while skip < n do
    want = math.min(n - skip, 1000)
    local page = redis.call('XRANGE', k.stream, from, '+', 'COUNT', want)
    if #page == 0 then break end
    if skip + #page >= n then
      return {1, page[n - skip][1], page[n - skip][2]}
    end
    skip = skip + #page
    from = '(' .. page[#page][1]
  end
end
if not id then return {0} end
local entry = redis.call('XRANGE', k.stream, id, id)[1]
if not entry then return {0} end
return {1, entry[1], entry[2]}
