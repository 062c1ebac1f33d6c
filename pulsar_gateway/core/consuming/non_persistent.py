"""Non-persistent subscriptions (``non-persistent://tenant/ns/topic``): live delivery, nothing
stored.

Strategy: a non-persistent topic is a Redis Pub/Sub channel (``P:{T}:np``; producers in
:mod:`pulsar_gateway.core.producing.non_persistent`). Every gateway with consumers on the
topic listens to the channel and hands each message to its local consumers that should get
it, if they have permits; a message that finds no permits, or a consumer whose connection
is not writable, is dropped and counted (Pulsar's ``msgDropRate``).

Who gets a message, fleet-wide. Each subscription has a registry of live consumers in Redis
(``P:{T}:np-consumers:<sub>``, members ``<type>|<consumer name>|<uid>`` scored by lease
expiry; the subscription is listed in the topic's ``subs`` hash while it has consumers, so
an admin delete finds it), which enforces the Exclusive rule and the one-type rule on subscribe
(``np_subscribe.lua``). Every gateway re-reads the registry every second while renewing its
own leases (``np_refresh.lua``) and, from that list, every gateway computes the same target:

* Exclusive: the one consumer;
* Failover: the active consumer, the first by (consumer name, uid), or for partition ``i``
  of a partitioned topic the ``i mod n``-th, as Pulsar spreads partitions;
* Shared: one consumer per message, chosen by a hash of the message id over the sorted
  list, so each message goes to exactly one consumer of the fleet while the gateways agree
  on the list. While a consumer joins or leaves, gateways may disagree for up to a refresh
  period: a message may then go to two consumers or to none (non-persistent delivery is
  at-most-once per consumer, never guaranteed).

Key_Shared is refused on non-persistent topics (NotAllowed). Acks, negative acks and
redelivery requests are accepted and ignored (there is nothing to redeliver).
GET_LAST_MESSAGE_ID answers "empty" (entry -1), so ``has_message_available`` is False.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client import Counter as MetricCounter

from pulsar_gateway.core.consuming.consumer import ConsumerSink, LastMessageId, count_out
from pulsar_gateway.core.errors import GatewayError, NotAllowed
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.rates import ClientInfo, Meter, TopicMeters
from pulsar_gateway.core.futures import resolved
from pulsar_gateway.core.model.entry import Delivery
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.periodic import Periodic
from pulsar_gateway.core.producing.non_persistent import CHANNEL_HEADER
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.notifier import Notifier
from pulsar_gateway.core.storage.scripts import non_persistent as scripts
from pulsar_gateway.core.topics.topic import Topic

__all__ = ["NonPersistentConsumer", "NonPersistentSubscriptions"]

log = logging.getLogger(__name__)

#: How often a gateway renews its consumers and re-reads every subscription's registry.
REFRESH_SECONDS = 1.0


@dataclass(eq=False)
class _Subscription:
    """This gateway's view of one non-persistent subscription."""

    topic: Topic
    name: str
    type: SubscriptionType
    meter: Meter
    consumers: list[NonPersistentConsumer] = field(default_factory=list)
    #: Every live member of the fleet, sorted (the registry as last read).
    members: list[str] = field(default_factory=list)


def _member(sub_type: SubscriptionType, name: str, uid: str) -> str:
    return f"{int(sub_type)}|{name}|{uid}"


def _member_key(member: str) -> tuple[str, str]:
    """(consumer name, uid) of a registry member; uids never contain ``|``."""
    rest, _, uid = member[2:].rpartition("|")
    return rest, uid


