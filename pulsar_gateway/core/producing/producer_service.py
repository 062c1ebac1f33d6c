"""The producer service: producers attach to topics here (Pulsar PRODUCER).

A producer gets its topic's deduplication, delayed-delivery and ``maxMessageSize`` policies
when it is created and keeps them current: when any policy changes in the fleet (the
policies channel), and at every lease renewal, the policies of every local producer's topic
are read again. Its
registration with the fleet is kept by :class:`~.producer_registry.ProducerRegistry`, whose
leases are renewed every third of a lease. Non-persistent topics get a
:class:`~.non_persistent.NonPersistentProducer`, which nothing registers.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass

from pulsar_gateway.core.errors import (
    EncryptionRequired,
    GatewayError,
    ProducerBusy,
    TopicTerminated,
)
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.rates import TopicMeters
from pulsar_gateway.core.model.access_mode import ProducerAccessMode
from pulsar_gateway.core.model.schema import SchemaData
from pulsar_gateway.core.model.topic_name import TopicName
from pulsar_gateway.core.periodic import Periodic
from pulsar_gateway.core.policies import backlog_quota, deduplication, delayed_delivery
from pulsar_gateway.core.policies.delayed_delivery import DelayedDeliveryPolicy
from pulsar_gateway.core.policies.policies import (
    ENCRYPTION_REQUIRED_POLICY,
    MAX_MESSAGE_SIZE_POLICY,
    MAX_PRODUCERS_POLICY,
    Policies,
)
from pulsar_gateway.core.policies.rate_limits import PublishRateLimiter, RateLimits
from pulsar_gateway.core.producing.non_persistent import NonPersistentIds, NonPersistentProducer
from pulsar_gateway.core.producing.producer import (
    Producer,
    ProducerHandle,
    generate_producer_name,
)
from pulsar_gateway.core.producing.producer_registry import ProducerRegistry
from pulsar_gateway.core.producing.publish_buffer import PublishBuffer
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import topics
from pulsar_gateway.core.topics.schema_registry import SchemaRegistry
from pulsar_gateway.core.topics.topic import Topic, Topics

__all__ = ["ProducerService"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _SendPolicies:
    """A topic's policies that its producers apply on every SEND: deduplication, delayed
    delivery and the topic's ``maxMessageSize`` (0: none)."""

    deduplication: bool
    delayed_delivery: DelayedDeliveryPolicy
    max_message_size: int

    def apply(self, producer: Producer) -> None:
        producer.deduplication = self.deduplication
        producer.delayed_delivery = self.delayed_delivery
        producer.max_message_size = self.max_message_size


