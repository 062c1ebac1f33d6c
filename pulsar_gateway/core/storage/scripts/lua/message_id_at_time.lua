--[[ message_id_at_time: the first entry published at or after a time, read only (Pulsar's
admin getMessageIdByTimestamp: PersistentTopicsBase.internalGetMessageIdByTimestamp finds
the first entry not published before the time, MessageImpl.isEntryPublishedEarlierThan).

KEYS[1] topic stream   ARGV[1] time (ms)
Returns the entry's stream id; false when no entry is published at or after the time (or
the stream is empty or missing).
]]
return first_published_at(KEYS[1], tonumber(ARGV[1])) or false
