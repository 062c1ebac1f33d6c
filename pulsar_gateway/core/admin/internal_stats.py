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
``currentLedgerEntries`` / ``Size``    entries and blob bytes appended to the current
                                       ledger (the ledger hash)
``lastLedgerCreatedTimestamp``         the current ledger's id, which is the time Redis
                                       opened it (ISO-8601), else null
``waitingCursorsCount``                cursors with live consumers and nothing to read
``pendingAddEntriesCount``             0 (appends are single Redis commands)
``lastConfirmedEntry``                 last generated stream id ``ledger:entry`` (``-1:-1``
                                       when nothing was ever appended)
``state``                              ``LedgerOpened``; ``Terminated`` once the topic
                                       was terminated (``ManagedLedgerImpl.State``)
``ledgers``                            each ledger still in the stream, oldest first
                                       (first 1,000): ledgerId, entries (its last entry
                                       id + 1, as written; a trimmed ledger keeps its
                                       count), size (the current ledger's blob bytes; for
                                       earlier ones the stream's memory shared out by
                                       stored entries, an estimate)
``compactedLedger``                    the compacted view (ledgerId -1), or Pulsar's
                                       "none" (-1 entries and size)
``cursors.*.markDeletePosition``       the last entry before the first unacked one
``cursors.*.readPosition``             the first entry after the group's cursor (past
                                       the end: ``ledger:entry+1`` of the last id, as Pulsar's
                                       LastConfirmedEntry.getNext())
``cursors.*.messagesConsumedCounter``  ``XINFO GROUPS`` entries-read (Redis >= 7; 0 if
                                       unknown)
``cursors.*.individuallyDeletedMessages``  acknowledged runs after the mark-delete
                                       position, Pulsar's ``[(a..b], (c..d]]`` form (within
                                       the first 10,000 entries from the first unacked
                                       one; found from the pending ids, no entry read)
``cursors.*.numberOfEntriesSinceFirstNotAckedMessage``
                                       entries from the first unacked one to the cursor
                                       (at most 10,000, counted ledger by ledger), and the
                                       read position's
``cursors.*.cursorLedger``             -1 (no cursor ledger: the group is the cursor)
``cursors.*.state``                    ``Open``
=====================================  =================================================

The topic's ``internal-info`` (Pulsar's ``ManagedLedgerInfo``, :meth:`InternalStats.ledger_info`)
lists the same ledgers, and once the topic is terminated its ``terminatedPosition``
(``{"ledgerId", "entryId"}`` of the last entry, ``-1``/``-1`` when it had none, as the
terminate answer says): the mark ``topic_terminate.lua`` leaves in the ledger hash.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pulsar_gateway.core.errors import NotAllowed, TopicNotFound
from pulsar_gateway.core.model.date_formatter import format_time
from pulsar_gateway.core.model.message_id import MessageId
from pulsar_gateway.core.model.topic_name import TopicName
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import stats, text
from pulsar_gateway.core.storage.scripts.stats import (
    CurrentLedger,
    CursorFacts,
    LedgerFacts,
    StreamFacts,
)
from pulsar_gateway.core.topics.partitioned_topics import PartitionedTopics
from pulsar_gateway.core.topics.topic import Topics

__all__ = ["InternalStats"]


def _position(sid: Any) -> str:
    """``L-E`` -> Pulsar's ``ledgerId:entryId``."""
    ms, seq = _split(sid)
    return f"{ms}:{seq}"


def _split(sid: Any) -> tuple[int, int]:
    message_id = MessageId.from_stream_id(sid)
    return message_id.ledger_id, message_id.entry_id


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


def _ledgers(
    ledgers: tuple[LedgerFacts, ...], current: CurrentLedger, size: int
) -> list[dict[str, Any]]:
    """LedgerInfo of each ledger still in the stream (see the table above for sizes)."""
    stored = sum(ledger.last_entry - ledger.first_entry + 1 for ledger in ledgers) or 1
    return [
        _ledger(
            ledger.ledger_id,
            ledger.last_entry + 1,
            current.size
            if ledger.ledger_id == current.ledger_id
            else size * (ledger.last_entry - ledger.first_entry + 1) // stored,
        )
        for ledger in ledgers
    ]


def _cursor(row: CursorFacts, stream: StreamFacts) -> dict[str, Any]:
    first_id, last_generated = stream.first_id, stream.last_generated
    if row.mark_delete:
        mark_delete = _position(row.mark_delete)
    elif row.first_unacked:
        mark_delete = _before(row.first_unacked)
    elif first_id:
        mark_delete = _before(first_id)
    else:
        mark_delete = _position(last_generated)
    read = row.read_position
    read_position = _position(read) if read else _after(last_generated)
    deleted = [f"({_position(after)}..{_position(last)}]" for after, last in row.acked_ranges]
    caught_up = not read
    return {
        "markDeletePosition": mark_delete,
        "readPosition": read_position,
        "waitingReadOp": caught_up and row.live_consumers > 0,
        "pendingReadOps": 0,
        "messagesConsumedCounter": max(row.entries_read, 0),
        "cursorLedger": -1,
        "cursorLedgerLastEntry": -1,
        "individuallyDeletedMessages": "[" + ", ".join(deleted) + "]",
        "lastLedgerSwitchTimestamp": None,
        "state": "Open",
        "numberOfEntriesSinceFirstNotAckedMessage": row.since_first_unacked,
        "totalNonContiguousDeletedMessagesRange": len(deleted),
        "subscriptionHavePendingRead": caught_up and row.live_consumers > 0,
        "subscriptionHavePendingReplayRead": False,
        "properties": {},
    }


