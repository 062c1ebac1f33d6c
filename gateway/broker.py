"""The broker service of one gateway: the entry point adapters call.

It owns the Redis storage front, the pub/sub notifier and this gateway's views of topics
and subscriptions, and runs the lease renewal that tells the fleet its consumers are alive.
Adapters call :meth:`Broker.create_producer` and :meth:`Broker.subscribe` and then talk to
the returned :class:`~gateway.producer.Producer` and :class:`~gateway.consumer.Consumer`.
Nothing here is needed by another gateway: state that matters lives in Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
from collections.abc import Iterator
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway import backlog_quota, deduplication, delayed_delivery
from gateway.authentication import AuthenticationService
from gateway.authorization import AuthorizationService
from gateway.compaction import CompactionService
from gateway.config import GatewayConfig
from gateway.consumer import (
    Consumer,
    ConsumerSink,
    InitialPosition,
    SubscriptionType,
)
from gateway.delayed_delivery import DelayedDeliveryPolicy
from gateway.dispatcher import POLL_INTERVAL
from gateway.errors import GatewayError, NotAllowed
from gateway.fleet import Fleet
from gateway.key_shared import KeySharedPolicy
from gateway.keys import KeySchema
from gateway.message_id import MessageId
from gateway.metrics import GatewayMetrics
from gateway.non_persistent import NonPersistentTopics
from gateway.partitioned_topics import PartitionedTopics
from gateway.policies import Policies
from gateway.producer import Producer, ProducerAccessMode
from gateway.producer_registry import ProducerRegistry
from gateway.rates import RateReporter
from gateway.scheduled_messages import ScheduledMessages
from gateway.schema_registry import SchemaData, SchemaRegistry
from gateway.storage import Notifier, Storage
from gateway.subscription import Subscription
from gateway.tenants import Tenants
from gateway.topic import Topic
from gateway.topic_maintenance import TopicMaintenance
from gateway.topic_metrics import TopicMetrics
from gateway.topic_name import TopicName, parse_topic_name

__all__ = ["Broker", "start_position"]

log = logging.getLogger(__name__)

#: The largest stream sequence number; ``ms-MAX`` sorts just before ``(ms+1)-0``.
_MAX_SEQ = (1 << 64) - 1


def start_position(initial: InitialPosition, start: MessageId | None) -> bytes:
    """The consumer-group id to create a subscription at.

    A group's id is its last-delivered entry, so delivery starts *after* it: ``$`` for
    Latest, ``0`` for Earliest, and for a reader's start message id ``(L, E)`` the id just
    before it, because a reader starts at its start id inclusive (protocol brief 3.3, the
    client drops what precedes it itself).
    """
    if start is None:
        return b"$" if initial is InitialPosition.LATEST else b"0"
    if start.is_earliest or start.ledger_id < 0:
        return b"0"
    if start.is_latest:
        return b"$"
    if start.entry_id > 0:
        return b"%d-%d" % (start.ledger_id, start.entry_id - 1)
    if start.ledger_id > 0:
        return b"%d-%d" % (start.ledger_id - 1, _MAX_SEQ)
    return b"0"


class Broker:
    """One gateway's broker service."""

    def __init__(self, config: GatewayConfig, redis: Redis, gateway_id: str | None = None) -> None:
        self.config = config
        #: token authentication (off unless configured); a bad key setting raises
        #: ValueError here, before anything starts
        self.authentication = AuthenticationService.from_config(config)
        self.gateway_id = gateway_id or config.gateway_id or secrets.token_hex(4)
        self.redis = redis
        self.storage = Storage(redis)
        self.notifier = Notifier(redis)
        self.schema = KeySchema(config.key_prefix)
        self.metrics = GatewayMetrics(config.cluster_name)
        self.policies = Policies(self.storage, self.notifier, self.schema)
        self.partitioned_topics = PartitionedTopics(self.storage, self.schema)
        #: tenants and namespaces (admin API); every topic registration records its namespace
        self.tenants = Tenants(
            self.storage,
            self.schema,
            config.cluster_name,
            self.partitioned_topics,
            config.advertised_host,
        )
        self.tenants.advertise(config.port, config.http_port)
        self.partitioned_topics.on_create = self.tenants.register_namespace
        self.producers = ProducerRegistry(
            self.storage, self.notifier, int(config.consumer_lease_seconds * 1000)
        )
        self.schemas = SchemaRegistry(self.storage, self.schema)
        #: the delayed-delivery policy of topics without one (the gateway's flags)
        self.delayed_delivery = DelayedDeliveryPolicy(
            active=config.delayed_delivery_enabled,
            max_delay_ms=config.delayed_delivery_max_delay_ms,
        )
        #: this gateway's message rates, reported to the fleet (gateway/rates.py)
        self.rates = RateReporter(self, config.stats_interval_seconds)
        #: the live gateways; which one exports a topic's metrics
        self.fleet = Fleet(self)
        self.topic_metrics = TopicMetrics(self)
        self.metrics.registry.register(self.topic_metrics)
        self._producer_uids = itertools.count()
        self._refresh: asyncio.Task[None] | None = None
        self._topics: dict[str, Topic] = {}
        self._subscriptions: dict[tuple[str, str], Subscription] = {}
        self._channel_subs: dict[str, set[Subscription]] = {}
        self._uids = itertools.count()
        self._lease_task: asyncio.Task[None] | None = None
        self._stopped_dispatchers: set[asyncio.Task[None]] = set()
        #: retention and message TTL rounds (docs/lifecycle.md)
        self.maintenance = TopicMaintenance(self)
        #: topic compaction; its EntryInspector is given by gateway/main.py
        self.compaction = CompactionService(self)
        self.non_persistent = NonPersistentTopics(self)
        #: admin operations on subscriptions' scheduled messages
        self.scheduled = ScheduledMessages(self)
        #: role permissions (off unless configured)
        self.authorization = AuthorizationService(self.storage, self.schema, self.policies, config)

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        await self.storage.load_scripts()
        await self.notifier.start()
        await self.tenants.start()
        self.policies.start()
        self.policies.on_change(self._policies_changed)
        self._lease_task = asyncio.get_running_loop().create_task(
            self._renew_leases(), name="lease renewal"
        )
        self.maintenance.start()
        self.rates.start()
        await self.fleet.heartbeat()
        log.info("gateway %s ready (key prefix %r)", self.gateway_id, self.config.key_prefix)

    async def close(self) -> None:
        """Release every local consumer and producer, then stop background work."""
        with contextlib.suppress(GatewayError):
            await self.producers.close()
        for sub in list(self._subscriptions.values()):
            for consumer in list(sub.consumers):
                with contextlib.suppress(GatewayError):
                    await consumer.close()
        await self.maintenance.stop()
        await self.rates.stop()
        await self.rates.withdraw()
        with contextlib.suppress(GatewayError):
            await self.fleet.leave()
        await self.compaction.close()
        await self.non_persistent.close()
        if self._lease_task is not None:
            self._lease_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lease_task
        if self._refresh is not None:
            self._refresh.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresh
        if self._stopped_dispatchers:
            await asyncio.wait(self._stopped_dispatchers, timeout=2 * POLL_INTERVAL)
        await self.storage.close()
        await self.notifier.close()

    # -- topics and producers ------------------------------------------------------------

    def topic(self, name: TopicName | str) -> Topic:
        """This gateway's handle on a topic (validating the name)."""
        topic_name = name if isinstance(name, TopicName) else parse_topic_name(name)
        key = str(topic_name)
        topic = self._topics.get(key)
        if topic is None:
            topic = self._topics[key] = Topic(
                topic_name, self.schema, self.storage, self.tenants.register_namespace
            )
        return topic

    async def partitioned_metadata(self, name: TopicName | str) -> int:
        """Number of partitions of a topic; 0 for a non-partitioned one or a partition."""
        topic = self.topic(name)  # validates the name
        return await self.partitioned_topics.partitions(topic.name)

    async def create_producer(
        self,
        name: TopicName | str,
        producer_name: str | None,
        *,
        access_mode: ProducerAccessMode = ProducerAccessMode.SHARED,
        epoch: int = 0,
        user_provided_name: bool = True,
        topic_epoch: int | None = None,
        schema: SchemaData | None = None,
    ) -> Producer:
        """Attach a producer to a topic, registering it (and its schema) with the fleet.

        The returned producer may still be waiting for exclusive access
        (``producer.waiting``, WaitForExclusive); ``producer.ready`` resolves when it has it.

        Raises:
            InvalidTopicName: bad topic name.
            ProducerBusy: the name is in use, or a Shared producer meets an exclusive one.
            ProducerFenced: exclusive access refused or the topic epoch moved on.
            IncompatibleSchema: the schema cannot be registered on the topic.
            ProducerBlockedQuotaExceeded: the backlog is over a ``producer_exception`` quota.
            StorageError: Redis failed.
        """
        topic = self.topic(name)
        await topic.register()
        version = await self.schemas.register(topic.name, schema) if schema else None
        if not producer_name:
            producer_name = Producer.generate_name(self.config.cluster_name, self.gateway_id)
            user_provided_name = False
        if not topic.name.persistent:
            return await self._new_producer(topic, producer_name)
        await backlog_quota.check_producer(self.policies, self.storage, topic.name, topic.keys)
        producer = await self._new_producer(
            topic,
            producer_name,
            access_mode=access_mode,
            epoch=epoch,
            user_provided_name=user_provided_name,
        )
        producer.topic_epoch = topic_epoch
        producer.schema_version = version
        await self.producers.add(producer)
        return producer

    async def _new_producer(self, topic: Topic, producer_name: str, **options: Any) -> Producer:
        """A producer on ``topic`` with its topic's meter and policies, not yet registered
        with the fleet (``options``: Producer's access mode, epoch, user_provided_name)."""
        producer: Producer
        if not topic.name.persistent:
            producer = self.non_persistent.producer(topic, producer_name)
        else:
            producer = Producer(
                topic,
                producer_name,
                self.storage,
                self.metrics,
                uid=f"{self.gateway_id}-p{next(self._producer_uids)}",
                **options,
            )
            producer.deduplication, producer.delayed_delivery = await self._producer_policies(
                topic.name
            )
        producer.topic_meter = self.rates.topic(topic.full_name).rate_in
        return producer

    async def publisher(self, name: TopicName | str, producer_name: str) -> Producer:
        """A producer for one-off appends that is not registered with the fleet, as
        Pulsar's REST produce publishes straight to the topic (``TopicsBase``
        ``publishSingleMessageToPartition``): no producer-name exclusivity, no lease, the
        topic's current deduplication and delayed-delivery policies.

        Raises:
            InvalidTopicName: bad topic name.
        """
        topic = self.topic(name)
        await topic.register()
        return await self._new_producer(topic, producer_name)

    async def close_producer(self, producer: Producer) -> None:
        """Release a producer (its client closed it, or the connection dropped)."""
        await self.producers.remove(producer)

    def _policies_changed(self) -> None:
        # A refresh already running may have read the old value: start over.
        if self._refresh is not None:
            self._refresh.cancel()
        self._refresh = asyncio.get_running_loop().create_task(self.refresh_producer_policies())

    async def _producer_policies(self, topic: TopicName) -> tuple[bool, DelayedDeliveryPolicy]:
        """The policies a producer applies on every SEND: deduplication, delayed delivery."""
        return (
            await deduplication.enabled(self.policies, topic),
            await delayed_delivery.effective(self.policies, topic, self.delayed_delivery),
        )

    async def refresh_producer_policies(self) -> None:
        """Re-read the deduplication and delayed-delivery policies of every local
        producer's topic."""
        found: dict[str, tuple[bool, DelayedDeliveryPolicy]] = {}
        for producer in self.producers.producers():
            key = producer.topic.full_name
            if key not in found:
                try:
                    found[key] = await self._producer_policies(producer.topic.name)
                except GatewayError as exc:
                    log.warning("reading producer policies failed: %s", exc)
                    return
            producer.deduplication, producer.delayed_delivery = found[key]

    # -- subscriptions -------------------------------------------------------------------

    async def subscribe(
        self,
        name: TopicName | str,
        subscription: str,
        sub_type: SubscriptionType,
        consumer_name: str,
        sink: ConsumerSink,
        *,
        initial_position: InitialPosition = InitialPosition.LATEST,
        durable: bool = True,
        start_message_id: MessageId | None = None,
        read_compacted: bool = False,
        priority_level: int = 0,
        key_shared: KeySharedPolicy | None = None,
    ) -> Consumer:
        """Attach a consumer to a subscription, creating topic and subscription on first use.

        Raises:
            InvalidTopicName: bad topic name.
            ConsumerBusy: the Exclusive rule or a subscription type clash.
            ConsumerAssignError: Key_Shared STICKY ranges refused.
            StorageError: Redis failed.
        """
        topic = self.topic(name)
        if read_compacted and sub_type not in (
            SubscriptionType.EXCLUSIVE,
            SubscriptionType.FAILOVER,
        ):
            # PersistentTopic.subscribe refuses it the same way
            raise NotAllowed("readCompacted only allowed on failover or exclusive subscriptions")
        await topic.register()
        if not topic.name.persistent:
            uid = f"{self.gateway_id}-{next(self._uids)}"
            return await self.non_persistent.subscribe(
                topic, subscription, sub_type, consumer_name, sink, uid
            )
        key = (topic.full_name, subscription)
        sub = self._subscriptions.get(key)
        if sub is None:
            sub = Subscription(self, topic, subscription, sub_type, durable)
            self._subscriptions[key] = sub
            channel = topic.keys.notify_channel
            subs = self._channel_subs.setdefault(channel, set())
            if not subs:
                self.notifier.subscribe(channel, lambda: self._wake_channel(channel))
            subs.add(sub)
        sub.read_compacted = read_compacted
        uid = f"{self.gateway_id}-{next(self._uids)}"
        position = start_position(initial_position, None if durable else start_message_id)
        try:
            return await sub.attach(
                uid,
                consumer_name,
                sink,
                position,
                priority_level=priority_level,
                key_shared=key_shared,
            )
        except BaseException:
            if not sub.consumers:
                self.drop_subscription(sub)
            raise

    def local_consumers(self) -> Iterator[Consumer]:
        """Every consumer attached through this gateway (persistent and non-persistent)."""
        for sub in self._subscriptions.values():
            yield from sub.consumers
        yield from self.non_persistent.consumers()

    def drop_subscription(self, sub: Subscription) -> None:
        """Forget a subscription with no local consumers left."""
        key = (sub.topic.full_name, sub.name)
        if self._subscriptions.get(key) is sub:
            del self._subscriptions[key]
        task = sub.dispatcher.stop()
        if task is not None:
            # Awaited at shutdown, so no cancelled task outlives the event loop.
            self._stopped_dispatchers.add(task)
            task.add_done_callback(self._stopped_dispatchers.discard)
        channel = sub.topic.keys.notify_channel
        subs = self._channel_subs.get(channel)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._channel_subs[channel]
                self.notifier.unsubscribe(channel)

    def _wake_channel(self, channel: str) -> None:
        for sub in self._channel_subs.get(channel, ()):
            sub.dispatcher.wake()

    # -- leases --------------------------------------------------------------------------

    async def _renew_leases(self) -> None:
        """Tell the fleet this gateway's consumers are alive, every third of a lease."""
        interval = self.config.consumer_lease_seconds / 3
        while True:
            await asyncio.sleep(interval)
            try:
                await self.renew_leases()
            except (GatewayError, RedisError) as exc:
                log.warning("lease renewal failed: %s", exc)
            try:
                await self.fleet.heartbeat()
            except GatewayError as exc:
                log.warning("fleet heartbeat failed: %s", exc)
            try:
                await self.producers.renew()
                await self.refresh_producer_policies()
            except (GatewayError, RedisError) as exc:
                log.warning("producer lease renewal failed: %s", exc)

    async def renew_leases(self) -> None:
        subs = [s for s in self._subscriptions.values() if s.consumers]
        calls = [
            self.storage.eval(
                "renew_leases",
                [sub.consumers_key],
                [sub.lease_ms, *(c.uid for c in sub.consumers)],
            )
            for sub in subs
        ]
        for sub, lost in zip(subs, await asyncio.gather(*calls), strict=True):
            for uid in lost:
                uid = uid.decode() if isinstance(uid, bytes) else uid
                for consumer in list(sub.consumers):
                    if consumer.uid == uid:
                        log.warning("consumer %s lost its lease; closing it", uid)
                        consumer.lost()
