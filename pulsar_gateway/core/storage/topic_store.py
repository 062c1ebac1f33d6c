"""Typed commands on one topic partition's keys (:class:`.keys.TopicKeys`,
:class:`.keys.SubscriptionKeys`): its subscriptions hash, its stream and acknowledgements,
its compaction state and its schema list.

Stream entries come back as Redis stores them: ``(stream id, [name, value, ...])``, read
by :meth:`pulsar_gateway.core.model.entry.StoredEntry.parse`. Each function queues one
command and returns the lane's future (:mod:`.commands`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from pulsar_gateway.core.storage.commands import CommandLane
from pulsar_gateway.core.storage.keys import SubscriptionKeys, TopicKeys
from pulsar_gateway.core.storage.scripts import Arg, texts

__all__ = [
    "Entry",
    "acknowledge",
    "append_compacted",
    "append_schema",
    "compaction_horizon",
    "compaction_state",
    "decode_entries",
    "delete_schemas",
    "drop_ack_sets",
    "entries",
    "entries_reversed",
    "read_new_entries",
    "schema_count",
    "schemas",
    "subscription_exists",
    "subscription_names",
    "subscription_records",
]

#: A stream entry: its id and its flat ``[name, value, ...]`` field list.
Entry = tuple[bytes, list[bytes]]


def decode_entries(reply: list[Any]) -> list[Entry]:
    """An ``XRANGE``/``XREVRANGE`` reply as entries."""
    return [(row[0], row[1]) for row in reply]


def _pairs(reply: list[Any]) -> list[tuple[bytes, bytes]]:
    return list(zip(reply[::2], reply[1::2], strict=True))


def _fields(reply: list[Any]) -> dict[bytes, bytes]:
    return {reply[i]: reply[i + 1] for i in range(0, len(reply), 2)}


# -- subscriptions -----------------------------------------------------------------------


def subscription_names(lane: CommandLane, keys: TopicKeys) -> asyncio.Future[list[str]]:
    """The names of the partition's subscriptions, in no order (``HKEYS``)."""
    return lane.call("HKEYS", keys.subscriptions, decode=texts)


def subscription_records(
    lane: CommandLane, keys: TopicKeys
) -> asyncio.Future[list[tuple[bytes, bytes]]]:
    """Every subscription with its stored record, as stored (``HGETALL``)."""
    return lane.call("HGETALL", keys.subscriptions, decode=_pairs)


def subscription_exists(
    lane: CommandLane, keys: TopicKeys, subscription: str
) -> asyncio.Future[bool]:
    """Whether the partition has ``subscription`` (``HEXISTS``)."""
    return lane.call("HEXISTS", keys.subscriptions, subscription, decode=bool)


# -- entries and acknowledgements ------------------------------------------------------


def entries(
    lane: CommandLane, stream: str, start: Arg, end: Arg, count: int | None = None
) -> asyncio.Future[list[Entry]]:
    """The entries of ``stream`` from ``start`` to ``end``, oldest first, at most ``count``
    (``XRANGE``; ``-``/``+`` are the ends, ``(id`` excludes ``id``)."""
    args: tuple[Arg, ...] = ("COUNT", count) if count is not None else ()
    return lane.call("XRANGE", stream, start, end, *args, decode=decode_entries)


def entries_reversed(
    lane: CommandLane, stream: str, end: Arg, start: Arg, count: int
) -> asyncio.Future[list[Entry]]:
    """At most ``count`` entries of ``stream`` from ``end`` back to ``start``, newest first
    (``XREVRANGE``)."""
    return lane.call("XREVRANGE", stream, end, start, "COUNT", count, decode=decode_entries)


def read_new_entries(
    lane: CommandLane, keys: SubscriptionKeys, subscription: str, consumer: str, count: int
) -> asyncio.Future[list[Entry]]:
    """At most ``count`` entries of the stream that no consumer of ``subscription`` has read,
    made pending at ``consumer`` (``XREADGROUP ... >``), oldest first."""
    return lane.call(
        "XREADGROUP",
        "GROUP",
        subscription,
        consumer,
        "COUNT",
        count,
        "STREAMS",
        keys.stream,
        ">",
        decode=_new_entries,
    )


def _new_entries(reply: list[Any] | None) -> list[Entry]:
    # ``[[stream, [(id, fields), ...]]]``, or nil when there is nothing new
    return reply[0][1] if reply else []


def acknowledge(
    lane: CommandLane, keys: SubscriptionKeys, subscription: str, stream_ids: Sequence[bytes]
) -> asyncio.Future[int]:
    """Acknowledge entries in the subscription's consumer group; resolves with how many
    were pending (``XACK``)."""
    return lane.call("XACK", keys.stream, subscription, *stream_ids)


def drop_ack_sets(
    lane: CommandLane, keys: SubscriptionKeys, stream_ids: Sequence[bytes]
) -> asyncio.Future[Any]:
    """Forget the batch ack sets of entries acknowledged whole (``HDEL``)."""
    return lane.call("HDEL", keys.ack_sets, *stream_ids)


# -- compaction --------------------------------------------------------------------------


def compaction_state(lane: CommandLane, keys: TopicKeys) -> asyncio.Future[dict[bytes, bytes]]:
    """The partition's compaction hash, field -> value as stored (``HGETALL``)."""
    return lane.call("HGETALL", keys.compaction, decode=_fields)


def compaction_horizon(lane: CommandLane, keys: TopicKeys) -> asyncio.Future[bytes | None]:
    """The last entry id the compacted view covers, None before the first compaction
    (``HGET``)."""
    return lane.call("HGET", keys.compaction, "horizon")


def append_compacted(
    lane: CommandLane, keys: TopicKeys, entry_id: bytes, fields: Sequence[Arg]
) -> asyncio.Future[Any]:
    """Append an entry with its own id and flat ``fields`` to the view being built
    (``XADD``)."""
    return lane.call("XADD", keys.compacting, entry_id, *fields)


# -- schemas -----------------------------------------------------------------------------


def schemas(lane: CommandLane, keys: TopicKeys) -> asyncio.Future[list[bytes]]:
    """The partitioned topic's schema list, oldest first, JSON as stored (``LRANGE``)."""
    return lane.call("LRANGE", keys.schemas, 0, -1)


def schema_count(lane: CommandLane, keys: TopicKeys) -> asyncio.Future[int]:
    """How many schema versions (deletion markers included) are stored (``LLEN``)."""
    return lane.call("LLEN", keys.schemas, decode=int)


def append_schema(lane: CommandLane, keys: TopicKeys, schema: str) -> asyncio.Future[int]:
    """Append a schema version's JSON; resolves with the list's new length (``RPUSH``)."""
    return lane.call("RPUSH", keys.schemas, schema, decode=int)


def delete_schemas(lane: CommandLane, keys: TopicKeys) -> asyncio.Future[Any]:
    """Delete the schema list (``DEL``)."""
    return lane.call("DEL", keys.schemas)
