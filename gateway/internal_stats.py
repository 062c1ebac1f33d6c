"""A topic's internal stats (Pulsar ``PersistentTopicInternalStats``, the admin API's
``internalStats``), read from Redis in one script so every gateway reports the same.

Pulsar describes a managed ledger: BookKeeper ledgers, cursors with mark-delete and read
positions. Here a partition is one Redis stream, so the figures map as follows (what Redis
cannot tell is synthetic, and said so):

=====================================  =================================================
Pulsar field                           here
=====================================  =================================================
``entriesAddedCounter``                ``XINFO STREAM`` entries-added (Redis >= 7; the
                                       stream length before), since the stream was
                                       created, not since a broker loaded it
``numberOfEntries``                    stream length
``totalSize``                          ``MEMORY USAGE`` of the stream (sampled: the bytes
                                       Redis spends, overhead included)
``currentLedgerEntries`` / ``Size``    the same: the stream is one pseudo-ledger
``lastLedgerCreatedTimestamp``         the first entry's time (ISO-8601), else null
``waitingCursorsCount``                cursors with live consumers and nothing to read
``pendingAddEntriesCount``             0 (appends are single Redis commands)
``lastConfirmedEntry``                 last generated stream id ``ms:seq`` (``-1:-1``
                                       when nothing was ever appended)
``state``                              ``LedgerOpened``
``ledgers``                            one pseudo-ledger for the whole stream: ledgerId
                                       = the first entry's ms (-1 when empty), entries,
                                       size as above
``compactedLedger``                    the compacted view (ledgerId -1), or Pulsar's
                                       "none" (-1 entries and size)
``cursors.*.markDeletePosition``       the last entry before the first unacked one
``cursors.*.readPosition``             the first entry after the group's cursor (past
                                       the end: ``ms:seq+1`` of the last id, as Pulsar's
                                       LastConfirmedEntry.getNext())
``cursors.*.messagesConsumedCounter``  ``XINFO GROUPS`` entries-read (Redis >= 7; 0 if
                                       unknown)
``cursors.*.individuallyDeletedMessages``  acknowledged runs after the mark-delete
                                       position, Pulsar's ``[(a..b], (c..d]]`` form (first
                                       10,000 entries scanned)
``cursors.*.cursorLedger``             -1 (no cursor ledger: the group is the cursor)
``cursors.*.state``                    ``Open``
=====================================  =================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.date_formatter import format_time
from gateway.errors import NotAllowed, TopicNotFound
from gateway.topic_name import TopicName

if TYPE_CHECKING:
    from gateway.broker import Broker

__all__ = ["internal_stats", "partitioned_internal_stats"]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _position(sid: Any) -> str:
    """``ms-seq`` -> Pulsar's ``ledgerId:entryId``."""
    ms, _, seq = _text(sid).partition("-")
    return f"{ms}:{seq or 0}"


def _split(sid: Any) -> tuple[int, int]:
    ms, _, seq = _text(sid).partition("-")
    return int(ms), int(seq or 0)


def _before(sid: Any) -> str:
    """The position just before entry ``sid``: Pulsar's ``ledger:entry-1``."""
    ms, seq = _split(sid)
    return f"{ms}:{seq - 1}"


def _after(sid: Any) -> str:
    ms, seq = _split(sid)
    return f"{ms}:{seq + 1}"


def _ledger(ledger_id: int, entries: int, size: int) -> dict[str, Any]:
    return {
        "ledgerId": ledger_id,
        "entries": entries,
        "size": size,
        "offloaded": False,
        "underReplicated": False,
    }


def _cursor(row: list[Any], stream: list[Any]) -> dict[str, Any]:
    (_, _, _, entries_read, md, first_unacked, read, live, since, ranges) = row
    first_id, last_generated = stream[3], stream[1]
    if md:
        mark_delete = _position(md)
    elif first_unacked:
        mark_delete = _before(first_unacked)
    elif first_id:
        mark_delete = _before(first_id)
    else:
        mark_delete = _position(last_generated)
    read_position = _position(read) if read else _after(last_generated)
    deleted = [
        f"({_position(ranges[i])}..{_position(ranges[i + 1])}]" for i in range(0, len(ranges), 2)
    ]
    caught_up = not read
    return {
        "markDeletePosition": mark_delete,
        "readPosition": read_position,
        "waitingReadOp": caught_up and live > 0,
        "pendingReadOps": 0,
        "messagesConsumedCounter": max(int(entries_read), 0),
        "cursorLedger": -1,
        "cursorLedgerLastEntry": -1,
        "individuallyDeletedMessages": "[" + ", ".join(deleted) + "]",
        "lastLedgerSwitchTimestamp": None,
        "state": "Open",
        "numberOfEntriesSinceFirstNotAckedMessage": int(since),
        "totalNonContiguousDeletedMessagesRange": len(deleted),
        "subscriptionHavePendingRead": caught_up and live > 0,
        "subscriptionHavePendingReplayRead": False,
        "properties": {},
    }


