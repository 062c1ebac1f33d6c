"""The subscription service: consumers join topics here (Pulsar SUBSCRIBE).

It keeps this gateway's view of the subscriptions it has consumers on (one
:class:`~.subscription.Subscription` and dispatcher each), wakes their dispatchers when the
topic's channel says there is new work, and renews their consumers' leases every third of a
lease, so the fleet knows they are alive (docs/architecture.md "Design decisions", liveness is
leased). Non-persistent topics are handed to :class:`~.non_persistent.NonPersistentSubscriptions`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Iterator

from pulsar_gateway.core.consuming.consumer import Consumer, ConsumerHandle, ConsumerSink
from pulsar_gateway.core.consuming.dispatcher import POLL_INTERVAL
from pulsar_gateway.core.consuming.non_persistent import (
    NonPersistentConsumer,
    NonPersistentSubscriptions,
)
from pulsar_gateway.core.consuming.subscription import Subscription
from pulsar_gateway.core.errors import (
    ConsumerBusy,
    GatewayError,
    NotAllowed,
    SubscriptionNotFound,
)
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.rates import ClientInfo, TopicMeters
from pulsar_gateway.core.model.key_shared import KeySharedPolicy
from pulsar_gateway.core.model.message_id import MessageId, start_position
from pulsar_gateway.core.model.subscription_type import InitialPosition, SubscriptionType
from pulsar_gateway.core.model.topic_name import TopicName
from pulsar_gateway.core.periodic import Periodic
from pulsar_gateway.core.policies import unacked_limits
from pulsar_gateway.core.policies.policies import (
    AUTO_SUBSCRIPTION_CREATION_POLICY,
    MAX_CONSUMERS_PER_SUBSCRIPTION_POLICY,
    MAX_CONSUMERS_PER_TOPIC_POLICY,
    MAX_SUBSCRIPTIONS_POLICY,
    SUBSCRIPTION_TYPES_POLICY,
    Policies,
)
from pulsar_gateway.core.policies.rate_limits import ConsumerIdentifier, RateLimits
from pulsar_gateway.core.policies.unacked_limits import UnackedLimits
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.notifier import Notifier
from pulsar_gateway.core.storage.scripts import subscriptions, topics
from pulsar_gateway.core.topics.topic import Topic, Topics

__all__ = ["SubscriptionService"]

log = logging.getLogger(__name__)


class SubscriptionService:
    """Attaches consumers to subscriptions and keeps them alive.

    Args:
        lane, notifier: storage.
        topics: opens topic handles.
        non_persistent: the non-persistent side.
        gateway_id: prefixes consumer uids, so they are unique in the fleet.
        lease_ms: a consumer's lease.
        metrics: the gateway's counters; ``meters``: a topic's meters on this gateway.
        policies: namespace and topic policies (the unacked limits).
        default_unacked_limits: the unacked limits of topics without a policy.
        rate_limits: the gateway's rate limiters (subscribe and dispatch rates; None: none).
    """

    def __init__(
        self,
        *,
        lane: Lane,
        notifier: Notifier,
        topics: Topics,
        non_persistent: NonPersistentSubscriptions,
        gateway_id: str,
        lease_ms: int,
        metrics: GatewayMetrics,
        meters: Callable[[str], TopicMeters],
        policies: Policies | None = None,
        default_unacked_limits: UnackedLimits | None = None,
        rate_limits: RateLimits | None = None,
    ) -> None:
        self._lane = lane
        self._rate_limits = rate_limits
        self._policies = policies
        self._default_limits = default_unacked_limits or UnackedLimits()
        self._refresh: asyncio.Task[None] | None = None
        self._notifier = notifier
        self._topics = topics
        self._non_persistent = non_persistent
        self._gateway_id = gateway_id
        self._lease_ms = lease_ms
        self._metrics = metrics
        self._meters = meters
        self._uids = itertools.count()
        self._subscriptions: dict[tuple[str, str], Subscription] = {}
        self._channel_subs: dict[str, set[Subscription]] = {}
        self._stopped_dispatchers: set[asyncio.Task[None]] = set()
        self._renewal = Periodic("consumer lease renewal", lease_ms / 3000, self.renew_leases)

    def start(self) -> None:
        if self._policies is not None:
            self._policies.on_change(self._policies_changed)
        self._renewal.start()

    # -- unacked limits ------------------------------------------------------------------

    async def _unacked_limits(
        self, topic: TopicName, sub_type: SubscriptionType, durable: bool
    ) -> UnackedLimits:
        """The limits of a subscription of ``topic``: the topic's, for a durable Shared or
        Key_Shared one; none for the others (Pulsar's ``Consumer.getMaxUnackedMessages``)."""
        if self._policies is None or not durable or not sub_type.individual_ack_mode:
            return UnackedLimits()
        return await unacked_limits.effective(self._policies, topic, self._default_limits)

    async def _check_policies(
        self,
        topic: Topic,
        subscription: str,
        sub_type: SubscriptionType,
        durable: bool,
        counts: topics.TopicCounts | None,
    ) -> None:
        """The subscription policies of ``topic`` (topic level, else its namespace's):
        ``subscriptionTypesEnabled`` (Pulsar's ``AbstractTopic.checkSubscriptionTypesEnable``);
        on a persistent topic, ``autoSubscriptionCreation`` for a durable subscription that
        does not exist yet (``ServerCnx.handleSubscribe``), ``maxSubscriptionsPerTopic`` and
        ``maxConsumersPerSubscription``. The counts are read just before the subscribe, so
        two subscribes racing on two gateways may both pass a limit by one."""
        if self._policies is None:
            return
        enabled = await self._policies.effective(topic.name, SUBSCRIPTION_TYPES_POLICY)
        if enabled and sub_type.pulsar_name not in enabled:
            raise NotAllowed(
                f"Topic[{topic.full_name}] doesn't support {sub_type.pulsar_name} sub type!"
            )
        if counts is None:  # a non-persistent topic
            return
        policies = self._policies
        max_subscriptions = await policies.effective(topic.name, MAX_SUBSCRIPTIONS_POLICY)
        max_consumers = await policies.effective(topic.name, MAX_CONSUMERS_PER_SUBSCRIPTION_POLICY)
        auto = await policies.effective(topic.name, AUTO_SUBSCRIPTION_CREATION_POLICY)
        no_auto = isinstance(auto, dict) and auto.get("allowAutoSubscriptionCreation") is False
        if durable and no_auto and not counts.subscription_exists:
            raise SubscriptionNotFound("Subscription does not exist")
        exists = counts.subscription_exists
        if max_subscriptions and not exists and counts.subscriptions >= max_subscriptions:
            # PersistentTopic.subscribe: isSubscriptionsExceeded
            raise NotAllowed(
                f"Exceed the maximum number of subscriptions of the topic: {topic.full_name}"
            )
        if max_consumers and counts.consumers >= max_consumers:
            # Dispatcher.isConsumersExceededOnSubscription
            raise ConsumerBusy("Subscription reached max consumers limit")

    async def _max_consumers_per_topic(self, topic: Topic) -> int:
        """``maxConsumersPerTopic`` (topic level, else its namespace's; 0: none), read before
        the counts so the consumers of every subscription are counted only when it is set."""
        if self._policies is None:
            return 0
        return int(await self._policies.effective(topic.name, MAX_CONSUMERS_PER_TOPIC_POLICY) or 0)

    def _policies_changed(self) -> None:
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.get_running_loop().create_task(self.refresh_limits())

    async def refresh_limits(self) -> None:
        """Read the unacked limits of every local subscription again (a policy changed
        somewhere in the fleet), once per topic and kind of subscription; a subscription
        whose limits changed is asked again."""
        found: dict[tuple[str, SubscriptionType, bool], UnackedLimits] = {}
        for sub in list(self._subscriptions.values()):
            key = (str(sub.topic.name.partitioned_topic_name), sub.type, sub.durable)
            limits = found.get(key)
            if limits is None:
                try:
                    limits = await self._unacked_limits(sub.topic.name, sub.type, sub.durable)
                except GatewayError as exc:
                    log.warning("reading the unacked limits of %s failed: %s", sub.name, exc)
                    continue
                found[key] = limits
            if limits != sub.unacked_limits:
                sub.unacked_limits = limits
                sub.recheck_unacked()

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
        client: ClientInfo | None = None,
        consumer_id: int = 0,
    ) -> ConsumerHandle:
        """Attach a consumer to a subscription, creating topic and subscription on first use.

        ``client`` and ``consumer_id`` (the id its connection gave the consumer) say who
        subscribes, for the topic's subscribe rate; without a client nothing is counted.

        Raises:
            InvalidTopicName: bad topic name.
            NotAllowed: read_compacted on a Shared or Key_Shared subscription; Key_Shared
                on a non-persistent topic; one subscribe too many under the subscribe rate.
            ConsumerBusy: the Exclusive rule or a subscription type clash.
            ConsumerAssignError: Key_Shared STICKY ranges refused.
            StorageError: Redis failed.
        """
        topic = self._topics.get(name)
        if read_compacted and sub_type.individual_ack_mode:
            # PersistentTopic.subscribe refuses it the same way
            raise NotAllowed("readCompacted only allowed on failover or exclusive subscriptions")
        await topic.register()
        counts = None
        if topic.name.persistent:
            max_on_topic = await self._max_consumers_per_topic(topic)
            counts = await topics.topic_counts(
                self._lane, topic.keys, subscription, topic_consumers=bool(max_on_topic)
            )
            if max_on_topic and counts.topic_consumers >= max_on_topic:
                # PersistentTopic.subscribe: isConsumersExceededOnTopic
                raise ConsumerBusy("Topic reached max consumers limit")
            topic.terminated = topic.terminated or counts.terminated
        await self._check_policies(topic, subscription, sub_type, durable, counts)
        await self._check_subscribe_rate(topic, consumer_name, client, consumer_id)
        uid = f"{self._gateway_id}-{next(self._uids)}"
        if not topic.name.persistent:
            return await self._non_persistent.subscribe(
                topic, subscription, sub_type, consumer_name, sink, uid
            )
        key = (topic.full_name, subscription)
        sub = self._subscriptions.get(key)
        limits = UnackedLimits()
        if sub is None:
            limits = await self._unacked_limits(topic.name, sub_type, durable)
            sub = self._subscriptions.get(key)  # another subscribe may have made it meanwhile
        if sub is None:
            sub = Subscription(
                topic,
                subscription,
                sub_type,
                durable,
                lane=self._lane,
                lease_ms=self._lease_ms,
                metrics=self._metrics,
                meter=self._meters(topic.full_name).out(subscription),
                on_idle=self._drop,
                rate_limits=self._rate_limits,
            )
            sub.unacked_limits = limits
            self._subscriptions[key] = sub
            channel = topic.keys.notify_channel
            subs = self._channel_subs.setdefault(channel, set())
            if not subs:
                self._notifier.subscribe(channel, lambda: self._wake_channel(channel))
            subs.add(sub)
        sub.read_compacted = read_compacted
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
                self._drop(sub)
            raise

    async def _check_subscribe_rate(
        self, topic: Topic, consumer_name: str, client: ClientInfo | None, consumer_id: int
    ) -> None:
        """``subscribeRate`` on a persistent topic (``PersistentTopic.subscribe``), per
        client host, consumer name and consumer id, on this gateway."""
        if self._rate_limits is None or client is None or not topic.name.persistent:
            return
        consumer = ConsumerIdentifier.of(client.address, consumer_name, consumer_id)
        await self._rate_limits.check_subscribe(topic.name, consumer)

    def consumers(self) -> Iterator[ConsumerHandle]:
        """Every consumer attached through this gateway (persistent and non-persistent)."""
        for sub in self._subscriptions.values():
            yield from sub.consumers
        yield from self._non_persistent.consumers()

    def _drop(self, sub: Subscription) -> None:
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
                self._notifier.unsubscribe(channel)

    def _wake_channel(self, channel: str) -> None:
        for sub in self._channel_subs.get(channel, ()):
            sub.dispatcher.wake()

    # -- leases --------------------------------------------------------------------------

    async def renew_leases(self) -> None:
        """Renew every local persistent consumer's lease; close those whose lease is
        already gone (reaped by another gateway, or detached by an admin delete, reset or
        seek). Non-persistent consumers renew on their own period."""
        subs = [s for s in self._subscriptions.values() if s.consumers]
        calls = [
            subscriptions.renew_leases(
                self._lane,
                sub.keys,
                lease_ms=self._lease_ms,
                consumers=[c.uid for c in sub.consumers],
            )
            for sub in subs
        ]
        for sub, lost in zip(subs, await asyncio.gather(*calls), strict=True):
            for uid in lost:
                for consumer in list(sub.consumers):
                    if consumer.uid == uid:
                        log.warning("consumer %s lost its lease; closing it", uid)
                        consumer.lost()
        # a missed policy notification is made up here (policy reads are cached)
        await self.refresh_limits()

    async def unload(self, matches: Callable[[str], bool]) -> int:
        """Close this gateway's consumers on the topics ``matches`` accepts whose clients
        reconnect by themselves (an admin unload); returns how many were closed."""
        local: list[Consumer | NonPersistentConsumer] = [
            c for sub in self._subscriptions.values() for c in sub.consumers
        ]
        local.extend(self._non_persistent.consumers())
        chosen = [
            c for c in local if c.client.reconnects and not c.closed and matches(c.topic_name)
        ]
        for consumer in chosen:
            log.info("Consumer [%s] on [%s]: unloading it", consumer.name, consumer.topic_name)
            await consumer.unload()
        return len(chosen)

    def topic_terminated(self, matches: Callable[[str], bool]) -> None:
        """Topics ``matches`` accepts were terminated: their consumers that have read
        everything are told so (the dispatchers look again)."""
        for sub in self._subscriptions.values():
            if matches(sub.topic.full_name):
                sub.topic.terminated = True
                sub.dispatcher.wake()

    async def detach_lost(self) -> None:
        """Close the local consumers an admin operation just detached in Redis (persistent
        and non-persistent) now, rather than at the next renewal."""
        await self.renew_leases()
        await self._non_persistent.refresh()

    async def close(self) -> None:
        """Release every local consumer (their unacked entries go back at once), then stop."""
        await self._renewal.stop()
        for sub in list(self._subscriptions.values()):
            for consumer in list(sub.consumers):
                try:
                    await consumer.close()
                except GatewayError as exc:
                    log.debug("releasing consumer %s failed: %s", consumer.uid, exc)
        await self._non_persistent.close()
        if self._stopped_dispatchers:
            await asyncio.wait(self._stopped_dispatchers, timeout=2 * POLL_INTERVAL)
