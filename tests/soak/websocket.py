"""Raw WebSocket clients of Pulsar's WebSocket API on the gateway's HTTP port: the RFC 6455
upgrade written by hand on a plain socket, so a client can stop reading for good (a
library's client reads in the background):

* :func:`slow_consumer`: a consumer session (``receiverQueueSize=1000000``, on a socket
  whose receive buffer is small) that never reads after the upgrade;
* :func:`unread_acks`: a producer session writing ``{"payload": <base64>}`` text frames as
  fast as its socket takes them, never reading an ack.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct
from urllib.parse import urlencode

from tests.soak.floods import GIB, KIB, NAMESPACE, FloodStats, never, open_socket, persist


class UpgradeRefused(EOFError):
    """The gateway answered the upgrade with something else than 101."""


def text_frame(data: bytes) -> bytes:
    """A client text frame of ``data``: masked, as a client must, with the all-zero key
    (any key is valid; this one leaves the payload as is, so a frame is built once)."""
    size = len(data)
    if size < 126:
        length = bytes((0x80 | size,))
    elif size < 1 << 16:
        length = bytes((0x80 | 126,)) + struct.pack(">H", size)
    else:
        length = bytes((0x80 | 127,)) + struct.pack(">Q", size)
    return b"\x81" + length + b"\x00\x00\x00\x00" + data


async def upgrade(
    http_address: tuple[str, int], path: str, *, rcvbuf: int | None = None
) -> socket.socket:
    """A socket upgraded to WebSocket on ``path``; what follows the 101's headers (early
    frames) is left unread or dropped."""
    loop = asyncio.get_running_loop()
    sock = await open_socket(http_address, rcvbuf)
    try:
        host, port = http_address
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        )
        await loop.sock_sendall(sock, request.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            data = await loop.sock_recv(sock, 4096)
            if not data:
                raise UpgradeRefused("the gateway closed the connection during the upgrade")
            answer += data
        status = answer.split(b"\r\n", 1)[0].decode(errors="replace")
        if status.split()[1:2] != ["101"]:
            raise UpgradeRefused(f"upgrade refused: {status}")
    except BaseException:
        sock.close()
        raise
    return sock


async def slow_consumer(
    http_address: tuple[str, int],
    topic: str,
    stats: FloodStats,
    *,
    subscription: str = "slow",
    receiver_queue_size: int = 1_000_000,
    rcvbuf: int = 64 * KIB,
) -> None:
    """A consumer session on ``topic`` (Shared, from the earliest message) asking for
    ``receiver_queue_size`` messages in flight, never reading; runs until cancelled."""
    query = urlencode(
        {
            "receiverQueueSize": receiver_queue_size,
            "subscriptionType": "Shared",
            "subscriptionInitialPosition": "Earliest",
        }
    )
    path = f"/ws/v2/consumer/persistent/{NAMESPACE}/{topic}/{subscription}?{query}"
    sock = await upgrade(http_address, path, rcvbuf=rcvbuf)
    stats.sessions += 1
    try:
        await never()
    finally:
        sock.close()


async def unread_acks(
    http_address: tuple[str, int],
    topic: str,
    stats: FloodStats,
    *,
    budget: int = GIB,
    size: int = KIB,
) -> None:
    """A producer session on ``topic`` writing one message of ``size`` random bytes per
    text frame, as fast as the socket takes them (64 frames a write), never reading, until
    ``budget`` bytes were written."""
    message = json.dumps({"payload": base64.b64encode(os.urandom(size)).decode()})
    frames = text_frame(message.encode()) * 64
    path = f"/ws/v2/producer/persistent/{NAMESPACE}/{topic}"
    loop = asyncio.get_running_loop()

    async def session() -> None:
        sock = await upgrade(http_address, path)
        try:
            while stats.offered < budget:
                await loop.sock_sendall(sock, frames)
                stats.offered += len(frames)
        finally:
            sock.close()

    await persist(stats, session)
