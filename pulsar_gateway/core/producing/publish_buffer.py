"""The gateway-wide publish buffer: bytes of published entries Redis has not stored yet.

Pulsar's ``maxMessagePublishBufferSizeInMB``: "Max memory size for broker handling messages
sending from producers. If the processing message size exceed this value, broker will stop
read data from the connection" (``ServiceConfiguration``). Pulsar counts each SEND's bytes
from when it is read until its receipt is handed to the connection, pauses every producing
connection once the count reaches the limit and resumes them below half
(``ServerCnx.startSendOperation`` / ``completedSendOperation``). Here every persistent
producer counts its entries from :meth:`Producer.publish` until Redis answers the append,
and the buffer's :class:`~pulsar_gateway.core.gate.Gate` tells the front ends: the binary
protocol stops reading connections with producers, WebSocket producers stop reading frames.

REST produce takes its share differently (:meth:`PublishBuffer.reserve`): a request holds a
reservation for what it costs while it is served, and the reservations of all requests
together get at most half of the limit. A flood of REST requests then waits for its own
turn and leaves the other half to streaming producers, which would otherwise never be
read: a waiting request takes its place in the same loop turn the buffer drains, before a
paused connection's bytes are read again.
"""

from __future__ import annotations

import asyncio

from pulsar_gateway.core.gate import Gate

__all__ = ["PublishBuffer"]


class PublishBuffer:
    """Counts bytes in flight against ``limit`` (0 = no limit): the gate closes when they
    reach it and opens again once they are below half of it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._resume_at = limit // 2
        self.gate = Gate("publish buffer")
        #: bytes of REST reservations, at most half of the limit (one request at least)
        self.reserved = 0
        self._released: asyncio.Event | None = None

    def acquire(self, size: int) -> None:
        """Count ``size`` bytes that were just published."""
        self.size += size
        if self.limit and self.size >= self.limit:
            self.gate.close()

    def release(self, size: int) -> None:
        """Redis answered for ``size`` bytes (stored, refused or failed)."""
        self.size -= size
        if self.size < self._resume_at or not self.limit:
            self.gate.open()
        if self._released is not None:
            self._released.set()

    def _has_room(self, size: int) -> bool:
        if not self.limit:
            return True
        if not self.gate.is_open:
            return False
        return not self.reserved or self.reserved + size <= self.limit // 2

    async def reserve(self, size: int) -> None:
        """Wait until the buffer has room for a reservation of ``size`` bytes (the gate is
        open and the reservations in progress leave room in half the limit, or there are
        none), then count it; :meth:`unreserve` gives it back."""
        while not self._has_room(size):
            if self._released is None:
                self._released = asyncio.Event()
            self._released.clear()
            await self._released.wait()
        self.reserved += size
        self.acquire(size)

    def unreserve(self, size: int) -> None:
        self.reserved -= size
        self.release(size)