class ProducerService:
    """Creates, keeps and releases this gateway's producers.

    Args:
        lane: storage.
        topics: opens topic handles.
        registry: the fleet-wide producer registry (this gateway's side).
        schemas: the schema registry (a producer's schema is registered on its topic).
        policies: namespace and topic policies.
        default_delayed_delivery: the delayed-delivery policy of topics without one (the
            gateway's flags).
        metrics: the gateway's counters; ``meters``: a topic's meters on this gateway.
        cluster_name, gateway_id: make generated producer names and uids fleet-unique.
        publish_buffer: the gateway's publish buffer, which every producer counts in.
        rate_limits: the gateway's rate limiters: each producer gets its topic's publish
            rate (None: no rates).
    """

    def __init__(
        self,
        *,
        lane: Lane,
        topics: Topics,
        registry: ProducerRegistry,
        schemas: SchemaRegistry,
        policies: Policies,
        default_delayed_delivery: DelayedDeliveryPolicy,
        metrics: GatewayMetrics,
        meters: Callable[[str], TopicMeters],
        cluster_name: str,
        gateway_id: str,
        publish_buffer: PublishBuffer | None = None,
        rate_limits: RateLimits | None = None,
    ) -> None:
        self._lane = lane
        self._rate_limits = rate_limits
        self.publish_buffer = publish_buffer or PublishBuffer(0)
        self._topics = topics
        self._registry = registry
        self._schemas = schemas
        self._policies = policies
        self._default_delayed = default_delayed_delivery
        self._metrics = metrics
        self._meters = meters
        self._cluster_name = cluster_name
        self._gateway_id = gateway_id
        self._uids = itertools.count()
        self._np_ids = NonPersistentIds(gateway_id)
        self._refresh: asyncio.Task[None] | None = None
        self._renewal = Periodic(
            "producer lease renewal", registry.lease_ms / 3000, self.renew_leases
        )

    def start(self) -> None:
        self._policies.on_change(self._policies_changed)
        self._renewal.start()

    def producers(self) -> list[Producer]:
        """Every producer registered through this gateway (not the queued ones)."""
        return self._registry.producers()

    async def create(
        self,
        name: TopicName | str,
        producer_name: str | None,
        *,
        access_mode: ProducerAccessMode = ProducerAccessMode.SHARED,
        epoch: int = 0,
        user_provided_name: bool = True,
        topic_epoch: int | None = None,
        schema: SchemaData | None = None,
        encrypted: bool = False,
    ) -> ProducerHandle:
        """Attach a producer to a topic, registering it (and its schema) with the fleet.

        The returned producer may still be waiting for exclusive access
        (``producer.waiting``, WaitForExclusive); ``producer.ready`` resolves when it has it.

        Raises:
            InvalidTopicName: bad topic name.
            ProducerBusy: the name is in use, or a Shared producer meets an exclusive one.
            ProducerFenced: exclusive access refused or the topic epoch moved on.
            IncompatibleSchema: the schema cannot be registered on the topic.
            ProducerBlockedQuotaExceeded: the backlog is over a ``producer_request_hold``
                (ProducerBlockedQuotaExceededError) or ``producer_exception``
                (ProducerBlockedQuotaExceededException) quota.
            TopicTerminated: the topic was terminated.
            ProducerBusy: the topic's ``maxProducersPerTopic`` is reached.
            EncryptionRequired: the namespace's ``encryptionRequired`` is on and the
                producer does not encrypt (``encrypted``: ``CommandProducer.encrypted``).
            StorageError: Redis failed.
        """
        topic = self._topics.get(name)
        publish_rate = await self._publish_rate(topic)
        await topic.register()
        if topic.name.persistent:
            counts = await topics.topic_counts(
                self._lane, topic.keys, producer_name=producer_name or ""
            )
            if counts.terminated:
                # PersistentTopic.addProducer: TopicTerminatedException
                raise TopicTerminated("Topic was already terminated")
            await self._check_max_producers(topic, counts)
            # before the schema, as ServerCnx.handleProducer checks the quotas first
            await backlog_quota.check_producer(self._policies, self._lane, topic.name, topic.keys)
        if not encrypted:
            await self._check_encryption(topic)
        version = await self._schemas.register_producer(topic.name, schema)
        if not producer_name:
            producer_name = generate_producer_name(self._cluster_name, self._gateway_id)
            user_provided_name = False
        if not topic.name.persistent:
            return self._non_persistent(topic, producer_name, publish_rate)
        producer = await self._new_producer(
            topic,
            producer_name,
            access_mode=access_mode,
            epoch=epoch,
            user_provided_name=user_provided_name,
        )
        producer.topic_epoch = topic_epoch
        producer.schema_version = version
        producer.encrypted = encrypted
        producer.publish_rate = publish_rate
        await self._registry.add(producer)
        return producer

    def _non_persistent(
        self, topic: Topic, producer_name: str, publish_rate: PublishRateLimiter
    ) -> NonPersistentProducer:
        producer = NonPersistentProducer(
            topic,
            producer_name,
            self._lane,
            self._metrics,
            self._np_ids,
            topic_meter=self._meters(topic.full_name).rate_in,
        )
        producer.publish_rate = publish_rate
        return producer

    async def _publish_rate(self, topic: Topic) -> PublishRateLimiter:
        """The ``publishRate`` limiter of the topic (partition) on this gateway, shared by
        its producers here (an unlimited one without rate limits)."""
        if self._rate_limits is None:
            return PublishRateLimiter()
        return await self._rate_limits.publish(topic.name)

    async def _new_producer(
        self,
        topic: Topic,
        producer_name: str,
        *,
        access_mode: ProducerAccessMode = ProducerAccessMode.SHARED,
        epoch: int = 0,
        user_provided_name: bool = True,
    ) -> Producer:
        """A producer on ``topic`` with its topic's meter and policies, not yet registered
        with the fleet."""
        producer = Producer(
            topic,
            producer_name,
            self._lane,
            self._metrics,
            topic_meter=self._meters(topic.full_name).rate_in,
            uid=f"{self._gateway_id}-p{next(self._uids)}",
            access_mode=access_mode,
            epoch=epoch,
            user_provided_name=user_provided_name,
            publish_buffer=self.publish_buffer,
        )
        (await self._topic_policies(topic.name)).apply(producer)
        return producer

    async def _check_max_producers(self, topic: Topic, counts: topics.TopicCounts) -> None:
        """``maxProducersPerTopic`` (topic level, else its namespace's): Pulsar's
        ``AbstractTopic.isProducersExceeded``. Counted just before the producer registers, so
        two producers racing on two gateways may both pass the limit by one."""
        if self._policies is None:
            return
        limit = await self._policies.effective(topic.name, MAX_PRODUCERS_POLICY)
        if limit and counts.producers >= limit:
            raise ProducerBusy(f"Topic '{topic.full_name}' reached max producers limit")

    async def _check_encryption(self, topic: Topic) -> None:
        """``encryptionRequired`` (namespace level): a producer that does not encrypt is
        refused, as ``ServerCnx.handleProducer`` refuses it after the backlog quotas."""
        if await self._policies.get_namespace(topic.name.namespace, ENCRYPTION_REQUIRED_POLICY):
            raise EncryptionRequired(f"Encryption is required in {topic.full_name}")

    async def publisher(self, name: TopicName | str, producer_name: str) -> ProducerHandle:
        """A producer for one-off appends that is not registered with the fleet, as
        Pulsar's REST produce publishes straight to the topic (``TopicsBase``
        ``publishSingleMessageToPartition``): no producer-name exclusivity, no lease, the
        topic's current deduplication and delayed-delivery policies.

        Raises:
            InvalidTopicName: bad topic name.
            ProducerBlockedQuotaExceeded: the backlog is over a quota that blocks producers.
            TopicTerminated: the topic was terminated.
            EncryptionRequired: the namespace requires encryption.
        """
        topic = self._topics.get(name)
        publish_rate = await self._publish_rate(topic)
        await topic.register()
        if not topic.name.persistent:
            return self._non_persistent(topic, producer_name, publish_rate)
        if (await topics.topic_counts(self._lane, topic.keys)).terminated:
            raise TopicTerminated("Topic was already terminated")
        # Pulsar's REST produce checks no quota (a TODO in TopicsBase) and no encryption
        # requirement; here it is refused as a producer would be, so every way in keeps to
        # the namespace's policies (it cannot encrypt: the gateway holds no keys).
        await backlog_quota.check_producer(self._policies, self._lane, topic.name, topic.keys)
        await self._check_encryption(topic)
        producer = await self._new_producer(topic, producer_name)
        producer.publish_rate = publish_rate
        return producer

    async def close(self, producer: ProducerHandle) -> None:
        """Release a producer (its client closed it, or the connection dropped)."""
        if isinstance(producer, Producer):
            await self._registry.remove(producer)

    async def disconnect(self, topic: str) -> int:
        """Close this gateway's producers on ``topic`` from the gateway's side (Pulsar's
        ``Producer.disconnect``, as the backlog quota monitor does): each one's adapter is
        told (``on_lost``: CLOSE_PRODUCER on the binary protocol) and its registration
        released, so the client reconnects and its new PRODUCER meets the topic's rules.
        Returns how many were closed."""
        return await self._disconnect(lambda producer: producer.topic_name == topic)

    async def unload(self, matches: Callable[[str], bool]) -> int:
        """As :meth:`disconnect`, for the producers on the topics ``matches`` accepts whose
        clients reconnect by themselves (an admin unload)."""
        return await self._disconnect(
            lambda producer: producer.client.reconnects and matches(producer.topic_name)
        )

    async def disconnect_all(self, matches: Callable[[str], bool]) -> int:
        """As :meth:`disconnect`, for every producer on the topics ``matches`` accepts,
        whatever its front end (a terminated topic takes no producer)."""
        return await self._disconnect(lambda producer: matches(producer.topic_name))

    async def _disconnect(self, chosen: Callable[[Producer], bool]) -> int:
        closed = 0
        for producer in self._registry.producers():
            if producer.closed or not chosen(producer):
                continue
            log.info("Producer [%s] on [%s]: disconnecting it", producer.name, producer.topic_name)
            producer.lost()
            await self._registry.remove(producer)
            closed += 1
        return closed

    # -- policies and leases -------------------------------------------------------------

    async def _topic_policies(self, topic: TopicName) -> _SendPolicies:
        """The policies a producer applies on every SEND."""
        max_size = await self._policies.get_topic(topic, MAX_MESSAGE_SIZE_POLICY)
        return _SendPolicies(
            await deduplication.enabled(self._policies, topic),
            await delayed_delivery.effective(self._policies, topic, self._default_delayed),
            max_size if isinstance(max_size, int) and max_size > 0 else 0,
        )

    def _policies_changed(self) -> None:
        # A refresh already running may have read the old value: start over.
        if self._refresh is not None:
            self._refresh.cancel()
        self._refresh = asyncio.get_running_loop().create_task(self.refresh_policies())

    async def refresh_policies(self) -> None:
        """Re-read the deduplication and delayed-delivery policies of every local
        producer's topic."""
        found: dict[str, _SendPolicies] = {}
        for producer in self._registry.producers():
            key = producer.topic.full_name
            if key not in found:
                try:
                    found[key] = await self._topic_policies(producer.topic.name)
                except GatewayError as exc:
                    log.warning("reading producer policies failed: %s", exc)
                    return
            found[key].apply(producer)

    async def renew_leases(self) -> None:
        """Renew the fleet registrations of local producers, then re-read their policies
        (a lost policy notification is covered here)."""
        await self._registry.renew()
        await self.refresh_policies()

    async def close_all(self) -> None:
        """Release every local producer and stop background work (gateway shutdown)."""
        await self._renewal.stop()
        if self._refresh is not None:
            self._refresh.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresh
        with contextlib.suppress(GatewayError):
            await self._registry.close()
