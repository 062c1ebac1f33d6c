"""Partitioned-topic metadata and the topic lifecycle of a namespace (admin API).

Strategy: a partitioned topic is a name with a partition count; its partitions are
ordinary topics named ``<topic>-partition-<i>`` (Pulsar's ``TopicName.getPartition``), each
with its own stream, so everything else in the core serves them unchanged. The counts live
in one hash per namespace (``P:ns:{<ns>}:partitioned``: full topic name -> count), next to
the namespace's topic set (``P:ns:{<ns>}:topics``), under the same hash tag, so the
``partitioned_metadata.lua`` script changes both at once: a name is either a
non-partitioned topic or a partitioned one, never both, whichever gateway asks.

Creating a partitioned topic registers its partitions in the topic set, as Pulsar creates
the partitions' managed ledgers (``tryCreatePartitionsAsync``); that is what
GET_TOPICS_OF_NAMESPACE and the admin ``getList`` answer, and what regex consumers see.

Deleting a topic deletes its keys with ``delete_topic.lua`` (one script per partition, each
on that partition's hash tag) and then removes the name from the namespace. Pulsar refuses a
delete while clients are connected unless ``force``; here "connected" means a consumer with
a live lease anywhere in the fleet. Producers leave no trace in Redis, so they do not make
a topic busy (see docs/topics.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.errors import (
    InvalidPartitionCount,
    TopicBusy,
    TopicConflict,
    TopicNotFound,
)
from gateway.keys import KeySchema, TopicKeys
from gateway.storage import Storage
from gateway.topic_name import TopicName

__all__ = ["PartitionedTopics"]

_OK, _CONFLICT, _NOT_FOUND, _REFUSED_COUNT = 0, 1, 2, 3
_BUSY, _RETRY = 1, 2


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class PartitionedTopics:
    """Partition counts and namespace topic lists, read and changed atomically in Redis."""

    def __init__(self, storage: Storage, schema: KeySchema) -> None:
        self._storage = storage
        self._schema = schema
        #: called with the namespace after an admin create (the broker records the
        #: namespace in its tenant, as a producer's topic registration does)
        self.on_create: Callable[[str], Awaitable[None]] | None = None

    async def _created(self, topic: TopicName) -> None:
        if self.on_create is not None:
            await self.on_create(topic.namespace)

    def _namespace_keys(self, topic: TopicName) -> list[str]:
        ns = topic.namespace
        return [self._schema.namespace_topics(ns), self._schema.namespace_partitioned(ns)]

    # -- reads ---------------------------------------------------------------------------

    async def partitions(self, topic: TopicName) -> int:
        """The partition count of ``topic``; 0 for a non-partitioned topic or a partition.

        One ``HGET`` per call: the client asks before every producer and consumer and then
        once a minute per partitioned handle, which is cheap enough not to cache (a cache
        would delay partition increases).
        """
        if topic.partition_index >= 0:
            return 0
        raw = await self._storage.call(
            "HGET", self._schema.namespace_partitioned(topic.namespace), str(topic)
        )
        return int(raw) if raw is not None else 0

    async def exists(self, topic: TopicName) -> bool:
        """Whether a non-partitioned topic (or a partition) of that name exists."""
        key = self._schema.namespace_topics(topic.namespace)
        return bool(await self._storage.call("SISMEMBER", key, str(topic)))

    async def topics(self, namespace: str, domain: str | None = None) -> list[str]:
        """Sorted full names of the namespace's topics and partitions (no partitioned base
        names), as Pulsar's ``getList`` and GET_TOPICS_OF_NAMESPACE answer them."""
        members = await self._storage.call("SMEMBERS", self._schema.namespace_topics(namespace))
        names = sorted(_text(m) for m in members)
        if domain is not None:
            names = [n for n in names if n.startswith(f"{domain}://")]
        return names

    async def partitioned_topics(self, namespace: str, domain: str | None = None) -> list[str]:
        """Sorted full names of the namespace's partitioned topics."""
        raw = await self._storage.call("HKEYS", self._schema.namespace_partitioned(namespace))
        names = sorted(_text(m) for m in raw)
        if domain is not None:
            names = [n for n in names if n.startswith(f"{domain}://")]
        return names

    # -- metadata changes ----------------------------------------------------------------

    async def _metadata(self, op: str, topic: TopicName, *args: Any) -> int:
        code, message, previous = await self._storage.eval(
            "partitioned_metadata", self._namespace_keys(topic), [op, str(topic), *args]
        )
        text = _text(message)
        if code == _CONFLICT:
            raise TopicConflict(text)
        if code == _NOT_FOUND:
            raise TopicNotFound(text)
        if code == _REFUSED_COUNT:
            raise InvalidPartitionCount(text)
        return int(previous)

    async def create_partitioned(self, topic: TopicName, count: int) -> None:
        """Create a partitioned topic (Pulsar ``createPartitionedTopic``).

        Raises:
            InvalidPartitionCount: ``count`` < 1.
            TopicConflict: the name is taken by a topic of either kind, or a partition with
                an index >= ``count`` exists.
        """
        if count < 1:
            raise InvalidPartitionCount("Number of partitions should be more than 0")
        await self._metadata("create", topic, count)
        await self._created(topic)

    async def update_partitioned(self, topic: TopicName, count: int, force: bool) -> None:
        """Raise the partition count (Pulsar ``updatePartitionedTopic``).

        New partitions get partition 0's subscriptions at the earliest position, as Pulsar
        copies them, so no message routed to a new partition is skipped while consumers
        have not yet discovered it (the client re-reads the count once a minute).

        Raises:
            InvalidPartitionCount: ``count`` < 1, or fewer partitions than now.
            TopicNotFound: not a partitioned topic.
            TopicConflict: an unexpected partition beyond the count exists (unless force).
        """
        if count < 1:
            raise InvalidPartitionCount("Number of partitions should be more than 0")
        previous = await self._metadata("update", topic, count, "1" if force else "0")
        if count > previous:
            await self._copy_subscriptions(topic, previous, count)

    async def _copy_subscriptions(self, topic: TopicName, start: int, stop: int) -> None:
        first = self._schema.topic(topic.partition(0))
        raw = await self._storage.call("HGETALL", first.subscriptions)
        if not raw:
            return
        calls = []
        for i in range(start, stop):
            keys = self._schema.topic(topic.partition(i))
            calls.append(
                self._storage.eval("copy_subscriptions", [keys.stream, keys.subscriptions], raw)
            )
        await asyncio.gather(*calls)

    async def create_non_partitioned(self, topic: TopicName) -> None:
        """Create a non-partitioned topic (Pulsar ``createNonPartitionedTopic``).

        Raises:
            TopicConflict: the name is taken by a topic of either kind.
        """
        await self._metadata("create-non-partitioned", topic)
        await self._created(topic)

    # -- deletion ------------------------------------------------------------------------

    async def _delete_keys(self, keys: TopicKeys, force: bool, dry_run: bool) -> bool:
        """Run ``delete_topic.lua`` on one partition; True when it had data."""
        for _ in range(5):
            subs = [_text(s) for s in await self._storage.call("HKEYS", keys.subscriptions)]
            # Producer registry keys are lease sets too: connected producers make it busy.
            script_keys = [
                keys.stream,
                keys.subscriptions,
                keys.producers,
                keys.producer_owners,
                keys.producer_waiters,
                keys.topic_epoch,
                keys.last_sequence_ids,
                keys.schemas,
                keys.maintenance_lock,
                keys.compacted,
                keys.compacting,
                keys.compaction,
            ]
            for sub in subs:
                script_keys += keys.subscription_keys(sub)
            code, message, existed = await self._storage.eval(
                "delete_topic",
                script_keys,
                ["1" if force else "0", "1" if dry_run else "0", *subs],
            )
            if code == _RETRY:
                continue  # a subscription appeared between HKEYS and the script
            if code == _BUSY:
                raise TopicBusy(_text(message))
            return bool(existed)
        raise TopicBusy("Topic has active producers/subscriptions")

    async def delete(self, topic: TopicName, force: bool) -> None:
        """Delete a non-partitioned topic or one partition (Pulsar ``deleteTopic``).

        Raises:
            TopicConflict: ``topic`` is a partitioned topic (use :meth:`delete_partitioned`).
            TopicNotFound: no such topic.
            TopicBusy: consumers are connected and ``force`` is False.
        """
        if await self.partitions(topic) > 0:
            raise TopicConflict(
                f"{topic} is a partitioned topic. Instead of calling delete please call "
                "delete-partitioned-topic."
            )
        listed = await self.exists(topic)
        had_data = await self._delete_keys(self._schema.topic(topic), force, dry_run=False)
        if not listed and not had_data:
            raise TopicNotFound(f"Topic {topic} not found")
        await self._storage.call("SREM", self._schema.namespace_topics(topic.namespace), str(topic))
        if topic.partition_index < 0:
            await self._delete_policies(topic)

    async def _delete_policies(self, topic: TopicName) -> None:
        # Pulsar deletes a topic's policies with the topic; the policies module hears the
        # change on its channel and drops its caches.
        await self._storage.call("DEL", self._schema.topic_policies(topic))
        self._storage.notify(self._schema.policies_channel)

    async def delete_partitioned(self, topic: TopicName, force: bool) -> int:
        """Delete a partitioned topic and all its partitions; returns the count.

        Every partition is checked first (no partition is deleted when one is busy), then
        each is deleted and finally the metadata. A consumer attaching between the check and
        the delete of its partition makes that delete fail with TopicBusy, leaving the
        topic partly deleted, which a retry finishes (Pulsar has the same window).

        Raises:
            TopicConflict: ``topic`` is a non-partitioned topic.
            TopicNotFound: no such topic.
            TopicBusy: consumers are connected and ``force`` is False.
        """
        count = await self.partitions(topic)
        if count <= 0:
            if await self.exists(topic):
                raise TopicConflict(
                    f"{topic} is a non-partitioned topic. Instead of calling "
                    "delete-partitioned-topic please call delete."
                )
            raise TopicNotFound(f"Partitioned Topic {topic} not found")
        partitions = [self._schema.topic(topic.partition(i)) for i in range(count)]
        if not force:
            await asyncio.gather(*(self._delete_keys(k, False, dry_run=True) for k in partitions))
        await asyncio.gather(*(self._delete_keys(k, force, dry_run=False) for k in partitions))
        count = await self._metadata("delete", topic)
        await self._delete_policies(topic)
        return count
