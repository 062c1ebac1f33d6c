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
import contextlib
import random

from pulsar_gateway.core.errors import (
    InvalidPartitionCount,
    TopicBusy,
    TopicConflict,
    TopicNotFound,
)
from pulsar_gateway.core.model.topic_name import TopicName
from pulsar_gateway.core.policies.topic_creation import TopicCreationRules
from pulsar_gateway.core.storage import policy_store, registry, topic_store
from pulsar_gateway.core.storage.keys import KeySchema, TopicKeys
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import topics as scripts
from pulsar_gateway.core.storage.scripts.topics import DeleteTopicStatus, MetadataOperation
from pulsar_gateway.core.topics.topic import RequireNamespace

__all__ = ["PartitionedTopics"]


class PartitionedTopics:
    """Partition counts and namespace topic lists, read and changed atomically in Redis."""

    def __init__(
        self,
        lane: Lane,
        keys: KeySchema,
        require_namespace: RequireNamespace,
        rules: TopicCreationRules,
    ) -> None:
        self._lane = lane
        self._keys = keys
        #: refuses a topic in a namespace that does not exist with TopicNotFound
        #: (:meth:`.tenants.Tenants.require_topic_namespace`)
        self._require_namespace = require_namespace
        #: auto-creation and maxTopicsPerNamespace
        self._rules = rules

    # -- reads ---------------------------------------------------------------------------

    async def partitions(self, topic: TopicName) -> int:
        """The partition count of ``topic``; 0 for a non-partitioned topic or a partition.

        One ``HGET`` per call: the client asks before every producer and consumer and then
        once a minute per partitioned handle, which is cheap enough not to cache (a cache
        would delay partition increases).
        """
        if topic.partition_index >= 0:
            return 0
        return await registry.partition_count(self._lane, self._keys, topic)

    async def client_partitions(self, topic: TopicName) -> int:
        """:meth:`partitions` for a client about to attach (PARTITIONED_METADATA, the
        REST and WebSocket fronts).

        Raises:
            TopicNotFound: the topic's namespace does not exist.
        """
        # both reads in one pipeline: the client asks before every attach
        _, count = await asyncio.gather(
            self._require_namespace(topic.namespace), self.partitions(topic)
        )
        if count or topic.partition_index >= 0:
            return count
        return await self._auto_create_partitioned(topic)

    async def _auto_create_partitioned(self, topic: TopicName) -> int:
        """A topic nobody created, asked for by a client of a namespace whose topics are
        created partitioned (``allowAutoTopicCreationType=partitioned``): created now with
        ``defaultNumPartitions``, as Pulsar's
        ``fetchPartitionedTopicMetadataCheckAllowAutoCreationAsync`` does. 0 for the rest
        (a non-partitioned topic is created when its producer or consumer attaches)."""
        auto = await self._rules.auto_creation(topic.namespace)
        if not (auto.allowed and auto.partitioned) or await self.exists(topic):
            return 0
        with contextlib.suppress(TopicConflict):  # another gateway created it meanwhile
            await self._metadata(
                MetadataOperation.CREATE,
                topic,
                auto.default_partitions,
                max_topics=await self._rules.max_topics(topic.namespace),
            )
        return await self.partitions(topic)

    async def exists(self, topic: TopicName) -> bool:
        """Whether a non-partitioned topic (or a partition) of that name exists."""
        return await registry.topic_listed(self._lane, self._keys, topic)

    async def topics(self, namespace: str, domain: str | None = None) -> list[str]:
        """Sorted full names of the namespace's topics and partitions (no partitioned base
        names), as Pulsar's ``getList`` and GET_TOPICS_OF_NAMESPACE answer them."""
        names = sorted(await registry.topic_names(self._lane, self._keys, namespace))
        if domain is not None:
            names = [n for n in names if n.startswith(f"{domain}://")]
        return names

    async def all_topics(self) -> list[str]:
        """Every topic and partition registered in any namespace, in random order (so
        gateways walking them start at different topics).

        Read from the tenant and namespace registry (every topic registration records its
        namespace there), one key per command: no ``SCAN``, which on a Redis Cluster would
        walk one node's keys only.
        """
        lane, keys = self._lane, self._keys
        tenants = await registry.tenant_names(lane, keys)
        listed = await asyncio.gather(*(registry.namespace_names(lane, keys, t) for t in tenants))
        namespaces = sorted({ns for batch in listed for ns in batch})
        members = await asyncio.gather(*(registry.topic_names(lane, keys, ns) for ns in namespaces))
        topics = list({name for batch in members for name in batch})
        random.shuffle(topics)
        return topics

    async def partitioned_topics(self, namespace: str, domain: str | None = None) -> list[str]:
        """Sorted full names of the namespace's partitioned topics."""
        names = sorted(await registry.partitioned_topic_names(self._lane, self._keys, namespace))
        if domain is not None:
            names = [n for n in names if n.startswith(f"{domain}://")]
        return names

    # -- metadata changes ----------------------------------------------------------------

    async def _metadata(
        self,
        operation: MetadataOperation,
        topic: TopicName,
        partitions: int = 0,
        force: bool = False,
        max_topics: int = 0,
    ) -> int:
        ns = topic.namespace
        return await scripts.partitioned_metadata(
            self._lane,
            self._keys.namespace_topics(ns),
            self._keys.namespace_partitioned(ns),
            operation=operation,
            topic=str(topic),
            partitions=partitions,
            force=force,
            max_topics=max_topics,
        )

    async def create_partitioned(self, topic: TopicName, count: int) -> None:
        """Create a partitioned topic (Pulsar ``createPartitionedTopic``).

        Raises:
            InvalidPartitionCount: ``count`` < 1.
            TopicNotFound: the namespace does not exist.
            TopicConflict: the name is taken by a topic of either kind, or a partition with
                an index >= ``count`` exists.
            TooManyTopics: the namespace would pass ``maxTopicsPerNamespace``.
        """
        if count < 1:
            raise InvalidPartitionCount("Number of partitions should be more than 0")
        await self._require_namespace(topic.namespace)
        max_topics = await self._rules.max_topics(topic.namespace)
        await self._metadata(MetadataOperation.CREATE, topic, count, max_topics=max_topics)

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
        previous = await self._metadata(MetadataOperation.UPDATE, topic, count, force)
        if count > previous:
            await self._copy_subscriptions(topic, previous, count)

    async def _copy_subscriptions(self, topic: TopicName, start: int, stop: int) -> None:
        first = self._keys.topic(topic.partition(0))
        pairs = await topic_store.subscription_records(self._lane, first)
        if not pairs:
            return
        await asyncio.gather(
            *(
                scripts.copy_subscriptions(
                    self._lane, self._keys.topic(topic.partition(i)), subscriptions=pairs
                )
                for i in range(start, stop)
            )
        )

    async def create_non_partitioned(self, topic: TopicName) -> None:
        """Create a non-partitioned topic (Pulsar ``createNonPartitionedTopic``).

        Raises:
            TopicNotFound: the namespace does not exist.
            TopicConflict: the name is taken by a topic of either kind.
            TooManyTopics: the namespace would pass ``maxTopicsPerNamespace``.
        """
        await self._require_namespace(topic.namespace)
        max_topics = await self._rules.max_topics(topic.namespace)
        await self._metadata(MetadataOperation.CREATE_NON_PARTITIONED, topic, max_topics=max_topics)

    # -- deletion ------------------------------------------------------------------------

    async def _delete_keys(self, keys: TopicKeys, force: bool, dry_run: bool) -> bool:
        """Run ``delete_topic.lua`` on one partition; True when it had data."""
        for _ in range(5):
            subs = await topic_store.subscription_names(self._lane, keys)
            # Producer registry keys are lease sets too: connected producers make it busy.
            status, existed = await scripts.delete_topic(
                self._lane, keys, subscriptions=subs, force=force, dry_run=dry_run
            )
            if status is DeleteTopicStatus.RETRY:
                continue  # a subscription appeared between HKEYS and the script
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
        had_data = await self._delete_keys(self._keys.topic(topic), force, dry_run=False)
        if not listed and not had_data:
            raise TopicNotFound(f"Topic {topic} not found")
        await registry.unlist_topic(self._lane, self._keys, topic)
        if topic.partition_index < 0:
            await self._delete_policies(topic)

    async def _delete_policies(self, topic: TopicName) -> None:
        # Pulsar deletes a topic's policies with the topic; the policies module hears the
        # change on its channel and drops its caches.
        await policy_store.delete_hash(self._lane, self._keys.topic_policies(topic))
        self._lane.notify(self._keys.policies_channel)

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
        partitions = [self._keys.topic(topic.partition(i)) for i in range(count)]
        if not force:
            await asyncio.gather(*(self._delete_keys(k, False, dry_run=True) for k in partitions))
        await asyncio.gather(*(self._delete_keys(k, force, dry_run=False) for k in partitions))
        count = await self._metadata(MetadataOperation.DELETE, topic)
        await self._delete_policies(topic)
        return count
