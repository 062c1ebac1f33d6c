"""Raw Pulsar binary-protocol clients, frames written by hand (``PulsarApi_pb2`` and
``crc32c``, nothing of the gateway's own code, so an older checkout is measured by the same
bytes), each on a non-blocking socket driven with the loop's ``sock_*`` calls:

* :func:`fast_producer`: a well-behaved producer as fast as receipts come back (at most
  ``window`` unreceipted, batching off, one message per SEND), answering PINGs;
* :func:`slow_consumer`: SUBSCRIBEs with a small ``SO_RCVBUF``, grants a huge FLOW and
  never reads its socket again;
* :func:`unread_receipts`: a producer that writes SENDs as fast as its socket takes them
  and never reads a receipt.

Topics are local names in ``public/default``. Frames (``codec.py`` of the gateway):
``[totalSize][commandSize][BaseCommand]``, and for a SEND
``[0x0e01][crc32c][metadataSize][MessageMetadata][payload]`` after the command.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import struct
import time

import crc32c

from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.soak.floods import GIB, KIB, FloodStats, never, open_socket, persist, persistent

T = pb.BaseCommand.Type
PROTOCOL_VERSION = 20
#: SENDs joined into one socket write.
SEND_BATCH = 64


class Refused(EOFError):
    """The gateway answered a request with an error (the session is over)."""


def encode(cmd: pb.BaseCommand) -> bytes:
    """A simple frame: ``[totalSize][commandSize][BaseCommand]``."""
    body = cmd.SerializeToString()
    return struct.pack(">II", len(body) + 4, len(body)) + body


def connect_frame() -> bytes:
    return encode(
        pb.BaseCommand(
            type=T.CONNECT,
            connect=pb.CommandConnect(client_version="soak", protocol_version=PROTOCOL_VERSION),
        )
    )


PONG = encode(pb.BaseCommand(type=T.PONG, pong=pb.CommandPong()))


def send_frame(producer_id: int, producer_name: str, sequence_id: int, payload: bytes) -> bytes:
    """One SEND of one message, with its checksum."""
    command = pb.BaseCommand(
        type=T.SEND,
        send=pb.CommandSend(producer_id=producer_id, sequence_id=sequence_id, num_messages=1),
    ).SerializeToString()
    metadata = pb.MessageMetadata(
        producer_name=producer_name,
        sequence_id=sequence_id,
        publish_time=int(time.time() * 1000),
    ).SerializeToString()
    body = struct.pack(">I", len(metadata)) + metadata + payload
    checksum = struct.pack(">I", crc32c.crc32c(body))
    total = 4 + len(command) + 6 + len(body)
    return struct.pack(">II", total, len(command)) + command + b"\x0e\x01" + checksum + body


def take_frame(buffer: bytearray) -> pb.BaseCommand | None:
    """The command of the first whole frame in ``buffer`` (removed from it; a payload is
    skipped), or None until more bytes arrive."""
    if len(buffer) < 8:
        return None
    (total,) = struct.unpack_from(">I", buffer)
    if len(buffer) < 4 + total:
        return None
    (size,) = struct.unpack_from(">I", buffer, 4)
    cmd = pb.BaseCommand.FromString(bytes(buffer[8 : 8 + size]))
    del buffer[: 4 + total]
    return cmd


class BinaryClient:
    """One raw connection, CONNECTed; PINGs met while reading are answered."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._loop = asyncio.get_running_loop()
        self._buffer = bytearray()
        self._request_ids = itertools.count(1)

    @classmethod
    async def open(cls, address: tuple[str, int], *, rcvbuf: int | None = None) -> BinaryClient:
        client = cls(await open_socket(address, rcvbuf))
        try:
            await client.send(connect_frame())
            await client.expect(T.CONNECTED)
        except BaseException:
            client.close()
            raise
        return client

    def close(self) -> None:
        self.sock.close()

    async def send(self, data: bytes) -> None:
        """Write ``data``, waiting while the socket's buffer is full."""
        await self._loop.sock_sendall(self.sock, data)

    async def read(self) -> pb.BaseCommand:
        """The next command from the gateway but PING (answered)."""
        while True:
            cmd = take_frame(self._buffer)
            if cmd is None:
                data = await self._loop.sock_recv(self.sock, 1 << 16)
                if not data:
                    raise EOFError("the gateway closed the connection")
                self._buffer += data
            elif cmd.type == T.PING:
                await self.send(PONG)
            else:
                return cmd

    async def expect(self, type_: int) -> pb.BaseCommand:
        """The next command, which must be of ``type_``."""
        cmd = await self.read()
        if cmd.type != type_:
            raise Refused(f"expected {T.Name(type_)}, got {str(cmd).strip()!r}")
        return cmd

    async def create_producer(self, topic: str, producer_id: int = 1) -> str:
        """A producer on ``topic``; its name (needed in each message's metadata)."""
        request = pb.CommandProducer(
            topic=topic, producer_id=producer_id, request_id=next(self._request_ids)
        )
        await self.send(encode(pb.BaseCommand(type=T.PRODUCER, producer=request)))
        return str((await self.expect(T.PRODUCER_SUCCESS)).producer_success.producer_name)

    async def subscribe(self, topic: str, subscription: str, consumer_id: int = 1) -> None:
        """A Shared consumer from the earliest message (what was produced before the
        subscription existed counts too)."""
        request = pb.CommandSubscribe(
            topic=topic,
            subscription=subscription,
            subType=pb.CommandSubscribe.Shared,
            consumer_id=consumer_id,
            request_id=next(self._request_ids),
            initialPosition=pb.CommandSubscribe.Earliest,
        )
        await self.send(encode(pb.BaseCommand(type=T.SUBSCRIBE, subscribe=request)))
        await self.expect(T.SUCCESS)

    async def flow(self, consumer_id: int, permits: int) -> None:
        flow = pb.CommandFlow(consumer_id=consumer_id, messagePermits=permits)
        await self.send(encode(pb.BaseCommand(type=T.FLOW, flow=flow)))


