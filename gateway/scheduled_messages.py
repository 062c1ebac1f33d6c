"""A subscription's scheduled messages: list, cancel, reschedule, count.

Pulsar's delayed-delivery trackers cannot show or change what they hold; here the index is
a sorted set in Redis (``P:{T}:delayed:<sub>``, :mod:`gateway.keys`), so an operator can
page through a subscription's scheduled messages by deliver-at time, cancel one (it counts
as acknowledged on that subscription and is never delivered to it) or move it to another
time. Each operation is one script, atomic with the dispatchers of every gateway: a message
is either delivered or cancelled, never both.

A scheduled message joins the index when the subscription reads it. These calls first read
ahead over the delayed messages at the subscription's cursor (``lib.lua``
``schedule_ahead``), so a subscription without consumers shows its scheduled messages too;
one behind undelivered messages is indexed once those are dispatched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.errors import MessageNotFound, NotAllowed, SubscriptionNotFound
from gateway.message_id import MessageId
from gateway.producer import ENTRY_BLOB

if TYPE_CHECKING:
    from gateway.broker import Broker
    from gateway.topic import Topic

__all__ = ["ScheduledMessage", "ScheduledMessages", "ScheduledPage"]

#: Most delayed entries one call reads ahead of the subscription's cursor.
SCHEDULE_AHEAD = 10_000
#: Largest page a listing returns.
MAX_PAGE = 1000


@dataclass(frozen=True, slots=True)
class ScheduledMessage:
    """One scheduled entry: its id, when it is due (ms since epoch) and the stored blob."""

    message_id: MessageId
    deliver_at: int
    blob: bytes


@dataclass(frozen=True, slots=True)
class ScheduledPage:
    """One page of a listing, and how many messages the subscription has scheduled."""

    total: int
    messages: list[ScheduledMessage]


class ScheduledMessages:
    """The admin operations on scheduled messages, for every gateway's subscriptions."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def _topic(self, topic: str) -> Topic:
        handle = self._broker.topic(topic)
        if not handle.name.persistent:
            raise NotAllowed("Non-persistent topics have no scheduled messages")
        return handle

    async def list(self, topic: str, subscription: str, offset: int, limit: int) -> ScheduledPage:
        """The subscription's scheduled messages from ``offset`` in deliver-at order.

        Raises:
            InvalidTopicName, NotAllowed (non-persistent topic), SubscriptionNotFound.
        """
        handle = self._topic(topic)
        if offset < 0 or not 0 < limit <= MAX_PAGE:
            raise ValueError(f"offset must be >= 0 and limit within 1..{MAX_PAGE}")
        reply: list[Any] = await self._broker.storage.eval(
            "scheduled_list",
            handle.keys.subscription_keys(subscription),
            [subscription, offset, limit, SCHEDULE_AHEAD],
        )
        if reply[0] != 0:
            raise SubscriptionNotFound(f"Subscription {subscription} not found")
        partition = handle.partition
        messages = []
        for i in range(2, len(reply), 3):
            fields = reply[i + 2]
            blob = b""
            for j in range(0, len(fields), 2):
                if fields[j] == ENTRY_BLOB:
                    blob = fields[j + 1]
            messages.append(
                ScheduledMessage(
                    MessageId.from_stream_id(reply[i], partition), int(reply[i + 1]), blob
                )
            )
        return ScheduledPage(int(reply[1]), messages)

    async def cancel(self, topic: str, subscription: str, message_id: MessageId) -> None:
        """Cancel one scheduled message: acknowledged on this subscription, never delivered.

        Raises:
            SubscriptionNotFound; MessageNotFound when it is not scheduled on the
            subscription (delivered, acknowledged, not delayed, or not read yet).
        """
        keys = self._topic(topic).keys.subscription_keys(subscription)
        done = await self._broker.storage.eval(
            "scheduled_cancel", keys, [subscription, message_id.stream_id, SCHEDULE_AHEAD]
        )
        self._check(done, subscription, message_id)

    async def reschedule(
        self, topic: str, subscription: str, message_id: MessageId, deliver_at: int
    ) -> None:
        """Move one scheduled message to ``deliver_at`` (ms since epoch; a past time makes
        it due now). Raises as :meth:`cancel`."""
        handle = self._topic(topic)
        done = await self._broker.storage.eval(
            "scheduled_reschedule",
            handle.keys.subscription_keys(subscription),
            [subscription, message_id.stream_id, deliver_at, SCHEDULE_AHEAD],
        )
        self._check(done, subscription, message_id)
        # Dispatchers sleep until the earliest time they know of: wake them to learn this one.
        handle.notify()

    @staticmethod
    def _check(done: int, subscription: str, message_id: MessageId) -> None:
        if done < 0:
            raise SubscriptionNotFound(f"Subscription {subscription} not found")
        if done == 0:
            raise MessageNotFound(
                f"Message {message_id.ledger_id}:{message_id.entry_id} is not scheduled on "
                f"subscription {subscription}"
            )
