"""Why reading a binary connection is paused, without I/O (Pulsar's
``ServerCnxThrottleTracker``).

A connection stops being read (asyncio's ``pause_reading``, Netty's ``autoRead`` off in
Pulsar) for as long as at least one reason holds, and is read again once none is left:

* ``PENDING_PUBLISHES``: its SENDs waiting for Redis reached
  ``maxPendingPublishRequestsPerConnection``; released at half (``ServerCnx``
  ``startSendOperation`` / ``completedSendOperation``).
* ``PENDING_REQUESTS``: its other requests waiting for Redis (PRODUCER, SUBSCRIBE, SEEK,
  GET_SCHEMA...) reached the same number; released at half. Pulsar has no such limit per
  connection; here a client must not make the gateway hold an unbounded number of them.
* ``PUBLISH_BUFFER``: the gateway-wide publish buffer is full and the connection has
  producers (``maxMessagePublishBufferSizeInMB``).
* ``OUTBOUND_BUFFER_FULL``: the socket's send buffer is over its high water mark
  (``pulsarChannelPauseReceivingRequestsIfUnwritable``): a client that does not read its
  answers does not get to send more requests.
* ``STORAGE_BACKLOG``: Redis is behind (the storage lane's queue is long); every
  connection waits.
* ``TOPIC_PUBLISH_RATE``: a SEND of one of its producers emptied the bucket of its topic's
  ``publishRate``; released once the paused topics' buckets hold tokens again (Pulsar's
  ``TopicPublishRate`` reason, ``PublishRateLimiterImpl``; the session asks the core's
  ``PublishThrottle`` when to look again).

While any reason holds, the commands already received and not yet handled wait too: the
connection's bytes are decoded a chunk at a time, and the frames of a chunk after the one
that throttled it are handled once it is read again (Pulsar puts a ``FlowControlHandler``
after its frame decoder for this, ``PulsarChannelInitializer``).

:class:`PendingLimit` is the count with its two thresholds.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

__all__ = ["ConcurrencyLimit", "PendingLimit", "Throttle", "ThrottleType"]


class ThrottleType(enum.Enum):
    """A reason to stop reading a connection (the ``reason`` label of the
    ``pulsar_gateway_throttled_connections`` gauge)."""

    PENDING_PUBLISHES = "pending_publishes"
    PENDING_REQUESTS = "pending_requests"
    PUBLISH_BUFFER = "publish_buffer"
    OUTBOUND_BUFFER_FULL = "outbound_buffer_full"
    STORAGE_BACKLOG = "storage_backlog"
    TOPIC_PUBLISH_RATE = "topic_publish_rate"


class Throttle:
    """The reasons a connection is not read now.

    Args:
        on_change: called with True when the first reason appears (stop reading) and
            with False when the last one goes (read again).
        on_mark: told of each reason added (True) or removed (False), for the gauge.
    """

    __slots__ = ("_on_change", "_on_mark", "reasons")

    def __init__(
        self,
        on_change: Callable[[bool], None],
        on_mark: Callable[[ThrottleType, bool], None] | None = None,
    ) -> None:
        self.reasons: set[ThrottleType] = set()
        self._on_change = on_change
        self._on_mark = on_mark

    @property
    def throttled(self) -> bool:
        return bool(self.reasons)

    def mark(self, reason: ThrottleType) -> None:
        if reason in self.reasons:
            return
        self.reasons.add(reason)
        if self._on_mark is not None:
            self._on_mark(reason, True)
        if len(self.reasons) == 1:
            self._on_change(True)

    def unmark(self, reason: ThrottleType) -> None:
        if reason not in self.reasons:
            return
        self.reasons.discard(reason)
        if self._on_mark is not None:
            self._on_mark(reason, False)
        if not self.reasons:
            self._on_change(False)

    def clear(self) -> None:
        """Forget every reason (the connection is gone), telling the gauge."""
        for reason in list(self.reasons):
            self.unmark(reason)


class PendingLimit:
    """A count of things waiting (publishes, requests) that marks ``reason`` on ``throttle``
    when it reaches ``limit`` and unmarks it once it is down to half (Pulsar's
    ``resumeReadsThreshold = maxPendingSendRequests / 2``)."""

    __slots__ = ("_resume_at", "_throttle", "count", "limit", "reason")

    def __init__(self, throttle: Throttle, reason: ThrottleType, limit: int) -> None:
        self.count = 0
        self.limit = limit
        self.reason = reason
        self._resume_at = limit // 2
        self._throttle = throttle

    def add(self) -> None:
        self.count += 1
        if self.count >= self.limit:
            self._throttle.mark(self.reason)

    def done(self, count: int = 1) -> None:
        self.count -= count
        if self.count <= self._resume_at:
            self._throttle.unmark(self.reason)


class ConcurrencyLimit:
    """Requests of one kind in progress at once, gateway-wide: lookups, as Pulsar's
    ``maxConcurrentLookupRequest`` bounds them (a lookup past it is refused with
    TooManyRequests, ``ServerCnx.handleLookup``)."""

    __slots__ = ("in_use", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_use = 0

    def try_acquire(self) -> bool:
        if self.in_use >= self.limit:
            return False
        self.in_use += 1
        return True

    def release(self) -> None:
        self.in_use -= 1
