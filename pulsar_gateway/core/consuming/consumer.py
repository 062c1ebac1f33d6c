"""Consumers: one client consumer attached to a subscription through this gateway.

A consumer holds flow-control permits (Pulsar ``CommandFlow``: messages the client can
take), a sink the adapter provides to receive deliveries, and a fleet-unique uid which is
its consumer name inside the Redis consumer group. Acks go straight to the group (``XACK``
is the individual ack: the entry leaves the subscription's unacked set); batch-index acks,
cumulative acks and redeliveries go through Lua scripts, so a racing gateway never sees
half a move.

Adapters see every consumer, persistent or not, through :class:`ConsumerHandle`; the
consumer sees its subscription through :class:`ConsumerSubscription`, the few things it
asks of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pulsar_gateway.core.errors import NotAllowed, ServiceNotReady
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.rates import ClientInfo, Meter
from pulsar_gateway.core.model.entry import Delivery
from pulsar_gateway.core.model.message_id import MessageId
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.storage import topic_store
from pulsar_gateway.core.storage.keys import SubscriptionKeys
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import acks

__all__ = [
    "Consumer",
    "ConsumerHandle",
    "ConsumerSink",
    "ConsumerSubscription",
    "LastMessageId",
    "count_out",
    "redeliver_unacknowledged",
]


def count_out(
    metrics: GatewayMetrics, meter: Meter, subscription_meter: Meter, messages: int, size: int
) -> None:
    """Count messages sent to a consumer: the gateway's counter, the consumer's and its
    subscription's meters (Pulsar ``msgRateOut``/``msgThroughputOut``)."""
    metrics.out_messages += messages
    meter.add(messages, size)
    subscription_meter.add(messages, size)


def redeliver_unacknowledged(consumer: ConsumerHandle, stream_ids: Sequence[bytes]) -> bool:
    """A client's request to have unacknowledged messages sent again (the binary protocol's
    REDELIVER_UNACKNOWLEDGED_MESSAGES; a WebSocket consumer's negative acks and ack
    timeouts), by Pulsar's rule (``ServerCnx.handleRedeliverUnacknowledged``): the ids are
    honoured only on Shared and Key_Shared subscriptions
    (``Subscription.isIndividualAckMode``); on Exclusive and Failover, or when no id is
    named, every unacknowledged message of the consumer comes again, in order (the Java
    client's ``ConsumerImpl.redeliverUnacknowledgedMessages(Set)`` sends no ids there).

    Returns:
        True when everything the consumer held was given back: an adapter then drops the
        copies it still holds of them (the Java client clears its receiver queue).
    """
    if stream_ids and consumer.subscription_type.individual_ack_mode:
        consumer.redeliver(stream_ids)
        return False
    consumer.redeliver(None)
    return True


@dataclass(frozen=True, slots=True)
class LastMessageId:
    """Answer to GET_LAST_MESSAGE_ID: the topic's last entry and the mark-delete position.

    ``last`` is None for an empty topic; ``last_num_messages`` the size of the last entry
    (a batch's last message has batch index ``last_num_messages - 1``); ``mark_delete`` is
    None when nothing is acknowledged yet.
    """

    last: MessageId | None
    last_num_messages: int
    last_is_batch: bool
    mark_delete: MessageId | None


class ConsumerSink(Protocol):
    """What an adapter gives the core to receive a consumer's messages."""

    def deliver(self, consumer: ConsumerHandle, deliveries: list[Delivery]) -> None:
        """Send ``deliveries`` to the client (permits were already taken). The adapter
        calls ``consumer.set_writable(False)`` when its connection cannot take more (and
        True once it can): the core then sends nothing until it drains."""

    def closed_by_gateway(self, consumer: ConsumerHandle) -> None:
        """The core closed the consumer (lease lost, seek); the client should re-subscribe."""

    def reached_end_of_topic(self, consumer: ConsumerHandle) -> None:
        """The topic was terminated and the consumer has been sent all of it (Pulsar's
        REACHED_END_OF_TOPIC)."""

    def active_changed(self, consumer: ConsumerHandle, active: bool) -> None:
        """A Failover consumer became the active one, or stopped being it."""