class NonPersistentConsumer:
    """A :class:`~pulsar_gateway.core.consuming.consumer.ConsumerHandle` of a non-persistent
    subscription: it holds only permits, nothing is stored."""

    def __init__(
        self,
        manager: NonPersistentSubscriptions,
        sub: _Subscription,
        uid: str,
        name: str,
        sink: ConsumerSink,
    ) -> None:
        self._manager = manager
        self.np_subscription = sub
        self.uid = uid
        self.name = name
        self.sink = sink
        self.permits = 0
        self.closed = False
        self.writable = True
        # non-persistent subscriptions have nothing unacked (stats)
        self.blocked_on_unacked = False
        self.subscription_blocked_on_unacked = False
        self.active: bool | None = None
        self.subscription_type = sub.type
        self.subscription_name = sub.name
        self.topic_name = sub.topic.full_name
        self.partition = sub.topic.partition
        self.reports_redelivery_count = False
        self.member = _member(sub.type, name, uid)
        self.meter = Meter()
        self.subscription_meter = sub.meter
        self.client = ClientInfo()

    def flow(self, permits: int) -> None:
        self.permits += permits

    def set_writable(self, writable: bool) -> None:
        self.writable = writable

    def ack(self, stream_ids: Sequence[bytes]) -> asyncio.Future[int]:
        return resolved(0)

    def ack_cumulative(self, upto: bytes) -> asyncio.Future[int]:
        return resolved(0)

    def ack_batch_indexes(self, acks: Sequence[tuple[bytes, Sequence[int]]]) -> asyncio.Future[int]:
        return resolved(0)

    def redeliver(self, stream_ids: Sequence[bytes] | None) -> asyncio.Future[int]:
        return resolved(0)

    async def seek(self, group_position: bytes) -> None:
        # Nothing is stored to seek in (Pulsar NonPersistentSubscription.resetCursor).
        raise NotAllowed("Seek is not supported on non-persistent topics")

    async def last_message_id(self) -> LastMessageId:
        # Nothing is stored: the topic always reads as empty (entry -1, which the C++ client
        # reads as "no messages": docs/binary_protocol.md "Consuming, acknowledging, seeking").
        return LastMessageId(last=None, last_num_messages=1, last_is_batch=False, mark_delete=None)

    async def close(self) -> None:
        await self._manager.detach(self)

    async def unsubscribe(self) -> None:
        await self._manager.detach(self)

    def deliver(self, delivery: Delivery) -> None:
        self.permits -= delivery.num_messages
        count_out(
            self._manager.metrics,
            self.meter,
            self.subscription_meter,
            delivery.num_messages,
            len(delivery.blob),
        )
        self.sink.deliver(self, [delivery])

    async def unload(self) -> None:
        """Close from the gateway's side (admin unload) and tell the client."""
        if not self.closed:
            await self.close()
            self.sink.closed_by_gateway(self)

    def lost(self) -> None:
        if not self.closed:
            self.closed = True
            self._manager.forget(self)
            self.sink.closed_by_gateway(self)