#: What a listed topic that has no stream yet reports.
_EMPTY_STREAM = StreamFacts(0, b"0-0", 0, b"", b"", 0)


class InternalStats:
    """The admin API's ``internalStats`` and ``partitioned-internalStats``."""

    def __init__(self, lane: Lane, topics: Topics, partitioned_topics: PartitionedTopics) -> None:
        self._lane = lane
        self._topics = topics
        self._partitioned = partitioned_topics

    async def topic(self, topic: TopicName) -> dict[str, Any]:
        """PersistentTopicInternalStats of a non-partitioned topic or one partition.

        A non-persistent topic answers Pulsar's empty figures with its live subscriptions.

        Raises:
            NotAllowed: a partitioned topic's base name (use :meth:`partitioned`).
            TopicNotFound: no such topic.
        """
        stats, _ = await self._read(topic)
        return stats

    async def ledger_info(self, topic: TopicName) -> dict[str, Any]:
        """``ManagedLedgerInfo`` (the admin API's ``internal-info``): the ledgers still
        stored and, once terminated, the ``terminatedPosition``.

        Raises:
            NotAllowed: a partitioned topic's base name.
            TopicNotFound: no such topic.
        """
        stats, terminated = await self._read(topic)
        position = None
        if terminated is not None:
            ledger, entry = _split(terminated) if terminated else (-1, -1)
            position = {"ledgerId": ledger, "entryId": entry}
        return {
            "version": 1,
            "creationDate": stats.get("lastLedgerCreatedTimestamp"),
            "modificationDate": stats.get("lastLedgerCreatedTimestamp"),
            "ledgers": [
                {
                    "ledgerId": ledger["ledgerId"],
                    "entries": ledger["entries"],
                    "size": ledger["size"],
                    "timestamp": 0,
                    "isOffloaded": False,
                }
                for ledger in stats.get("ledgers") or []
            ],
            "terminatedPosition": position,
            "properties": {},
        }

    async def _read(self, topic: TopicName) -> tuple[dict[str, Any], bytes | None]:
        """The internal stats, and the last entry's id once the topic was terminated
        (``b""`` when it had none; None while it is not)."""
        if await self._partitioned.partitions(topic) > 0:
            raise NotAllowed(
                f"{topic} is a partitioned topic: ask for its partitioned-internalStats"
            )
        handle = self._topics.get(topic)
        names = await handle.subscriptions()
        if not topic.persistent:
            if not await self._partitioned.exists(topic):
                raise TopicNotFound(f"Topic {topic} not found")
            return _non_persistent(names), None
        reply = await stats.internal_stats(self._lane, handle.keys, subscriptions=names)
        stream, compacted, cursors = reply.stream, reply.compacted, reply.cursors
        current, ledgers = reply.current_ledger, reply.ledgers
        if stream is None:
            if not await self._partitioned.exists(topic):
                raise TopicNotFound(f"Topic {topic} not found")
            stream = _EMPTY_STREAM
        length, size = stream.length, stream.size
        ever = text(stream.last_generated) != "0-0"
        rows = {row.name: _cursor(row, stream) for row in cursors}
        opened = current.ledger_id
        # ManagedLedgerImpl.State: Terminated once asyncTerminate ran, which here is the
        # ledger hash's mark (append_entries.lua stores nothing after it).
        state = "LedgerOpened" if reply.terminated is None else "Terminated"
        return {
            "entriesAddedCounter": stream.added if stream.added >= 0 else length,
            "numberOfEntries": length,
            "totalSize": size,
            "currentLedgerEntries": current.entries,
            "currentLedgerSize": current.size,
            "lastLedgerCreatedTimestamp": format_time(opened) if opened is not None else None,
            "lastLedgerCreationFailureTimestamp": None,
            "waitingCursorsCount": sum(1 for c in rows.values() if c["waitingReadOp"]),
            "pendingAddEntriesCount": 0,
            "lastConfirmedEntry": _position(stream.last_generated) if ever else "-1:-1",
            "state": state,
            "ledgers": _ledgers(ledgers, current, size),
            "cursors": rows,
            "schemaLedgers": [],
            "compactedLedger": (
                _ledger(-1, compacted.length, compacted.size) if compacted else _ledger(-1, -1, -1)
            ),
        }, reply.terminated

    async def partitioned(self, topic: TopicName) -> dict[str, Any]:
        """PartitionedTopicInternalStats: ``{"metadata": {"partitions": n}, "partitions":
        {partition name: PersistentTopicInternalStats}}``.

        Raises:
            TopicNotFound: not a partitioned topic.
        """
        count = await self._partitioned.partitions(topic)
        if count <= 0:
            raise TopicNotFound(f"Partitioned Topic {topic} not found")
        names = [topic.partition(i) for i in range(count)]
        read = await asyncio.gather(*(self._found(name) for name in names))
        partitions = {str(n): got for n, got in zip(names, read, strict=True) if got is not None}
        return {"metadata": {"partitions": count}, "partitions": partitions}

    async def _found(self, partition: TopicName) -> dict[str, Any] | None:
        try:
            return await self.topic(partition)
        except TopicNotFound:
            return None  # a partition nothing was written to nor subscribed yet


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
