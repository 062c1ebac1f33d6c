"""Consumers: one client consumer attached to a subscription through this gateway.

A consumer holds flow-control permits (Pulsar ``CommandFlow``: messages the client can
take), a sink the adapter provides to receive deliveries, and a fleet-unique uid which is
its consumer name inside the Redis consumer group. Acks go straight to the group (``XACK``
is the individual ack: the entry leaves the subscription's unacked set); redelivery and
release go through Lua scripts so a racing gateway never sees half a move.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gateway.errors import NotAllowed, ServiceNotReady
from gateway.keys import PARKED_CONSUMER
from gateway.message_id import MessageId
from gateway.rates import ClientInfo, Meter

if TYPE_CHECKING:
    from gateway.subscription import Subscription

__all__ = [
    "Consumer",
    "ConsumerSink",
    "Delivery",
    "InitialPosition",
    "LastMessageId",
    "SubscriptionType",
    "ack_set_bits",
    "ack_set_words",
]


class SubscriptionType(enum.IntEnum):
    """Pulsar's subscription types (``CommandSubscribe.SubType`` values)."""

    EXCLUSIVE = 0
    SHARED = 1
    FAILOVER = 2
    KEY_SHARED = 3


class InitialPosition(enum.IntEnum):
    """Where a new subscription starts (``CommandSubscribe.InitialPosition`` values)."""

    LATEST = 0
    EARLIEST = 1


@dataclass(slots=True)
class Delivery:
    """One stream entry handed to a consumer.

    ``ack_set`` is set for a partly acknowledged batch: Pulsar's ``CommandMessage.ack_set``
    words, bit i = message i still unacked (``num_messages`` then counts only those).
    """

    stream_id: bytes
    blob: bytes
    num_messages: int
    redelivery_count: int
    ack_set: tuple[int, ...] = ()


def ack_set_bits(words: Sequence[int]) -> str:
    """Pulsar ack-set words (a Java ``BitSet``'s ``long[]``: index i is bit i mod 64 of word
    i / 64; set = not yet acknowledged) -> the ``"0"``/``"1"`` string the scripts store."""
    return "".join("1" if (word >> bit) & 1 else "0" for word in words for bit in range(64)).rstrip(
        "0"
    )


def ack_set_words(bits: str | bytes) -> tuple[int, ...]:
    """The inverse of :func:`ack_set_bits`: signed 64-bit words, as the wire carries them."""
    if isinstance(bits, bytes):
        bits = bits.decode()
    words = []
    for start in range(0, len(bits), 64):
        word = 0
        for i, char in enumerate(bits[start : start + 64]):
            if char == "1":
                word |= 1 << i
        words.append(word - (1 << 64) if word >> 63 else word)
    return tuple(words)


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

    def deliver(self, consumer: Consumer, deliveries: list[Delivery]) -> None:
        """Send ``deliveries`` to the client (permits were already taken)."""

    def closed_by_gateway(self, consumer: Consumer) -> None:
        """The core closed the consumer (lease lost, seek); the client should re-subscribe."""

    def active_changed(self, consumer: Consumer, active: bool) -> None:
        """A Failover consumer became the active one, or stopped being it."""