class NonPersistentSubscriptions:
    """Every non-persistent consumer of one gateway.

    Args:
        lane, notifier: storage; the notifier carries the topics' channels.
        metrics: the gateway's counters and registry (``msgDropRate`` is counted there).
        meters: the meters of a topic on this gateway (by full name).
        lease_ms: how long a consumer's lease lasts without renewal.
    """

    def __init__(
        self,
        lane: Lane,
        notifier: Notifier,
        metrics: GatewayMetrics,
        meters: Callable[[str], TopicMeters],
        lease_ms: int,
    ) -> None:
        self.metrics = metrics
        self._lane = lane
        self._notifier = notifier
        self._meters = meters
        self._lease_ms = lease_ms
        self._subs: dict[tuple[str, str], _Subscription] = {}
        self._by_channel: dict[str, list[_Subscription]] = {}
        #: subscribes in progress, by channel (the channel stays listened to meanwhile)
        self._joining: Counter[str] = Counter()
        self._refresh = Periodic("non-persistent registry refresh", REFRESH_SECONDS, self.refresh)
        self.dropped = MetricCounter(
            "pulsar_gateway_non_persistent_msg_dropped",
            "Non-persistent messages dropped for lack of permits or of a writable connection "
            "(Pulsar msgDropRate)",
            ["topic", "subscription"],
            registry=metrics.registry,
        )

    def members(self, subscription: str) -> list[list[str]]:
        """The fleet's live consumers of every local subscription named ``subscription``, as
        this gateway last read its registry (one list per topic)."""
        return [list(sub.members) for (_, name), sub in self._subs.items() if name == subscription]

    def consumers(self) -> Iterator[NonPersistentConsumer]:
        """Every non-persistent consumer attached through this gateway."""
        for sub in self._subs.values():
            yield from sub.consumers

    async def subscribe(
        self,
        topic: Topic,
        subscription: str,
        sub_type: SubscriptionType,
        consumer_name: str,
        sink: ConsumerSink,
        uid: str,
    ) -> NonPersistentConsumer:
        """Attach a consumer to a non-persistent subscription.

        Raises:
            ConsumerBusy: the Exclusive rule or a subscription type clash (fleet-wide).
            NotAllowed: Key_Shared (not supported on non-persistent topics here).
        """
        if sub_type is SubscriptionType.KEY_SHARED:
            raise NotAllowed("Key_Shared subscriptions are not supported on non-persistent topics")
        key = (topic.full_name, subscription)
        sub = self._subs.get(key)
        if sub is None:
            meter = self._meters(topic.full_name).out(subscription)
            sub = _Subscription(topic, subscription, sub_type, meter)
        consumer = NonPersistentConsumer(self, sub, uid, consumer_name, sink)
        # Listen before registering: once the registry lists the consumer (the admin API
        # shows it, other gateways route to it), messages published can reach it.
        channel = topic.keys.non_persistent_channel
        self._joining[channel] += 1
        try:
            await self._notifier.listen(channel, lambda data: self.on_message(channel, data))
            await scripts.np_subscribe(
                self._lane,
                topic.keys,
                subscription=subscription,
                member=consumer.member,
                subscription_type=sub_type,
                lease_ms=self._lease_ms,
            )
        except BaseException:
            if channel not in self._by_channel and self._joining[channel] == 1:
                self._notifier.unlisten(channel)
            raise
        finally:
            self._joining[channel] -= 1
            if not self._joining[channel]:
                del self._joining[channel]
        if key not in self._subs:
            self._subs[key] = sub
            self._by_channel.setdefault(channel, []).append(sub)
        sub.consumers.append(consumer)
        if consumer.member not in sub.members:
            sub.members = sorted([*sub.members, consumer.member])
        self._refresh.start()
        return consumer

    async def detach(self, consumer: NonPersistentConsumer) -> None:
        if consumer.closed:
            return
        consumer.closed = True
        self.forget(consumer)
        sub = consumer.np_subscription
        await scripts.np_release(
            self._lane, sub.topic.keys, subscription=sub.name, member=consumer.member
        )

    def forget(self, consumer: NonPersistentConsumer) -> None:
        sub = consumer.np_subscription
        if consumer in sub.consumers:
            sub.consumers.remove(consumer)
        if consumer.member in sub.members:
            sub.members = [m for m in sub.members if m != consumer.member]
        if not sub.consumers:
            self._subs.pop((sub.topic.full_name, sub.name), None)
            channel = sub.topic.keys.non_persistent_channel
            subs = self._by_channel.get(channel, [])
            if sub in subs:
                subs.remove(sub)
            if not subs and not self._joining[channel]:
                self._by_channel.pop(channel, None)
                self._notifier.unlisten(channel)

    # -- delivery ------------------------------------------------------------------------

    def _target(self, sub: _Subscription, ledger: int, entry: int) -> NonPersistentConsumer | None:
        """The consumer of ``sub`` that gets this message, if it is attached here."""
        if sub.type is SubscriptionType.EXCLUSIVE:
            return sub.consumers[0] if sub.consumers else None
        members = sub.members or [c.member for c in sub.consumers]
        if not members:
            return None
        if sub.type is SubscriptionType.FAILOVER:
            ordered = sorted(members, key=_member_key)
            partition = sub.topic.partition
            chosen = ordered[partition % len(ordered) if partition >= 0 else 0]
        else:
            chosen = members[zlib.crc32(b"%d-%d" % (ledger, entry)) % len(members)]
        for consumer in sub.consumers:
            if consumer.member == chosen:
                return consumer
        return None

    def on_message(self, channel: str, payload: bytes) -> None:
        """A message published on ``channel`` by any gateway."""
        subs = self._by_channel.get(channel)
        if not subs or len(payload) < CHANNEL_HEADER.size:
            return
        ledger, entry, num_messages = CHANNEL_HEADER.unpack_from(payload)
        blob = payload[CHANNEL_HEADER.size :]
        for sub in subs:
            consumer = self._target(sub, ledger, entry)
            if consumer is None:
                continue
            if consumer.permits <= 0 or not consumer.writable:
                # Pulsar's non-persistent dispatchers drop what a consumer has no permits
                # for, or cannot take because its connection is not writable.
                self.dropped.labels(sub.topic.full_name, sub.name).inc(num_messages)
                continue
            consumer.deliver(Delivery(b"%d-%d" % (ledger, entry), blob, num_messages, 0))

    # -- leases --------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Renew local leases and re-read every local subscription's consumer list."""
        subs = list(self._subs.values())
        calls = [
            scripts.np_refresh(
                self._lane,
                sub.topic.keys,
                subscription=sub.name,
                lease_ms=self._lease_ms,
                members=[c.member for c in sub.consumers],
            )
            for sub in subs
        ]
        for sub, view in zip(subs, await asyncio.gather(*calls), strict=True):
            sub.members = view.live
            for member in view.lost:
                for consumer in list(sub.consumers):
                    if consumer.member == member:
                        log.warning("non-persistent consumer %s lost its lease", consumer.uid)
                        consumer.lost()

    async def close(self) -> None:
        """Release every local consumer and stop background work."""
        for sub in list(self._subs.values()):
            for consumer in list(sub.consumers):
                with contextlib.suppress(GatewayError):
                    await consumer.close()
        await self._refresh.stop()
