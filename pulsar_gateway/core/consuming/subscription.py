"""Subscriptions: a named cursor on a topic, shared by every gateway of the fleet.

In Redis a subscription is a consumer group on the topic's stream (docs/architecture.md "Design
decisions"): the group's last-delivered id is the read cursor, its pending-entries list the
unacked messages, and its subscription type sits in the topic's ``subs`` hash. The
:class:`Subscription` object here is only this gateway's view: the consumers attached through it
and the dispatcher that feeds them. It holds no state another gateway would need.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from pulsar_gateway.core.consuming.consumer import (
    Consumer,
    ConsumerSink,
    LastMessageId,
)
from pulsar_gateway.core.consuming.dispatcher import Dispatcher
from pulsar_gateway.core.errors import (
    ConsumerBusy,
    GatewayError,
    ServiceNotReady,
    SubscriptionNotFound,
)
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.rates import Meter
from pulsar_gateway.core.model.key_shared import KeySharedPolicy
from pulsar_gateway.core.model.message_id import MessageId
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.policies.rate_limits import DispatchThrottle, RateLimits
from pulsar_gateway.core.policies.unacked_limits import UnackedLimits
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import subscriptions
from pulsar_gateway.core.topics.topic import Topic

__all__ = ["Subscription"]

log = logging.getLogger(__name__)

#: Hand-back tasks in flight (a task needs a reference until it ends).
_hand_backs: set[asyncio.Task[None]] = set()
#: Pause between attempts to reach Redis again, seconds.
HAND_BACK_RETRY = 0.2


class Subscription:
    """This gateway's side of one subscription: local consumers and their dispatcher.

    Args:
        topic: the topic partition.
        lane: the storage lane.
        lease_ms: how long a consumer's lease lasts without renewal.
        metrics: the gateway's counters; ``meter``: this subscription's on this gateway.
        on_idle: called when the last local consumer leaves (the owner forgets it).
        rate_limits: the gateway's rate limiters: the dispatcher obeys the topic's and the
            subscription's dispatch rates (None: no rates).
    """

    def __init__(
        self,
        topic: Topic,
        name: str,
        sub_type: SubscriptionType,
        durable: bool,
        *,
        lane: Lane,
        lease_ms: int,
        metrics: GatewayMetrics,
        meter: Meter,
        on_idle: Callable[[Subscription], None],
        rate_limits: RateLimits | None = None,
    ) -> None:
        self.topic = topic
        self.topic_name = topic.full_name
        self.name = name
        self.type = sub_type
        self.durable = durable
        self.lane = lane
        self.lease_ms = lease_ms
        self.metrics = metrics
        self.meter = meter
        self.partition = topic.partition
        self.keys = topic.keys.subscription(name)
        self.consumers: list[Consumer] = []
        self._on_idle = on_idle
        #: readers/consumers with read_compacted see the compacted view (docs/lifecycle.md)
        self.read_compacted = False
        #: Shared and Key_Shared: the unacked limits (set by the subscription service from
        #: the topic's policies), and whether the subscription is over its own, as this
        #: gateway's last dispatch learnt (Pulsar ``blockedDispatcherOnUnackedMsgs``)
        self.unacked_limits = UnackedLimits()
        self.blocked_on_unacked = False
        #: the topic's and this subscription's dispatch rates on this gateway, known once
        #: the first consumer attaches (kept current by the rate limiters' registry)
        self.dispatch_rates = DispatchThrottle()
        self._rate_limits = rate_limits
        self.dispatcher = Dispatcher(self)

    def wake(self) -> None:
        """Wake this gateway's dispatcher (new permits, a redelivery)."""
        self.dispatcher.wake()

    def recheck_unacked(self) -> None:
        """Acknowledgements or redeliveries may have brought a blocked consumer, or the
        subscription, under its unacked limit: the dispatcher asks again."""
        self.dispatcher.recheck_unacked()

    def notify(self) -> None:
        """Wake every gateway's dispatchers of the topic."""
        self.topic.notify()

    def _membership_changed(self, handed_back: int) -> None:
        if handed_back or self.type in (SubscriptionType.FAILOVER, SubscriptionType.KEY_SHARED):
            # Other gateways recompute the active consumer (Failover), route waiting
            # entries (Key_Shared) or dispatch what was handed back.
            self.topic.notify()

    async def attach(
        self,
        uid: str,
        consumer_name: str,
        sink: ConsumerSink,
        start_position: bytes,
        *,
        priority_level: int = 0,
        key_shared: KeySharedPolicy | None = None,
    ) -> Consumer:
        """Register a consumer in Redis (creating the group at ``start_position`` if new).

        Raises:
            ConsumerBusy: Exclusive subscription already has a consumer, or another type.
            ConsumerAssignError: Key_Shared STICKY ranges invalid or taken.
        """
        if self._rate_limits is not None and not self.dispatch_rates.limiters:
            self.dispatch_rates = await self._rate_limits.dispatch(self.topic.name, self.name)
        reply = await subscriptions.subscribe(
            self.lane,
            self.keys,
            subscription=self.name,
            subscription_type=self.type,
            start_position=start_position,
            consumer=uid,
            consumer_name=consumer_name,
            lease_ms=self.lease_ms,
            priority_level=priority_level,
            partition=self.partition,
            key_shared=key_shared,
            durable=self.durable,
        )
        self._membership_changed(reply.handed_back)
        consumer = Consumer(self, uid, consumer_name, sink)
        self.consumers.append(consumer)
        if self.type is SubscriptionType.FAILOVER:
            self.set_active(reply.active)
        self.dispatcher.start()
        return consumer

    def set_active(self, active_uid: str) -> None:
        """Failover: mark which local consumer is active (``""``: none here knows)."""
        for consumer in self.consumers:
            consumer.set_active(consumer.uid == active_uid)

    async def refresh_active(self) -> None:
        """Failover: ask Redis which consumer is active and tell local consumers."""
        active = await subscriptions.failover_active(self.lane, self.keys, partition=self.partition)
        self.set_active(active)

    async def reap(self) -> int:
        """Hand back the unacked entries of consumers whose lease expired (any gateway's)."""
        handed_back = await subscriptions.reap_consumers(
            self.lane, self.keys, subscription=self.name
        )
        if self.type is SubscriptionType.FAILOVER:
            await self.refresh_active()
        if handed_back:
            log.info(
                "subscription %s: %d entries handed back from expired consumers",
                self.name,
                handed_back,
            )
            self.topic.notify()
        return handed_back

    async def remove(self, consumer: Consumer) -> None:
        """Detach ``consumer``; its unacked entries go back to the subscription."""
        if consumer.closed:
            return
        consumer.closed = True
        self.forget(consumer)
        if not self.durable and not self.consumers:
            # A reader's subscription lives as long as its consumer (Pulsar non-durable)...
            try:
                await self._delete(consumer.uid)
                return
            except ConsumerBusy:
                pass  # ...unless consumers elsewhere still use the name: only this one leaves
        handed_back = await subscriptions.release_consumer(
            self.lane, self.keys, subscription=self.name, consumer=consumer.uid
        )
        self._membership_changed(handed_back)

    def hand_back(self, uid: str) -> None:
        """Release consumer ``uid`` in Redis as soon as Redis answers (its entries go back
        to the subscription), trying until its lease would have run out; after that any
        gateway's reaper does it (``reap_consumers.lua``)."""
        task = asyncio.get_running_loop().create_task(self._hand_back(uid))
        _hand_backs.add(task)
        task.add_done_callback(_hand_backs.discard)

    async def _hand_back(self, uid: str) -> None:
        deadline = time.monotonic() + self.lease_ms / 1000
        while True:
            try:
                handed_back = await subscriptions.release_consumer(
                    self.lane, self.keys, subscription=self.name, consumer=uid
                )
            except GatewayError as exc:
                if isinstance(exc, ServiceNotReady) or time.monotonic() >= deadline:
                    log.warning("consumer %s not released (%s); its lease will expire", uid, exc)
                    return
                await asyncio.sleep(HAND_BACK_RETRY)
                continue
            self._membership_changed(handed_back)
            return

    async def unsubscribe(self, consumer: Consumer) -> None:
        """Delete the subscription on ``consumer``'s request (Pulsar UNSUBSCRIBE)."""
        await self._delete(consumer.uid)
        consumer.closed = True
        self.forget(consumer)

    async def _delete(self, uid: str) -> None:
        await subscriptions.unsubscribe(self.lane, self.keys, subscription=self.name, consumer=uid)

    async def seek(self, group_position: bytes) -> None:
        """Reposition the subscription so delivery restarts after ``group_position`` (a
        consumer-group id, see :func:`~pulsar_gateway.core.model.message_id.start_position`),
        and close every consumer of it on every gateway; clients re-subscribe (Pulsar's seek
        sequence).

        Raises:
            SubscriptionNotFound: the subscription is gone.
        """
        detached = await subscriptions.seek(
            self.lane, self.keys, subscription=self.name, position=group_position
        )
        if detached is None:
            raise SubscriptionNotFound(f"Subscription {self.name} does not exist")
        # Other gateways find their consumers' leases gone on their next dispatch.
        self.topic.notify()
        for consumer in list(self.consumers):
            consumer.lost()

    def forget(self, consumer: Consumer) -> None:
        """Drop ``consumer`` from this gateway's view (Redis is handled by the caller)."""
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        if not self.consumers:
            self._on_idle(self)

    async def last_message_id(self) -> LastMessageId:
        found = await subscriptions.last_message_id(
            self.lane, self.topic.keys.stream, subscription=self.name
        )
        last = found.last
        return LastMessageId(
            last=last.message_id if last is not None else None,
            last_num_messages=last.num_messages if last is not None else 1,
            last_is_batch=last.is_batch if last is not None else False,
            mark_delete=MessageId.from_stream_id(found.mark_delete) if found.mark_delete else None,
        )