class _Receipts:
    """The producer's window: SENDs written and not yet answered."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.in_flight = 0
        self.changed = asyncio.Event()

    def room(self) -> int:
        return self.window - self.in_flight

    async def wait_change(self, reader: asyncio.Task[None]) -> None:
        """Until a receipt arrives; raises what ended the reader."""
        self.changed.clear()
        changed = asyncio.ensure_future(self.changed.wait())
        try:
            await asyncio.wait({reader, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
        if reader.done():
            reader.result()


async def _read_receipts(
    client: BinaryClient, receipts: _Receipts, stats: FloodStats, size: int
) -> None:
    while True:
        cmd = await client.read()
        if cmd.type == T.SEND_RECEIPT:
            stats.accept(size)
        elif cmd.type == T.SEND_ERROR:
            stats.count(f"SEND_ERROR {pb.ServerError.Name(cmd.send_error.error)}")
        elif cmd.type == T.CLOSE_PRODUCER:
            raise EOFError("the gateway closed the producer")
        else:
            continue
        receipts.in_flight -= 1
        receipts.changed.set()


async def fast_producer(
    address: tuple[str, int],
    topic: str,
    stats: FloodStats,
    *,
    budget: int = GIB,
    size: int = KIB,
    window: int = 1000,
) -> None:
    """Publish ``size``-byte messages to ``topic`` as fast as receipts allow (at most
    ``window`` unreceipted) until ``budget`` bytes were written and every receipt is in.
    ``stats.accepted`` counts receipted payload bytes."""

    async def session() -> None:
        client = await BinaryClient.open(address)
        try:
            name = await client.create_producer(persistent(topic))
            stats.accepted = stats.accepted or 0
            payload = os.urandom(size)
            receipts = _Receipts(window)
            reader = asyncio.create_task(_read_receipts(client, receipts, stats, size))
            try:
                sequence = itertools.count()
                while stats.offered < budget or receipts.in_flight:
                    room = min(receipts.room(), SEND_BATCH)
                    if room <= 0 or stats.offered >= budget:
                        await receipts.wait_change(reader)
                        continue
                    frames = b"".join(
                        send_frame(1, name, next(sequence), payload) for _ in range(room)
                    )
                    receipts.in_flight += room
                    await client.send(frames)
                    stats.offered += len(frames)
            finally:
                reader.cancel()
        finally:
            client.close()

    await persist(stats, session)


async def slow_consumer(
    address: tuple[str, int],
    topic: str,
    stats: FloodStats,
    *,
    subscription: str = "slow",
    permits: int = 1_000_000,
    rcvbuf: int = 64 * KIB,
) -> None:
    """SUBSCRIBE (Shared, from the earliest message) on a socket whose receive buffer is
    ``rcvbuf``, FLOW ``permits``, then never read again; runs until cancelled."""
    client = await BinaryClient.open(address, rcvbuf=rcvbuf)
    stats.sessions += 1
    try:
        await client.subscribe(persistent(topic), subscription)
        await client.flow(1, permits)
        await never()
    finally:
        client.close()


async def unread_receipts(
    address: tuple[str, int],
    topic: str,
    stats: FloodStats,
    *,
    budget: int = GIB,
    size: int = KIB,
) -> None:
    """Create a producer, then write SENDs of ``size``-byte messages as fast as the socket
    takes them, never reading anything, until ``budget`` bytes were written."""

    async def session() -> None:
        client = await BinaryClient.open(address)
        try:
            name = await client.create_producer(persistent(topic))
            payload = os.urandom(size)
            sequence = itertools.count()
            while stats.offered < budget:
                frames = b"".join(
                    send_frame(1, name, next(sequence), payload) for _ in range(SEND_BATCH)
                )
                await client.send(frames)
                stats.offered += len(frames)
        finally:
            client.close()

    await persist(stats, session)