async def internal_stats(broker: Broker, topic: TopicName) -> dict[str, Any]:
    """PersistentTopicInternalStats of a non-partitioned topic or one partition.

    A non-persistent topic answers Pulsar's empty figures with its live subscriptions.

    Raises:
        NotAllowed: a partitioned topic's base name (use :func:`partitioned_internal_stats`).
        TopicNotFound: no such topic.
    """
    if await broker.partitioned_topics.partitions(topic) > 0:
        raise NotAllowed(f"{topic} is a partitioned topic: ask for its partitioned-internalStats")
    handle = broker.topic(topic)
    keys = handle.keys
    names = [_text(n) for n in await broker.storage.call("HKEYS", keys.subscriptions)]
    if not topic.persistent:
        if not await broker.partitioned_topics.exists(topic):
            raise TopicNotFound(f"Topic {topic} not found")
        return _non_persistent(names)
    reply = await broker.storage.eval(
        "internal_stats",
        [keys.stream, keys.compacted, *(keys.consumers(n) for n in names)],
        names,
    )
    if not reply:
        if not await broker.partitioned_topics.exists(topic):
            raise TopicNotFound(f"Topic {topic} not found")
        reply = [[0, b"0-0", 0, b"", b"", 0], [], []]
    stream, compacted, cursors = reply
    length, last_generated, added, first_id, _, size = stream
    ever = _text(last_generated) != "0-0"
    first_ms = _split(first_id)[0] if first_id else -1
    rows = {_text(row[0]): _cursor([_text(row[0]), *row[1:]], stream) for row in cursors}
    return {
        "entriesAddedCounter": int(added) if int(added) >= 0 else int(length),
        "numberOfEntries": int(length),
        "totalSize": int(size),
        "currentLedgerEntries": int(length),
        "currentLedgerSize": int(size),
        "lastLedgerCreatedTimestamp": format_time(first_ms) if first_id else None,
        "lastLedgerCreationFailureTimestamp": None,
        "waitingCursorsCount": sum(1 for c in rows.values() if c["waitingReadOp"]),
        "pendingAddEntriesCount": 0,
        "lastConfirmedEntry": _position(last_generated) if ever else "-1:-1",
        "state": "LedgerOpened",
        "ledgers": [_ledger(first_ms, int(length), int(size))] if int(length) else [],
        "cursors": rows,
        "schemaLedgers": [],
        "compactedLedger": (
            _ledger(-1, int(compacted[0]), int(compacted[1])) if compacted else _ledger(-1, -1, -1)
        ),
    }


def _non_persistent(subscriptions: list[str]) -> dict[str, Any]:
    """Pulsar ``NonPersistentTopic.getInternalStats``: nothing is stored, so every figure
    keeps its default and each live subscription has an empty CursorStats."""
    empty_cursor = {
        "markDeletePosition": None,
        "readPosition": None,
        "waitingReadOp": False,
        "pendingReadOps": 0,
        "messagesConsumedCounter": 0,
        "cursorLedger": 0,
        "cursorLedgerLastEntry": 0,
        "individuallyDeletedMessages": None,
        "lastLedgerSwitchTimestamp": None,
        "state": None,
        "numberOfEntriesSinceFirstNotAckedMessage": 0,
        "totalNonContiguousDeletedMessagesRange": 0,
        "subscriptionHavePendingRead": False,
        "subscriptionHavePendingReplayRead": False,
        "properties": None,
    }
    return {
        "entriesAddedCounter": 0,
        "numberOfEntries": 0,
        "totalSize": 0,
        "currentLedgerEntries": 0,
        "currentLedgerSize": 0,
        "lastLedgerCreatedTimestamp": None,
        "lastLedgerCreationFailureTimestamp": None,
        "waitingCursorsCount": 0,
        "pendingAddEntriesCount": 0,
        "lastConfirmedEntry": None,
        "state": None,
        "ledgers": None,
        "cursors": {name: dict(empty_cursor) for name in sorted(subscriptions)},
        "schemaLedgers": None,
        "compactedLedger": None,
    }


async def partitioned_internal_stats(broker: Broker, topic: TopicName) -> dict[str, Any]:
    """PartitionedTopicInternalStats: ``{"metadata": {"partitions": n}, "partitions":
    {partition name: PersistentTopicInternalStats}}``.

    Raises:
        TopicNotFound: not a partitioned topic.
    """
    count = await broker.partitioned_topics.partitions(topic)
    if count <= 0:
        raise TopicNotFound(f"Partitioned Topic {topic} not found")
    partitions = {}
    for i in range(count):
        name = topic.partition(i)
        try:
            partitions[str(name)] = await internal_stats(broker, name)
        except TopicNotFound:
            continue  # a partition nothing was written to nor subscribed yet
    return {"metadata": {"partitions": count}, "partitions": partitions}
