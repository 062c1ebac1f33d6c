--[[ last_message_id: the topic's last entry and a subscription's mark-delete position
(Pulsar CommandGetLastMessageIdResponse.last_message_id and consumer_mark_delete_position).

KEYS[1] topic stream
ARGV[1] subscription name ('' for none)
Returns {last_id, last_fields, mark_delete_id}
  last_id '' when the topic is empty; last_fields the entry's fields (for its batch size)
  mark_delete_id: the last id before which everything is acked ('' = nothing acked yet,
  i.e. before the first entry)
]]
local stream, group = KEYS[1], ARGV[1]
local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
local last_id, last_fields = '', {}
if last[1] then last_id, last_fields = last[1][1], last[1][2] end
local mark_delete = ''
if group ~= '' and group_exists(stream, group) then
  local summary = redis.call('XPENDING', stream, group)
  if tonumber(summary[1]) > 0 then
    local before = redis.call('XREVRANGE', stream, '(' .. summary[2], '-', 'COUNT', 1)
    if before[1] then mark_delete = before[1][1] end
  else
    local cursor = last_delivered(stream, group)
    if cursor and cursor ~= '0-0' then mark_delete = cursor end
  end
end
return {last_id, last_fields, mark_delete}
