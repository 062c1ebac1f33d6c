"""A connection storm on the binary port: ``clients`` concurrent raw clients, each in a
loop: connect, write 64-256 random bytes (not a frame), read until the gateway closes or
0.5 s passed, close. What it costs everyone else is measured beside it by the probers of
:mod:`tests.soak.measure`.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time

from tests.soak.floods import FloodStats, open_socket

#: How long a storm client waits for the gateway to close its connection.
LINGER = 0.5


async def _until_closed(sock: socket.socket) -> str:
    """Read until the gateway closes ``sock`` or :data:`LINGER` passed; how it ended."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + LINGER
    while (left := deadline - time.monotonic()) > 0:
        try:
            data = await asyncio.wait_for(loop.sock_recv(sock, 4096), left)
        except TimeoutError:
            break
        if not data:
            return "closed by the gateway"
    return f"still open after {LINGER} s"


async def _storm_client(address: tuple[str, int], stats: FloodStats, rng: random.Random) -> None:
    loop = asyncio.get_running_loop()
    while True:
        try:
            sock = await open_socket(address)
        except OSError as exc:
            stats.disconnects += 1
            stats.count(f"connect failed: {type(exc).__name__}")
            await asyncio.sleep(0.01)
            continue
        stats.sessions += 1
        try:
            garbage = rng.randbytes(rng.randint(64, 256))
            await loop.sock_sendall(sock, garbage)
            stats.offered += len(garbage)
            outcome = await _until_closed(sock)
        except OSError as exc:
            outcome = f"reset: {type(exc).__name__}"
        finally:
            sock.close()
        stats.count(outcome)


async def connection_storm(
    address: tuple[str, int], stats: FloodStats, *, clients: int = 64, seed: int = 1
) -> None:
    """Run ``clients`` storm clients on the binary port ``address`` until cancelled;
    ``stats.sessions`` counts the connections made, ``stats.outcomes`` how they ended."""
    await asyncio.gather(
        *(_storm_client(address, stats, random.Random(seed * 1000 + n)) for n in range(clients))
    )