class Consumer:
    """One consumer of a subscription, attached through this gateway."""

    def __init__(self, subscription: Subscription, uid: str, name: str, sink: ConsumerSink) -> None:
        self.subscription = subscription
        self.uid = uid
        self.name = name
        self.sink = sink
        self.permits = 0
        self.closed = False
        #: Failover: whether this is the subscription's active consumer (None: not known yet)
        self.active: bool | None = None
        #: Set once the client acks batch indexes or gets a partly acked batch: its whole-entry
        #: acks then also clear the entry's stored ack set.
        self.batch_acks = False
        self._storage = subscription.storage
        self._stream = subscription.topic.keys.stream
        self._ack_sets = subscription.topic.keys.ack_sets(subscription.name)
        self._metrics = subscription.broker.metrics
        #: Pulsar counts redeliveries only on Shared and Key_Shared subscriptions
        #: (``RedeliveryTrackerDisabled`` for the others); the client's dead-letter logic
        #: depends on it (protocol brief, gotcha G10).
        self.reports_redelivery_count = subscription.type in (
            SubscriptionType.SHARED,
            SubscriptionType.KEY_SHARED,
        )
        self.init_stats(
            subscription.broker.rates.topic(subscription.topic.full_name).out(subscription.name)
        )

    def init_stats(self, subscription_meter: Meter) -> None:
        """Stats (Pulsar ``ConsumerStats``): this consumer's meter, its subscription's on
        this gateway, and what the adapter knows of the client."""
        self.meter = Meter()
        self.subscription_meter = subscription_meter
        self.client = ClientInfo()

    def count_out(self, deliveries: list[Delivery], messages: int) -> None:
        """Count ``deliveries`` (``messages`` messages) as sent to this consumer."""
        size = sum(len(d.blob) for d in deliveries)
        self._metrics.out_messages += messages
        self.meter.add(messages, size)
        self.subscription_meter.add(messages, size)

    # -- flow control and delivery ---------------------------------------------------

    def flow(self, permits: int) -> None:
        """Add ``permits`` (``CommandFlow.messagePermits``) and wake the dispatcher."""
        self.permits += permits
        if self.permits > 0 and not self.closed:
            self.subscription.dispatcher.wake()

    def deliver(self, deliveries: list[Delivery], messages: int) -> None:
        """Take ``messages`` permits and hand ``deliveries`` (holding that many messages) to
        the sink; called by the dispatcher, which has counted them already."""
        if not self.reports_redelivery_count:
            for d in deliveries:
                d.redelivery_count = 0
        self.permits -= messages
        self.count_out(deliveries, messages)
        if not self.batch_acks and any(d.ack_set for d in deliveries):
            self.batch_acks = True
        self.sink.deliver(self, deliveries)

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
            self._storage.call("HDEL", self._ack_sets, *stream_ids)
        return self._watch(
            self._storage.call("XACK", self._stream, self.subscription.name, *stream_ids)
        )

    def _watch(self, fut: asyncio.Future[int]) -> asyncio.Future[int]:
        """Abandon this consumer if ``fut``, a change of its acks or redeliveries, fails."""
        fut.add_done_callback(self._abandon_on_failure)
        return fut

    def ack_batch_indexes(self, acks: Sequence[tuple[bytes, Sequence[int]]]) -> asyncio.Future[int]:
        """Batch-index ack: for each ``(stream id, ack set words)``, the batch's messages whose
        bit is clear are acknowledged; the entry is acknowledged once none is left."""
        self.batch_acks = True
        args: list[bytes | str] = [self.subscription.name]
        for stream_id, words in acks:
            args += [stream_id, ack_set_bits(words) or "0"]
        return self._watch(
            self._storage.eval("ack_batch_index", [self._stream, self._ack_sets], args)
        )

    def ack_cumulative(self, upto: bytes) -> asyncio.Future[int]:
        """Acknowledge everything up to and including stream id ``upto``.

        Raises:
            NotAllowed: on Shared and Key_Shared subscriptions, where "everything before"
                has no meaning (Pulsar ``Consumer.messageAcked``).
        """
        if self.subscription.type in (SubscriptionType.SHARED, SubscriptionType.KEY_SHARED):
            raise NotAllowed(
                f"Cumulative ack is not supported for {self.subscription.type.name.title()}"
                " subscription"
            )
        return self._watch(
            self._storage.eval(
                "cumulative_ack", [self._stream, self._ack_sets], [self.subscription.name, upto]
            )
        )

    def redeliver(self, stream_ids: Sequence[bytes] | None) -> asyncio.Future[int]:
        """Give unacked entries back for redelivery (all of this consumer's when None)."""
        fut = self._storage.eval(
            "redeliver",
            self.subscription.keys,
            [self.subscription.name, self.uid, PARKED_CONSUMER, *(stream_ids or ())],
        )
        fut.add_done_callback(self._after_redeliver)
        return self._watch(fut)

    def _after_redeliver(self, fut: asyncio.Future[int]) -> None:
        if not fut.cancelled() and fut.exception() is None and fut.result():
            self.meter.redelivered += fut.result()
            self.subscription_meter.redelivered += fut.result()
            self.subscription.topic.notify()
            self.subscription.dispatcher.wake()

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
