"""A subscription's scheduled messages: list, cancel, reschedule, count.

Pulsar's delayed-delivery trackers cannot show or change what they hold; here the index is a sorted
set in Redis (``P:{T}:delayed:<sub>``, :mod:`pulsar_gateway.core.storage.keys`), so an operator can
page through a subscription's scheduled messages by deliver-at time, cancel one (it counts as
acknowledged on that subscription and is never delivered to it) or move it to another time. Each
operation is one script, atomic with the dispatchers of every gateway: a message is either delivered
or cancelled, never both.

A scheduled message joins the index when the subscription reads it. These calls first read
ahead over the delayed messages at the subscription's cursor (``lib.lua``
``schedule_ahead``), so a subscription without consumers shows its scheduled messages too;
one behind undelivered messages is indexed once those are dispatched.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_gateway.core.errors import MessageNotFound, NotAllowed, SubscriptionNotFound
from pulsar_gateway.core.model.message_id import MessageId
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import scheduled
from pulsar_gateway.core.storage.scripts.scheduled import ScheduleChange
from pulsar_gateway.core.topics.topic import Topic, Topics

__all__ = ["MAX_PAGE", "ScheduledMessage", "ScheduledMessages", "ScheduledPage"]

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

    def __init__(self, lane: Lane, topics: Topics) -> None:
        self._lane = lane
        self._topics = topics

    def _topic(self, topic: str) -> Topic:
        handle = self._topics.get(topic)
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
        page = await scheduled.scheduled_list(
            self._lane,
            handle.keys.subscription(subscription),
            subscription=subscription,
            offset=offset,
            limit=limit,
            schedule_ahead=SCHEDULE_AHEAD,
            partition=handle.partition,
        )
        if not page.found:
            raise SubscriptionNotFound(f"Subscription {subscription} not found")
        messages = [
            ScheduledMessage(item.entry.message_id, item.deliver_at, item.entry.blob)
            for item in page.entries
        ]
        return ScheduledPage(page.total, messages)

    async def cancel(self, topic: str, subscription: str, message_id: MessageId) -> None:
        """Cancel one scheduled message: acknowledged on this subscription, never delivered.

        Raises:
            SubscriptionNotFound; MessageNotFound when it is not scheduled on the
            subscription (delivered, acknowledged, not delayed, or not read yet).
        """
        handle = self._topic(topic)
        done = await scheduled.scheduled_cancel(
            self._lane,
            handle.keys.subscription(subscription),
            subscription=subscription,
            stream_id=message_id.stream_id,
            schedule_ahead=SCHEDULE_AHEAD,
        )
        self._check(done, subscription, message_id)

    async def reschedule(
        self, topic: str, subscription: str, message_id: MessageId, deliver_at: int
    ) -> None:
        """Move one scheduled message to ``deliver_at`` (ms since epoch; a past time makes
        it due now). Raises as :meth:`cancel`."""
        handle = self._topic(topic)
        done = await scheduled.scheduled_reschedule(
            self._lane,
            handle.keys.subscription(subscription),
            subscription=subscription,
            stream_id=message_id.stream_id,
            deliver_at=deliver_at,
            schedule_ahead=SCHEDULE_AHEAD,
        )
        self._check(done, subscription, message_id)
        # Dispatchers sleep until the earliest time they know of: wake them to learn this one.
        handle.notify()

    @staticmethod
    def _check(done: ScheduleChange, subscription: str, message_id: MessageId) -> None:
        if done is ScheduleChange.NO_SUBSCRIPTION:
            raise SubscriptionNotFound(f"Subscription {subscription} not found")
        if done is ScheduleChange.NOT_SCHEDULED:
            raise MessageNotFound(
                f"Message {message_id.ledger_id}:{message_id.entry_id} is not scheduled on "
                f"subscription {subscription}"
            )
