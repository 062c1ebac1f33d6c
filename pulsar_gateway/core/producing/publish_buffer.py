"""The gateway-wide publish buffer: bytes of published entries Redis has not stored yet.

Pulsar's ``maxMessagePublishBufferSizeInMB``: "Max memory size for broker handling messages
sending from producers. If the processing message size exceed this value, broker will stop
read data from the connection" (``ServiceConfiguration``). Pulsar counts each SEND's bytes
from when it is read until its receipt is handed to the connection, pauses every producing
connection once the count reaches the limit and resumes them below half
(``ServerCnx.startSendOperation`` / ``completedSendOperation``). Here every persistent and
non-persistent producer counts its entries from :meth:`Producer.publish` until Redis
answers the append, and the buffer's :class:`~pulsar_gateway.core.gate.Gate` tells the front
ends: the binary protocol stops reading connections with producers, WebSocket producers stop
reading frames, REST produce waits before it reads a body (and reserves the body's size
meanwhile, :meth:`PublishBuffer.reserve`).
"""

from __future__ import annotations

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

    async def reserve(self, size: int) -> None:
        """Wait until the buffer has room, then count ``size`` bytes (released by the
        caller with :meth:`release`): a REST request's body while it is read and parsed."""
        await self.gate.wait_open()
        self.acquire(size)