class ConsumerHandle(Protocol):
    """What adapters use of a consumer, persistent or non-persistent.

    Attributes:
        uid: fleet-unique identity (its name in the Redis consumer group).
        active: Failover: whether this is the active consumer (None: not known yet).
        reports_redelivery_count: whether deliveries carry Pulsar's redelivery count.
        client: what the adapter knows of the client (stats).
    """

    uid: str
    name: str
    closed: bool
    writable: bool
    blocked_on_unacked: bool
    active: bool | None
    topic_name: str
    subscription_name: str
    subscription_type: SubscriptionType
    partition: int
    permits: int
    meter: Meter
    reports_redelivery_count: bool
    client: ClientInfo

    @property
    def subscription_blocked_on_unacked(self) -> bool:
        """Its subscription is over its unacked limit (stats)."""
        ...

    def flow(self, permits: int) -> None:
        """Add ``permits`` (``CommandFlow.messagePermits``)."""

    def set_writable(self, writable: bool) -> None:
        """Whether the client's connection can take more messages now."""

    def ack(self, stream_ids: Sequence[bytes]) -> asyncio.Future[int]:
        """Individually acknowledge entries."""

    def ack_batch_indexes(self, acks: Sequence[tuple[bytes, Sequence[int]]]) -> asyncio.Future[int]:
        """Acknowledge messages of batches: ``(stream id, ack set words)`` each."""

    def ack_cumulative(self, upto: bytes) -> asyncio.Future[int]:
        """Acknowledge everything up to and including ``upto``."""

    def redeliver(self, stream_ids: Sequence[bytes] | None) -> asyncio.Future[int]:
        """Give unacked entries back (all of them when None)."""

    async def last_message_id(self) -> LastMessageId:
        """The topic's last entry and the subscription's mark-delete position."""

    async def seek(self, group_position: bytes) -> None:
        """Reposition the subscription after ``group_position`` (a group id)."""

    async def close(self) -> None:
        """Detach; unacked entries go back to the subscription."""

    async def unsubscribe(self) -> None:
        """Delete the subscription."""


class ConsumerSubscription(Protocol):
    """What a :class:`Consumer` asks of its subscription."""

    name: str
    type: SubscriptionType
    topic_name: str
    keys: SubscriptionKeys
    lane: Lane
    partition: int
    metrics: GatewayMetrics
    meter: Meter

    blocked_on_unacked: bool

    def wake(self) -> None:
        """Wake this gateway's dispatcher of the subscription."""

    def recheck_unacked(self) -> None:
        """Have the dispatcher check the unacked limits again (acks came in)."""

    def notify(self) -> None:
        """Wake every gateway's dispatchers of the topic."""

    async def remove(self, consumer: Consumer) -> None:
        """Detach ``consumer`` in Redis and here."""

    async def unsubscribe(self, consumer: Consumer) -> None:
        """Delete the subscription at ``consumer``'s request."""

    async def seek(self, group_position: bytes) -> None:
        """Reposition the subscription; its consumers are closed."""

    async def last_message_id(self) -> LastMessageId:
        """The topic's last entry and the mark-delete position."""

    def forget(self, consumer: Consumer) -> None:
        """Drop ``consumer`` from this gateway's view."""

    def hand_back(self, uid: str) -> None:
        """Release consumer ``uid`` in Redis as soon as Redis answers."""


