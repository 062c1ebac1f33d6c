"""Gates: a yes/no signal of backpressure that front ends obey.

A :class:`Gate` is open while some resource has room (the gateway-wide publish buffer,
the storage lane's queue) and closed while it is full. Its owner decides when to close and
when to open again (with hysteresis: Pulsar closes at the limit and opens again at half,
``ServerCnx.startSendOperation`` and ``completedSendOperation``); front ends react in
their own way: the binary protocol stops reading its connections (Netty's ``autoRead``
off, as Pulsar does), a WebSocket session stops reading frames, an HTTP request waits
before it starts. The gate itself does no I/O and holds no reference to what it guards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["Gate"]


class Gate:
    """Open or closed; tells its listeners of every change and lets coroutines wait until
    it is open.

    Args:
        name: what it guards, for logs and metrics.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.is_open = True
        #: times it closed (a metric: how often clients were held back)
        self.closings = 0
        self._listeners: list[Callable[[bool], None]] = []
        self._opened: asyncio.Event | None = None

    def subscribe(self, listener: Callable[[bool], None]) -> None:
        """Call ``listener(is_open)`` at every change."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[bool], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def close(self) -> None:
        if self.is_open:
            self.is_open = False
            self.closings += 1
            if self._opened is not None:
                self._opened.clear()
            self._tell()

    def open(self) -> None:
        if not self.is_open:
            self.is_open = True
            if self._opened is not None:
                self._opened.set()
            self._tell()

    def _tell(self) -> None:
        for listener in list(self._listeners):
            listener(self.is_open)

    async def wait_open(self) -> None:
        """Return once the gate is open (at once when it is)."""
        if self.is_open:
            return
        if self._opened is None:
            self._opened = asyncio.Event()
        await self._opened.wait()
