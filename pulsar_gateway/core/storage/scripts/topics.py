"""Typed calls of the topic metadata and lifecycle scripts: ``partitioned_metadata``,
``copy_subscriptions``, ``delete_topic``, ``topic_maintenance``, ``backlog_usage``,
``backlog_evict``, ``compaction`` and ``register_schema``."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pulsar_gateway.core.errors import (
    GatewayError,
    InvalidPartitionCount,
    TooManyTopics,
    TopicBusy,
    TopicConflict,
    TopicNotFound,
)
from pulsar_gateway.core.model.topic_name import TopicName
from pulsar_gateway.core.storage.keys import TopicKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner, count_or_none, text

__all__ = [
    "BacklogUsage",
    "CompactionBegin",
    "CompactionStart",
    "DeleteTopicStatus",
    "EvictionMode",
    "MaintenanceReply",
    "MetadataOperation",
    "TopicCounts",
    "backlog_evict",
    "backlog_size_after",
    "backlog_usage",
    "compaction_begin",
    "compaction_commit",
    "compaction_fail",
    "compaction_renew",
    "copy_subscriptions",
    "delete_topic",
    "partitioned_metadata",
    "register_schema",
    "topic_counts",
    "topic_maintenance",
    "topic_register",
    "topic_terminate",
    "topic_truncate",
]


# -- partitioned-topic metadata ------------------------------------------------------------


class MetadataOperation(enum.StrEnum):
    """What ``partitioned_metadata.lua`` changes (Pulsar's admin operations)."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    CREATE_NON_PARTITIONED = "create-non-partitioned"


#: ``partitioned_metadata.lua`` status codes -> errors (0 is OK).
_METADATA_ERRORS: dict[int, type[GatewayError]] = {
    1: TopicConflict,  # the name is in use (409)
    2: TopicNotFound,  # not a partitioned topic
    3: InvalidPartitionCount,  # fewer partitions than now (422)
    4: TooManyTopics,  # maxTopicsPerNamespace (412)
}


def _metadata_reply(reply: list[Any]) -> int:
    code, message, previous = reply
    error = _METADATA_ERRORS.get(int(code))
    if error is not None:
        raise error(text(message))
    return int(previous)


def partitioned_metadata(
    lane: ScriptRunner,
    namespace_topics: str,
    namespace_partitioned: str,
    *,
    operation: MetadataOperation,
    topic: str,
    partitions: int = 0,
    force: bool = False,
    max_topics: int = 0,
) -> asyncio.Future[int]:
    """Change the namespace's topic list and partitioned-topic metadata together; a create
    is refused when the namespace would hold more than ``max_topics`` (0: no limit).

    Resolves with the previous partition count (0 for a create); fails with TopicConflict,
    TopicNotFound, InvalidPartitionCount or TooManyTopics.
    """
    args: list[str | int] = [str(operation), topic, partitions, int(force), max_topics]
    return lane.eval(
        SCRIPTS["partitioned_metadata"],
        [namespace_topics, namespace_partitioned],
        args,
        _metadata_reply,
    )


class RegisterStatus(enum.IntEnum):
    """``topic_register.lua``'s answer."""

    KNOWN = 0
    CREATED = 1
    NOT_FOUND = 2  # does not exist and may not be created
    TOO_MANY_TOPICS = 3  # the namespace holds its most topics


def topic_register(
    lane: ScriptRunner,
    namespace_topics: str,
    namespace_partitioned: str,
    *,
    topic: TopicName,
    may_create: bool,
    max_topics: int,
) -> asyncio.Future[RegisterStatus]:
    """Record ``topic`` in its namespace's list as a client attaches, creating it when
    ``may_create`` and the namespace holds fewer than ``max_topics`` (0: no limit); a
    partition of an existing partitioned topic is always known."""
    partition = topic.partition_index
    return lane.eval(
        SCRIPTS["topic_register"],
        [namespace_topics, namespace_partitioned],
        [
            str(topic),
            int(may_create),
            max_topics,
            str(topic.partitioned_topic_name) if partition >= 0 else "",
            max(partition, 0),
        ],
        RegisterStatus,
    )


def copy_subscriptions(
    lane: ScriptRunner, keys: TopicKeys, *, subscriptions: Sequence[tuple[bytes, bytes]]
) -> asyncio.Future[int]:
    """Create ``subscriptions`` (name, type) on a new partition at its earliest position;
    resolves with the number created."""
    args = [item for pair in subscriptions for item in pair]
    return lane.eval(SCRIPTS["copy_subscriptions"], [keys.stream, keys.subscriptions], args, int)


# -- deletion ------------------------------------------------------------------------------


class DeleteTopicStatus(enum.IntEnum):
    """``delete_topic.lua`` status codes."""

    DONE = 0
    #: a consumer or producer is connected (and not force): Pulsar's 412 TopicBusy
    BUSY = 1
    #: a subscription was created since the caller listed them: list again
    RETRY = 2


def delete_topic(
    lane: ScriptRunner,
    keys: TopicKeys,
    *,
    subscriptions: Sequence[str],
    force: bool,
    dry_run: bool,
) -> asyncio.Future[tuple[DeleteTopicStatus, bool]]:
    """Delete every key of the topic partition and of ``subscriptions`` (the names just
    read from its subscriptions hash). Resolves with the status and whether the topic had
    data; fails with TopicBusy while clients are connected and ``force`` is False."""
    script_keys = [
        keys.stream,
        keys.subscriptions,
        keys.producers,
        keys.producer_owners,
        keys.producer_waiters,
        keys.topic_epoch,
        keys.last_sequence_ids,
        keys.ledger,
        keys.schemas,
        keys.maintenance_lock,
        keys.compacted,
        keys.compacting,
        keys.compaction,
    ]
    for name in subscriptions:
        script_keys += keys.subscription(name).all

    def decode(reply: list[Any]) -> tuple[DeleteTopicStatus, bool]:
        status = DeleteTopicStatus(int(reply[0]))
        if status is DeleteTopicStatus.BUSY:
            raise TopicBusy(text(reply[1]))
        return status, bool(reply[2])

    return lane.eval(
        SCRIPTS["delete_topic"],
        script_keys,
        [int(force), int(dry_run), *subscriptions],
        decode,
    )


# -- retention and TTL ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MaintenanceReply:
    """One step of a topic's maintenance round.

    Attributes:
        skipped: another gateway owns this topic's round.
        expired: entries acknowledged by message TTL, summed over subscriptions.
        trimmed: entries removed by retention.
        more: the budget ran out: call again.
    """

    skipped: bool
    expired: int = 0
    trimmed: int = 0
    more: bool = False


def _maintenance_reply(reply: list[Any]) -> MaintenanceReply:
    code, expired, trimmed, more = reply
    if int(code) == 1:
        return MaintenanceReply(True)
    return MaintenanceReply(False, int(expired), int(trimmed), bool(more))


def topic_maintenance(
    lane: ScriptRunner,
    keys: TopicKeys,
    *,
    owner: str,
    lock_ms: int,
    ttl_seconds: int,
    retention_minutes: int,
    retention_mb: int,
    trim_unsubscribed: bool,
    budget: int,
) -> asyncio.Future[MaintenanceReply]:
    """Apply message TTL (0 = off) and retention (-1 = infinite) to one topic partition,
    at most ``budget`` entries, after taking its round lock for ``owner`` (``lock_ms``).
    ``trim_unsubscribed``: trim a topic without subscriptions (an explicit retention
    policy)."""
    return lane.eval(
        SCRIPTS["topic_maintenance"],
        [keys.stream, keys.subscriptions, keys.maintenance_lock, keys.compaction],
        [
            owner,
            lock_ms,
            ttl_seconds,
            retention_minutes,
            retention_mb,
            int(trim_unsubscribed),
            budget,
        ],
        _maintenance_reply,
    )


# -- backlog quotas ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BacklogUsage:
    """What a topic partition's backlog uses of its quotas (``backlog_usage.lua``).

    Attributes:
        size: the slowest subscription's backlog, estimated in bytes.
        age_ms: the age of the oldest message a subscription has not acknowledged, -1 when
            there is none.
    """

    size: int
    age_ms: int


def _usage_reply(reply: list[Any]) -> BacklogUsage:
    return BacklogUsage(int(reply[0]), int(reply[1]))


def backlog_size_after(lane: ScriptRunner, keys: TopicKeys, position: bytes) -> asyncio.Future[int]:
    """The estimated size (bytes) of the topic partition's entries after stream id
    ``position``."""
    return lane.eval(SCRIPTS["backlog_size_after"], [keys.stream], [position], int)


def topic_terminate(lane: ScriptRunner, keys: TopicKeys) -> asyncio.Future[bytes | None]:
    """Terminate the topic partition; resolves with its last entry's stream id (None when it
    has none). Terminating it again answers the same."""

    def decode(reply: Any) -> bytes | None:
        value = reply if isinstance(reply, bytes) else str(reply).encode()
        return None if value == b"-" else value

    return lane.eval(SCRIPTS["topic_terminate"], [keys.stream, keys.ledger], [], decode)


@dataclass(frozen=True, slots=True)
class TopicCounts:
    """``topic_counts.lua``: what an attaching producer or consumer checks."""

    producers: int
    subscriptions: int
    subscription_exists: bool
    consumers: int
    terminated: bool
    #: live consumers of every subscription (0 unless asked for)
    topic_consumers: int = 0


def topic_counts(
    lane: ScriptRunner,
    keys: TopicKeys,
    subscription: str = "",
    producer_name: str = "",
    *,
    topic_consumers: bool = False,
) -> asyncio.Future[TopicCounts]:
    """Whether the topic partition was terminated, its live producers (but
    ``producer_name``) and subscriptions; with ``subscription``, whether it exists and its
    live consumers; with ``topic_consumers``, the live consumers of all its subscriptions."""

    def decode(reply: list[Any]) -> TopicCounts:
        return TopicCounts(
            int(reply[0]),
            int(reply[1]),
            bool(int(reply[2])),
            int(reply[3]),
            bool(int(reply[4])),
            int(reply[5]),
        )

    consumers = keys.consumers(subscription) if subscription else keys.producers
    prefix = keys.consumers("") if topic_consumers else ""
    return lane.eval(
        SCRIPTS["topic_counts"],
        [keys.producers, keys.subscriptions, consumers, keys.ledger],
        [subscription, producer_name, prefix],
        decode,
    )


def topic_truncate(lane: ScriptRunner, keys: TopicKeys) -> asyncio.Future[int]:
    """Delete every entry of the topic partition but the last; how many were deleted."""
    return lane.eval(SCRIPTS["topic_truncate"], [keys.stream], [], int)


def backlog_usage(lane: ScriptRunner, keys: TopicKeys) -> asyncio.Future[BacklogUsage]:
    """The topic partition's backlog size and the age of its oldest unacknowledged message."""
    return lane.eval(SCRIPTS["backlog_usage"], [keys.stream], [], _usage_reply)


class EvictionMode(enum.StrEnum):
    """Which quota ``backlog_evict.lua`` enforces."""

    SIZE = "size"
    AGE = "age"


def backlog_evict(
    lane: ScriptRunner,
    keys: TopicKeys,
    *,
    mode: EvictionMode,
    limit: int,
    target: int,
    subscriptions: Sequence[str],
) -> asyncio.Future[int | None]:
    """Drop the oldest unacknowledged messages of ``subscriptions`` (the names just read
    from the subscriptions hash) if the backlog is over ``limit`` (bytes, or ms of age),
    down to ``target``. Resolves with the number of subscriptions whose backlog was cut,
    None when the backlog was not over the limit (nothing changed)."""
    script_keys = [keys.stream]
    for name in subscriptions:
        script_keys += [keys.delayed(name), keys.ack_sets(name)]

    def decode(reply: list[Any]) -> int | None:
        return int(reply[1]) if int(reply[0]) else None

    return lane.eval(
        SCRIPTS["backlog_evict"],
        script_keys,
        [str(mode), limit, target, *subscriptions],
        decode,
    )


# -- compaction ----------------------------------------------------------------------------


def _compaction_keys(keys: TopicKeys) -> list[str]:
    return [keys.stream, keys.compaction, keys.compacted, keys.compacting]


class CompactionBegin(enum.IntEnum):
    """How a compaction start went (``compaction.lua`` ``begin``)."""

    STARTED = 0
    #: a compaction of the topic runs somewhere in the fleet
    RUNNING = 1
    #: the topic has no stream
    NO_TOPIC = 2


@dataclass(frozen=True, slots=True)
class CompactionStart:
    """``begin``'s answer: the previous horizon and the new one (the topic's last entry
    now), ``b""`` when absent."""

    status: CompactionBegin
    old_horizon: bytes = b""
    new_horizon: bytes = b""


def _begin_reply(reply: list[Any]) -> CompactionStart:
    status = CompactionBegin(int(reply[0]))
    if status is not CompactionBegin.STARTED:
        return CompactionStart(status)
    return CompactionStart(status, reply[1], reply[2])


def compaction_begin(
    lane: ScriptRunner, keys: TopicKeys, *, token: str, lease_ms: int
) -> asyncio.Future[CompactionStart]:
    """Start a compaction run identified by ``token``, holding a lease of ``lease_ms``."""
    return lane.eval(
        SCRIPTS["compaction"], _compaction_keys(keys), ["begin", token, lease_ms], _begin_reply
    )


def _current(reply: list[Any]) -> bool:
    return int(reply[0]) == 0


def compaction_renew(
    lane: ScriptRunner, keys: TopicKeys, *, token: str, lease_ms: int
) -> asyncio.Future[bool]:
    """Renew the run's lease; False when this run is no longer the current one."""
    return lane.eval(
        SCRIPTS["compaction"], _compaction_keys(keys), ["renew", token, lease_ms], _current
    )


def compaction_commit(
    lane: ScriptRunner, keys: TopicKeys, *, token: str, horizon: bytes, replace: bool
) -> asyncio.Future[bool]:
    """Finish the run at ``horizon``, replacing the view with the one built when
    ``replace``; False when this run is no longer the current one."""
    return lane.eval(
        SCRIPTS["compaction"],
        _compaction_keys(keys),
        ["commit", token, horizon, int(replace)],
        _current,
    )


def compaction_fail(
    lane: ScriptRunner, keys: TopicKeys, *, token: str, error: str
) -> asyncio.Future[bool]:
    """Record the run's failure; False when this run is no longer the current one."""
    return lane.eval(
        SCRIPTS["compaction"], _compaction_keys(keys), ["fail", token, error], _current
    )


# -- schemas -------------------------------------------------------------------------------


def register_schema(
    lane: ScriptRunner, keys: TopicKeys, *, known_versions: int, schema: str
) -> asyncio.Future[int | None]:
    """Append ``schema`` (JSON) as a new version of the base topic whose ``keys`` these
    are, if it still has ``known_versions`` versions. Resolves with the new version, None
    when another registration came first (read again)."""
    return lane.eval(
        SCRIPTS["register_schema"], [keys.schemas], [known_versions, schema], count_or_none
    )