class Consumer:
    """One consumer of a subscription, attached through this gateway."""

    def __init__(
        self, subscription: ConsumerSubscription, uid: str, name: str, sink: ConsumerSink
    ) -> None:
        self.subscription = subscription
        self.uid = uid
        self.name = name
        self.sink = sink
        self.permits = 0
        self.closed = False
        #: whether the client's connection takes more messages now (Pulsar
        #: ``Consumer.isWritable``): a consumer that is not gets nothing, its permits stay
        self.writable = True
        #: over its unacked limit as the last dispatch said (Pulsar
        #: ``blockedConsumerOnUnackedMsgs``): it gets nothing until acks bring it to half
        self.blocked_on_unacked = False
        #: Failover: whether this is the subscription's active consumer (None: not known yet)
        self.active: bool | None = None
        #: told it reached the end of a terminated topic (told once)
        self.end_of_topic_sent = False
        #: Set once the client acks batch indexes or gets a partly acked batch: its whole-entry
        #: acks then also clear the entry's stored ack set.
        self.batch_acks = False
        self.subscription_type = subscription.type
        self.subscription_name = subscription.name
        self.topic_name = subscription.topic_name
        self.partition = subscription.partition
        self._lane = subscription.lane
        self._keys = subscription.keys
        self._metrics = subscription.metrics
        #: Pulsar counts redeliveries only on Shared and Key_Shared subscriptions; the
        #: client's dead-letter logic depends on it (``RedeliveryTrackerDisabled`` in Pulsar's
        #: ``PersistentDispatcherSingleActiveConsumer``; docs/binary_protocol.md "Consuming,
        #: acknowledging, seeking").
        self.reports_redelivery_count = subscription.type.counts_redeliveries
        #: stats (Pulsar ``ConsumerStats``): this consumer's meter, its subscription's on
        #: this gateway, and what the adapter knows of the client
        self.meter = Meter()
        self.subscription_meter = subscription.meter
        self.client = ClientInfo()

    @property
    def subscription_blocked_on_unacked(self) -> bool:
        return self.subscription.blocked_on_unacked

    # -- flow control and delivery ---------------------------------------------------

    def flow(self, permits: int) -> None:
        """Add ``permits`` (``CommandFlow.messagePermits``) and wake the dispatcher."""
        self.permits += permits
        if self.permits > 0 and not self.closed:
            self.subscription.wake()

    def set_writable(self, writable: bool) -> None:
        """The adapter's connection filled its send buffer (False) or drained it (True).
        Pulsar's dispatchers hold back a consumer whose channel is not writable; here it
        gets nothing at all until it drains, and its permits stay granted."""
        if writable is self.writable:
            return
        self.writable = writable
        if writable and self.permits > 0 and not self.closed:
            self.subscription.wake()

    def deliver(self, deliveries: list[Delivery], messages: int) -> int:
        """Take ``messages`` permits and hand ``deliveries`` (holding that many messages) to
        the sink; called by the dispatcher, which has counted them already. Returns their
        size in bytes."""
        if not self.reports_redelivery_count:
            for d in deliveries:
                d.redelivery_count = 0
        self.permits -= messages
        size = sum(len(d.blob) for d in deliveries)
        count_out(self._metrics, self.meter, self.subscription_meter, messages, size)
        if not self.batch_acks and any(d.ack_set for d in deliveries):
            self.batch_acks = True
        self.sink.deliver(self, deliveries)
        return size

    def set_active(self, active: bool) -> None:
        """Record Failover activity; tell the client when it changes
        (``ACTIVE_CONSUMER_CHANGE``)."""
        if active != self.active and not self.closed:
            self.active = active
            self.sink.active_changed(self, active)

    # -- acknowledgement -------------------------------------------------------------

    def ack(self, stream_ids: Sequence[bytes]) -> asyncio.Future[int]:
        """Individually acknowledge entries (``XACK``); unknown or repeated ids are ignored."""
        if self.batch_acks:
            topic_store.drop_ack_sets(self._lane, self._keys, stream_ids)
        fut = topic_store.acknowledge(self._lane, self._keys, self.subscription.name, stream_ids)
        self._unacked_changed()
        return self._watch(fut)

    def _unacked_changed(self) -> None:
        """Entries left this consumer: if it or its subscription was blocked on its unacked
        limit, the next dispatch (queued after this change) checks again."""
        if self.blocked_on_unacked or self.subscription.blocked_on_unacked:
            self.subscription.recheck_unacked()

    def _watch(self, fut: asyncio.Future[int]) -> asyncio.Future[int]:
        """Abandon this consumer if ``fut``, a change of its acks or redeliveries, fails."""
        fut.add_done_callback(self._abandon_on_failure)
        return fut

    def ack_batch_indexes(
        self, acks_: Sequence[tuple[bytes, Sequence[int]]]
    ) -> asyncio.Future[int]:
        """Batch-index ack: for each ``(stream id, ack set words)``, the batch's messages whose
        bit is clear are acknowledged; the entry is acknowledged once none is left."""
        self.batch_acks = True
        fut = acks.ack_batch_index(
            self._lane, self._keys, subscription=self.subscription.name, acks=acks_
        )
        self._unacked_changed()
        return self._watch(fut)

    def ack_cumulative(self, upto: bytes) -> asyncio.Future[int]:
        """Acknowledge everything up to and including stream id ``upto``.

        Raises:
            NotAllowed: on Shared and Key_Shared subscriptions, where "everything before"
                has no meaning (Pulsar ``Consumer.messageAcked``).
        """
        if self.subscription_type.individual_ack_mode:
            raise NotAllowed(
                f"Cumulative ack is not supported for {self.subscription_type.pulsar_name}"
                " subscription"
            )
        return self._watch(
            acks.cumulative_ack(
                self._lane, self._keys, subscription=self.subscription.name, upto=upto
            )
        )

    def redeliver(self, stream_ids: Sequence[bytes] | None) -> asyncio.Future[int]:
        """Give unacked entries back for redelivery (all of this consumer's when None)."""
        fut = acks.redeliver(
            self._lane,
            self._keys,
            subscription=self.subscription.name,
            consumer=self.uid,
            stream_ids=stream_ids or (),
        )
        fut.add_done_callback(self._after_redeliver)
        self._unacked_changed()
        return self._watch(fut)

    def _after_redeliver(self, fut: asyncio.Future[int]) -> None:
        if not fut.cancelled() and fut.exception() is None and fut.result():
            self.meter.redelivered += fut.result()
            self.subscription_meter.redelivered += fut.result()
            self.subscription.notify()
            self.subscription.wake()

    # -- queries and lifecycle -------------------------------------------------------

    async def last_message_id(self) -> LastMessageId:
        return await self.subscription.last_message_id()

    async def seek(self, group_position: bytes) -> None:
        """Reposition the subscription (Pulsar SEEK); every consumer of it is closed."""
        await self.subscription.seek(group_position)

    async def close(self) -> None:
        """Detach; unacked entries go back to the subscription with a redelivery counted."""
        await self.subscription.remove(self)

    async def unsubscribe(self) -> None:
        """Delete the subscription (refused with ConsumerBusy while others are attached)."""
        await self.subscription.unsubscribe(self)

    async def unload(self) -> None:
        """Close from the gateway's side (an admin unload, Pulsar's ``Consumer.disconnect``):
        unacked entries go back to the subscription as on a close, and the client is told
        (CLOSE_CONSUMER) so it subscribes again and carries on."""
        if not self.closed:
            await self.subscription.remove(self)
            self.sink.closed_by_gateway(self)

    def reached_end(self) -> None:
        """Tell the client, once, that it was sent all of a terminated topic."""
        if not self.end_of_topic_sent and not self.closed:
            self.end_of_topic_sent = True
            self.sink.reached_end_of_topic(self)

    def lost(self) -> None:
        """The lease was lost (reaped by another gateway): close locally, tell the client."""
        if not self.closed:
            self.closed = True
            self.subscription.forget(self)
            self.sink.closed_by_gateway(self)

    def abandon(self) -> None:
        """A Redis call for this consumer failed and may still have been applied (a
        dispatch whose reply was lost leaves entries pending here that the client never
        got; a lost ack leaves entries the client acked pending here). Close it, as a
        Pulsar broker disconnects consumers on a storage failure, so the client
        re-subscribes, and hand its entries back to the subscription: they are delivered
        again, nothing is stranded at a consumer that never had them."""
        if self.closed:
            return
        self.lost()
        self.subscription.hand_back(self.uid)

    def _abandon_on_failure(self, fut: asyncio.Future[int]) -> None:
        # ServiceNotReady: the gateway is shutting down, which releases every consumer.
        if not fut.cancelled() and not isinstance(fut.exception(), ServiceNotReady | None):
            self.abandon()
