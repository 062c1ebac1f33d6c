"""What every hostile client shares: the counters it keeps (:class:`FloodStats`), the
socket it opens (:func:`open_socket`: non-blocking, a small receive buffer for those that
stop reading), its persistence (:func:`persist`: a session the gateway ends is started
again, as an attacker would) and the window the floods run in (:func:`run_floods`: until
the duration passes, a flood spends its byte budget, or the gateway's RSS passes the cap).

A flood is a coroutine that runs until cancelled or until its byte budget is spent, and
keeps its counts in a :class:`FloodStats` it was given, so a cancelled flood loses none.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

GIB = 1 << 30
MIB = 1 << 20
KIB = 1 << 10
NAMESPACE = "public/default"

#: What ends a hostile session from the gateway's side (a reset, a close, a refusal).
SESSION_ENDS = (OSError, EOFError)


@dataclass
class FloodStats:
    """What one hostile client (or a group of alike ones) did."""

    name: str
    #: bytes written to the gateway (whatever the kernel's socket buffer took)
    offered: int = 0
    #: payload bytes the gateway acknowledged (receipts, 200s) or stored; None: not measured
    accepted: int | None = None
    #: messages the gateway acknowledged or stored
    messages: int = 0
    #: connections (or HTTP requests) made
    sessions: int = 0
    #: sessions the gateway ended (a close, a reset) or refused
    disconnects: int = 0
    #: how things ended, by kind: HTTP statuses, SEND_ERROR codes, ... (a plain dict:
    #: ``dataclasses.asdict`` rebuilds a Counter wrongly)
    outcomes: dict[str, int] = field(default_factory=dict)
    #: what the flood chose as it went (a body size), for the report
    detail: str = ""

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def accept(self, payload_bytes: int, messages: int = 1) -> None:
        self.accepted = (self.accepted or 0) + payload_bytes
        self.messages += messages


def persistent(topic: str) -> str:
    """The full name of a topic of ``public/default`` (floods take local names)."""
    return f"persistent://{NAMESPACE}/{topic}"


async def open_socket(address: tuple[str, int], rcvbuf: int | None = None) -> socket.socket:
    """A non-blocking TCP connection to ``address`` for the loop's ``sock_*`` calls;
    ``rcvbuf`` sets ``SO_RCVBUF`` before connecting (it then also bounds the window the
    client advertises, and the kernel does not grow it)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, address)
    except BaseException:
        sock.close()
        raise
    return sock


async def persist(stats: FloodStats, session: Callable[[], Awaitable[None]]) -> None:
    """Run ``session`` again (after 0.1 s) each time the gateway ends it; return when it
    returns (its budget is spent)."""
    while True:
        stats.sessions += 1
        try:
            await session()
            return
        except SESSION_ENDS as exc:
            stats.disconnects += 1
            stats.count(f"ended: {type(exc).__name__}")
            await asyncio.sleep(0.1)


async def never() -> None:
    """Wait until cancelled: a hostile client that holds its connection and does nothing."""
    await asyncio.Event().wait()


@dataclass
class Window:
    """How a flood window ended."""

    seconds: float
    #: the gateway's RSS passed the cap and the floods were stopped
    aborted_at_cap: bool
    #: errors the floods raised (a flood that breaks is reported, not fatal)
    errors: list[str]


async def run_floods(
    floods: Sequence[Coroutine[Any, Any, None]],
    duration: float,
    over_cap: threading.Event,
    *,
    end_when_one_ends: bool = True,
) -> Window:
    """Run ``floods`` together for ``duration`` seconds, or until one of them spends its
    budget (with ``end_when_one_ends``), or until ``over_cap`` is set; then cancel them all
    and wait until they have closed their sockets."""
    started = time.monotonic()
    tasks = [asyncio.ensure_future(flood) for flood in floods]
    pending = set(tasks)
    aborted = False
    try:
        while pending:
            left = started + duration - time.monotonic()
            if left <= 0:
                break
            if over_cap.is_set():
                aborted = True
                break
            _done, pending = await asyncio.wait(
                pending, timeout=min(left, 0.1), return_when=asyncio.FIRST_COMPLETED
            )
            if end_when_one_ends and len(pending) < len(tasks):
                break
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    errors = [
        f"{type(exc).__name__}: {exc}"
        for task in tasks
        if not task.cancelled() and (exc := task.exception()) is not None
    ]
    return Window(time.monotonic() - started, aborted, errors)
