"""A subscription's scheduled messages: list, count by time (a histogram), cancel,
reschedule.

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

A listing may be restricted to a window of deliver-at times, and a histogram counts the
messages due in each of a row of equal buckets (one ``ZCOUNT`` each in one script), so a
console can draw when a subscription's load will come without paging through it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pulsar_gateway.core.errors import MessageNotFound, NotAllowed, SubscriptionNotFound
from pulsar_gateway.core.model.message_id import MessageId
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import scheduled
from pulsar_gateway.core.storage.scripts.scheduled import ScheduleChange, ScheduledHistogram
from pulsar_gateway.core.topics.topic import Topic, Topics

__all__ = [
    "DEFAULT_BUCKETS",
    "DEFAULT_SPAN_MS",
    "MAX_BUCKETS",
    "MAX_PAGE",
    "MAX_SPAN_MS",
    "MAX_TIME_MS",
    "HistogramWindow",
    "ScheduleHistogram",
    "ScheduledMessage",
    "ScheduledMessages",
    "ScheduledPage",
    "histogram_window",
]

#: Most delayed entries one call reads ahead of the subscription's cursor.
SCHEDULE_AHEAD = 10_000
#: Largest page a listing returns.
MAX_PAGE = 1000
#: Latest deliver-at time a window may name: a Java long, as ``MessageMetadata``'s
#: ``deliver_at_time`` (ms since the epoch).
MAX_TIME_MS = 2**63 - 1
#: Buckets of a histogram: at most, and when not asked.
MAX_BUCKETS = 500
DEFAULT_BUCKETS = 60
#: A histogram's span when not asked (an hour), and the longest (ten years of 365.25 days:
#: what a delayed-delivery policy's maximum delay could reasonably be).
DEFAULT_SPAN_MS = 3_600_000
MAX_SPAN_MS = 10 * 36_525 * 86_400_000 // 100


@dataclass(frozen=True, slots=True)
class ScheduledMessage:
    """One scheduled entry: its id, when it is due (ms since epoch) and the stored blob."""

    message_id: MessageId
    deliver_at: int
    blob: bytes


@dataclass(frozen=True, slots=True)
class ScheduledPage:
    """One page of a listing, how many messages the subscription has scheduled, and how
    many of them are due in the window asked for (all of them without one)."""

    total: int
    messages: list[ScheduledMessage]
    in_window: int = 0


@dataclass(frozen=True, slots=True)
class HistogramWindow:
    """``buckets`` buckets of ``bucket_ms`` from ``start`` (ms since the epoch); they end
    at :attr:`end`, at or after the end asked for."""

    start: int
    bucket_ms: int
    buckets: int

    @property
    def end(self) -> int:
        return self.start + self.buckets * self.bucket_ms

    @property
    def bounds(self) -> list[int]:
        """The buckets' bounds: bucket i is ``[bounds[i], bounds[i + 1])``."""
        return [self.start + i * self.bucket_ms for i in range(self.buckets + 1)]


def histogram_window(
    start: int | None, end: int | None, buckets: int | None, now_ms: int
) -> HistogramWindow:
    """The buckets of a histogram from ``start`` (default ``now_ms``) to ``end`` (default
    an hour later) in ``buckets`` buckets (default 60) of ``ceil((end - start) /
    buckets)`` ms each.

    Raises:
        ValueError: ``end`` not after ``start``, a time outside ``0..MAX_TIME_MS``, a span
            over ten years, or ``buckets`` outside ``1..MAX_BUCKETS``.
    """
    start = now_ms if start is None else start
    end = start + DEFAULT_SPAN_MS if end is None else end
    buckets = DEFAULT_BUCKETS if buckets is None else buckets
    if not 1 <= buckets <= MAX_BUCKETS:
        raise ValueError(f"buckets must be within 1..{MAX_BUCKETS}, got {buckets}")
    if not 0 <= start <= MAX_TIME_MS or not 0 <= end <= MAX_TIME_MS:
        raise ValueError(f"from and to must be times within 0..{MAX_TIME_MS} (ms since the epoch)")
    if end <= start:
        raise ValueError(f"to ({end}) must be after from ({start})")
    if end - start > MAX_SPAN_MS:
        raise ValueError(f"to - from must be at most {MAX_SPAN_MS} ms (ten years)")
    return HistogramWindow(start, math.ceil((end - start) / buckets), buckets)


@dataclass(frozen=True, slots=True)
class ScheduleHistogram:
    """How many scheduled messages are due in each bucket of ``window``, before its
    start and at or after its end; ``total`` is their sum."""

    window: HistogramWindow
    counts: tuple[int, ...]
    before: int
    after: int
    total: int


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

    async def list(
        self,
        topic: str,
        subscription: str,
        offset: int,
        limit: int,
        start: int | None = None,
        end: int | None = None,
    ) -> ScheduledPage:
        """The subscription's scheduled messages from ``offset`` in deliver-at order, of
        those due at or after ``start`` and before ``end`` (ms; None: no bound).

        Raises:
            InvalidTopicName, NotAllowed (non-persistent topic), SubscriptionNotFound;
            ValueError for paging or a window out of range.
        """
        handle = self._topic(topic)
        if offset < 0 or not 0 < limit <= MAX_PAGE:
            raise ValueError(f"offset must be >= 0 and limit within 1..{MAX_PAGE}")
        for bound in (start, end):
            if bound is not None and not 0 <= bound <= MAX_TIME_MS:
                raise ValueError(f"from and to must be within 0..{MAX_TIME_MS}")
        if start is not None and end is not None and start > end:
            raise ValueError(f"from ({start}) must not be after to ({end})")
        page = await scheduled.scheduled_list(
            self._lane,
            handle.keys.subscription(subscription),
            subscription=subscription,
            offset=offset,
            limit=limit,
            schedule_ahead=SCHEDULE_AHEAD,
            partition=handle.partition,
            start=start,
            end=end,
        )
        if not page.found:
            raise SubscriptionNotFound(f"Subscription {subscription} not found")
        messages = [
            ScheduledMessage(item.entry.message_id, item.deliver_at, item.entry.blob)
            for item in page.entries
        ]
        return ScheduledPage(page.total, messages, page.in_window)

    async def histogram(
        self, topic: str, subscription: str, window: HistogramWindow
    ) -> ScheduleHistogram:
        """How many of the subscription's scheduled messages are due in each bucket of
        ``window`` (:func:`histogram_window`).

        Raises:
            InvalidTopicName, NotAllowed (non-persistent topic), SubscriptionNotFound.
        """
        handle = self._topic(topic)
        counted: ScheduledHistogram = await scheduled.scheduled_histogram(
            self._lane,
            handle.keys.subscription(subscription),
            subscription=subscription,
            bounds=window.bounds,
            schedule_ahead=SCHEDULE_AHEAD,
        )
        if not counted.found:
            raise SubscriptionNotFound(f"Subscription {subscription} not found")
        return ScheduleHistogram(
            window, counted.counts, counted.before, counted.after, counted.total
        )

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
