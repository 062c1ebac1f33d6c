"""pulsar-perf for the gateway: a load generator of the Pulsar binary protocol lean enough
that one process out-runs one gateway core.

Usage::

    .venv/bin/python bench/perf.py produce|consume|e2e [--service-url pulsar://HOST:6650[,...]]
        [--start [--gateways G] [--workers W]] [--rate R] [--size B] [--batch N] [--topics T]
        [--producers P] [--consumers C] [--subscription-type Shared] [--ack grouped|each|none]
        [--connections K] [--processes N] [--duration S] [--warmup S]
        [--gateway-pid PID] [--redis-pid PID] [--json PATH]

``produce`` publishes as fast as allowed (``--rate`` 0: as fast as receipts come back, at
most ``--max-pending`` unreceipted per producer, as pulsar-perf's ``maxPendingMessages``);
``consume`` drains what the topics hold (fill them first with ``produce`` or ``--prefill``);
``e2e`` runs consumers and producers together and reports end-to-end latency (publish to
receive). ``--start`` runs the whole thing against a redis-server and a gateway it starts
(temp dir, free ports), so their CPU is known; otherwise give ``--gateway-pid`` and
``--redis-pid`` for CPU per message.

Why not the official client: the Python ``pulsar-client`` tops out near 30k msg/s per
process, so it measures itself. Here a SEND frame is a few bytes of hand-written protobuf
(``CommandSend`` and ``MessageMetadata`` hold only the required fields, encoded once per
message with the CRC32C from the ``crc32c`` package), frames are written in one
``transport.write`` per burst, and replies are parsed with the upb protobuf runtime only as
far as needed (the sequence id of a receipt, the message id and payload offset of a MESSAGE).
ACKs and FLOWs are hand-written too. The official client stays the correctness reference
(bench/bench.py measures it); this tool measures the gateway.

Measured: the window of ``--duration`` seconds after ``--warmup`` (both while the load
runs). In ``consume`` mode the consumers get their first permits when the warm-up starts
(use ``--warmup 0`` to count from the first message) and the rate is taken over the time the
backlog took to drain when it drained early; prefill at least rate x duration messages for
the CPU figures to cover only draining. Throughput counts receipts (produce) or receptions
(consume, e2e) inside the window.
Latency: publish = SEND written -> receipt read; end-to-end = SEND written -> MESSAGE read
(the first 12 bytes of each payload are ``PERF`` and the send time, ``time.monotonic_ns``,
which is one clock for every process of a Linux host). CPU: user+system seconds of the
gateway and redis-server over the window (``/proc/PID/stat``), divided by the messages
counted; and of the load generator's own processes, to show it is not the limit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import statistics
import struct
import sys
import time
from array import array
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import crc32c
import psutil

from pulsar_gateway.proto import PulsarApi_pb2 as pb

T = pb.BaseCommand
MAGIC_PERF = b"PERF"
NS = 1_000_000_000

SUBSCRIPTION_TYPES = {"Exclusive": 0, "Shared": 1, "Failover": 2, "Key_Shared": 3}


# -- hand-written protobuf for the hot frames ------------------------------------------------


def varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field_bytes(tag: int, data: bytes) -> bytes:
    return bytes((tag,)) + varint(len(data)) + data


def _simple_frame(command: bytes) -> bytes:
    return struct.pack(">II", len(command) + 4, len(command)) + command


class SendEncoder:
    """SEND frames of one producer: ``BaseCommand{type: SEND, send{producer_id,
    sequence_id[, num_messages]}}`` then the checksummed ``MessageMetadata{producer_name,
    sequence_id, publish_time[, num_messages_in_batch]}`` and payload (docs/binary_protocol.md
    "Framing")."""

    def __init__(self, producer_id: int, producer_name: str, size: int, batch: int) -> None:
        self.batch = batch
        self._pid = b"\x08" + varint(producer_id)
        self._name = _field_bytes(0x0A, producer_name.encode())
        self._filler = b"\x00" * max(0, size - 12)
        self._count = b"\x18" + varint(batch) if batch > 1 else b""
        self._in_batch = b"\x58" + varint(batch) if batch > 1 else b""
        # one batched message: SingleMessageMetadata{payload_size} (field 3, required)
        single = b"\x18" + varint(12 + len(self._filler))
        self._single = struct.pack(">I", len(single)) + single

    def frame(self, sequence_id: int, now_ns: int, publish_ms: int) -> bytes:
        seq = varint(sequence_id)
        send = self._pid + b"\x10" + seq + self._count
        command = b"\x08\x06\x32" + varint(len(send)) + send
        metadata = self._name + b"\x10" + seq + b"\x18" + varint(publish_ms) + self._in_batch
        message = MAGIC_PERF + struct.pack(">Q", now_ns) + self._filler
        payload = message if self.batch == 1 else (self._single + message) * self.batch
        body = struct.pack(">I", len(metadata)) + metadata + payload
        checksum = struct.pack(">I", crc32c.crc32c(body))
        total = 4 + len(command) + 6 + len(body)
        return struct.pack(">II", total, len(command)) + command + b"\x0e\x01" + checksum + body


def ack_frame(consumer_id: int, message_ids: list[bytes]) -> bytes:
    """``CommandAck{consumer_id, ack_type: Individual, message_id...}``; the ids are the
    ``MessageIdData`` bytes of the MESSAGEs, passed back untouched."""
    ack = b"\x08" + varint(consumer_id) + b"\x10\x00"
    ack += b"".join(_field_bytes(0x1A, m) for m in message_ids)
    return _simple_frame(b"\x08\x0a" + _field_bytes(0x52, ack))


def flow_frame(consumer_id: int, permits: int) -> bytes:
    flow = b"\x08" + varint(consumer_id) + b"\x10" + varint(permits)
    return _simple_frame(b"\x08\x0b" + _field_bytes(0x5A, flow))


def encode(command: pb.BaseCommand) -> bytes:
    return _simple_frame(command.SerializeToString())


# -- one connection -----------------------------------------------------------------------------


class PerfError(RuntimeError):
    pass


@dataclass
class Stats:
    """What one process measured inside the window."""

    published: int = 0
    received: int = 0
    publish_latency_us: array[int] = field(default_factory=lambda: array("q"))
    e2e_latency_us: array[int] = field(default_factory=lambda: array("q"))
    cpu_seconds: float = 0.0
    #: when the last message inside the window was received (a drained backlog ends early)
    last_received_ns: int = 0


class Window:
    """The measured window, in ``time.monotonic_ns``."""

    def __init__(self, start_ns: int, end_ns: int) -> None:
        self.start_ns = start_ns
        self.end_ns = end_ns

    def __contains__(self, t: int) -> bool:
        return self.start_ns <= t < self.end_ns


class Connection(asyncio.Protocol):
    """One TCP connection to a gateway; frames parsed from one growing buffer."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._requests: dict[int, asyncio.Future[pb.BaseCommand]] = {}
        self._next_request = 0
        self.connected: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.on_receipt: dict[int, Callable[[int], None]] = {}
        self.on_message: dict[int, Callable[[bytes, memoryview], None]] = {}
        self.on_message_batch_end: list[Callable[[], None]] = []

    def request_id(self) -> int:
        self._next_request += 1
        return self._next_request

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        cmd = pb.BaseCommand(type=T.CONNECT)
        cmd.connect.client_version = "pulsar-gateway-perf"
        cmd.connect.protocol_version = 20
        transport.write(encode(cmd))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.connected.done():
            self.connected.set_exception(PerfError(f"connection lost: {exc}"))
        for fut in self._requests.values():
            if not fut.done():
                fut.set_exception(PerfError(f"connection lost: {exc}"))

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        offset = 0
        end = len(buffer)
        view = memoryview(buffer)
        try:
            while end - offset >= 8:
                total, cmd_size = struct.unpack_from(">II", buffer, offset)
                frame_end = offset + 4 + total
                if frame_end > end:
                    break
                cmd_start = offset + 8
                cmd = pb.BaseCommand.FromString(view[cmd_start : cmd_start + cmd_size])
                kind = cmd.type
                if kind == T.SEND_RECEIPT:
                    r = cmd.send_receipt
                    self.on_receipt[r.producer_id](r.sequence_id)
                elif kind == T.MESSAGE:
                    m = cmd.message
                    self.on_message[m.consumer_id](
                        m.message_id.SerializeToString(),
                        view[cmd_start + cmd_size : frame_end],
                    )
                else:
                    self._control(cmd)
                offset = frame_end
        finally:
            view.release()
        del buffer[:offset]
        for done in self.on_message_batch_end:
            done()

    def _control(self, cmd: pb.BaseCommand) -> None:
        kind = cmd.type
        if kind == T.CONNECTED:
            self.connected.set_result(None)
        elif kind == T.PING:
            assert self.transport is not None
            self.transport.write(encode(pb.BaseCommand(type=T.PONG)))
        elif kind in (T.SUCCESS, T.PRODUCER_SUCCESS, T.ERROR):
            request_id = {
                T.SUCCESS: lambda: cmd.success.request_id,
                T.PRODUCER_SUCCESS: lambda: cmd.producer_success.request_id,
                T.ERROR: lambda: cmd.error.request_id,
            }[kind]()
            fut = self._requests.pop(request_id, None)
            if fut is not None and not fut.done():
                if kind == T.ERROR:
                    fut.set_exception(PerfError(f"{cmd.error.error}: {cmd.error.message}"))
                else:
                    fut.set_result(cmd)
        elif kind == T.SEND_ERROR:
            raise PerfError(f"SEND_ERROR {cmd.send_error.error}: {cmd.send_error.message}")
        elif kind in (T.CLOSE_PRODUCER, T.CLOSE_CONSUMER):
            raise PerfError(f"the gateway closed a producer or consumer: {cmd}")

    async def call(self, cmd: pb.BaseCommand, request_id: int) -> pb.BaseCommand:
        fut: asyncio.Future[pb.BaseCommand] = asyncio.get_running_loop().create_future()
        self._requests[request_id] = fut
        assert self.transport is not None
        self.transport.write(encode(cmd))
        return await asyncio.wait_for(fut, 30)


# -- producers and consumers ---------------------------------------------------------------------


class Pacer:
    """How many SENDs (of ``batch`` messages each) are due at ``rate`` messages/s since the
    pacer started; ``rate`` 0 sets no limit."""

    def __init__(self, rate: float, batch: int) -> None:
        self.rate, self.batch = rate, batch
        self.start = time.monotonic_ns()
        self.sent = 0

    def due(self, now: int, most: int) -> int:
        if self.rate <= 0:
            return most
        return min(most, int((now - self.start) * self.rate / self.batch / NS) - self.sent)

    async def wait(self, now: int) -> None:
        """Sleep until the next SEND is due."""
        next_at = self.start + (self.sent + 1) * self.batch * NS / self.rate
        await asyncio.sleep(max(0.0, (next_at - now) / NS))


class Producer:
    def __init__(
        self, conn: Connection, producer_id: int, topic: str, args: argparse.Namespace
    ) -> None:
        self.conn = conn
        self.producer_id = producer_id
        self.topic = topic
        self.args = args
        self.pending: dict[int, int] = {}
        self.sequence_id = 0
        self.room = asyncio.Event()
        self.encoder: SendEncoder | None = None

    async def open(self) -> None:
        rid = self.conn.request_id()
        cmd = pb.BaseCommand(type=T.PRODUCER)
        cmd.producer.topic = self.topic
        cmd.producer.producer_id = self.producer_id
        cmd.producer.request_id = rid
        reply = await self.conn.call(cmd, rid)
        name = reply.producer_success.producer_name
        self.encoder = SendEncoder(self.producer_id, name, self.args.size, self.args.batch)
        self.conn.on_receipt[self.producer_id] = self._receipt

    def _receipt(self, sequence_id: int) -> None:
        sent = self.pending.pop(sequence_id, None)
        if sent is None:
            return
        now = time.monotonic_ns()
        if now in self.window:
            self.stats.published += self.args.batch
            self.stats.publish_latency_us.append((now - sent) // 1000)
        self.room.set()

    async def run(self, stats: Stats, window: Window, rate: float, stop_ns: int) -> None:
        """Send until ``stop_ns``: at ``rate`` messages/s (0: as receipts allow), never more
        than ``--max-pending`` messages unreceipted."""
        self.stats, self.window = stats, window
        assert self.encoder is not None and self.conn.transport is not None
        frame, transport = self.encoder.frame, self.conn.transport
        batch = self.args.batch
        max_pending = max(1, self.args.max_pending // batch)
        burst = max(1, self.args.burst // batch)
        pacer = Pacer(rate, batch)
        while True:
            now = time.monotonic_ns()
            if now >= stop_ns:
                break
            room = max_pending - len(self.pending)
            n = pacer.due(now, min(room, burst))
            if n <= 0:
                if room <= 0:
                    self.room.clear()
                    # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a
                    # cancellation that meets the event (the prefill's cancel, then an
                    # await of the task that never ends while it keeps sending)
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(1):
                            await self.room.wait()
                else:  # the rate holds it back
                    await pacer.wait(now)
                continue
            publish_ms = time.time_ns() // 1_000_000
            frames = []
            for _ in range(n):
                self.sequence_id += 1
                self.pending[self.sequence_id] = now
                frames.append(frame(self.sequence_id, now, publish_ms))
            transport.write(b"".join(frames))
            pacer.sent += n
            await asyncio.sleep(0)
        # let the receipts of what is in flight come back (counted while in the window)
        deadline = time.monotonic() + 10
        while self.pending and time.monotonic() < deadline:
            await asyncio.sleep(0.01)


class Consumer:
    def __init__(
        self,
        conn: Connection,
        consumer_id: int,
        topic: str,
        subscription: str,
        args: argparse.Namespace,
    ) -> None:
        self.conn = conn
        self.consumer_id = consumer_id
        self.topic = topic
        self.subscription = subscription
        self.args = args
        self.queue = args.receiver_queue
        self.since_flow = 0
        self.to_ack: list[bytes] = []
        self.stats = Stats()
        self.window = Window(0, 0)
        #: messages received in the window by every process (``--messages``), and what this
        #: consumer has not added to it yet
        self.total: Any = None
        self._uncounted = 0

    async def open(self) -> None:
        rid = self.conn.request_id()
        cmd = pb.BaseCommand(type=T.SUBSCRIBE)
        s = cmd.subscribe
        s.topic = self.topic
        s.subscription = self.subscription
        s.subType = SUBSCRIPTION_TYPES[self.args.subscription_type]  # type: ignore[assignment]
        s.consumer_id = self.consumer_id
        s.request_id = rid
        s.initialPosition = pb.CommandSubscribe.Earliest
        self.conn.on_message[self.consumer_id] = self._message
        self.conn.on_message_batch_end.append(self._flush)
        await self.conn.call(cmd, rid)

    def start(self) -> None:
        """The first permits (``CommandFlow``): messages flow from now on."""
        assert self.conn.transport is not None
        self.conn.transport.write(flow_frame(self.consumer_id, self.queue))

    def measure(self, stats: Stats, window: Window) -> None:
        self.stats, self.window = stats, window

    def _message(self, message_id: bytes, section: memoryview) -> None:
        now = time.monotonic_ns()
        # section: [0x0e02 size broker metadata] 0x0e01 crc metadataSize metadata payload
        offset = 0
        if section[0:2] == b"\x0e\x02":
            offset += 6 + struct.unpack_from(">I", section, 2)[0]
        offset += 6
        meta_size = struct.unpack_from(">I", section, offset)[0]
        meta_start = offset + 4
        payload = meta_start + meta_size
        n = 1
        if self.args.batch > 1:
            metadata = pb.MessageMetadata.FromString(section[meta_start:payload])
            n = metadata.num_messages_in_batch or 1
            if n > 1:  # the first message of the batch: skip its SingleMessageMetadata
                payload += 4 + struct.unpack_from(">I", section, payload)[0]
        if now in self.window:
            self.stats.received += n
            self.stats.last_received_ns = now
            self._uncounted += n
            if section[payload : payload + 4] == MAGIC_PERF:
                sent = struct.unpack_from(">Q", section, payload + 4)[0]
                self.stats.e2e_latency_us.append((now - sent) // 1000)
        self.since_flow += n
        if self.args.ack != "none":
            self.to_ack.append(message_id)

    def _flush(self) -> None:
        if self._uncounted and self.total is not None:
            with self.total.get_lock():
                self.total.value += self._uncounted
            self._uncounted = 0
        transport = self.conn.transport
        if transport is None:
            return
        out = []
        if self.to_ack:
            if self.args.ack == "each":
                out += [ack_frame(self.consumer_id, [m]) for m in self.to_ack]
            else:
                out.append(ack_frame(self.consumer_id, self.to_ack))
            self.to_ack = []
        # as the official client: permits back once half the receiver queue is consumed
        if self.since_flow >= self.queue // 2:
            out.append(flow_frame(self.consumer_id, self.since_flow))
            self.since_flow = 0
        if out:
            transport.write(b"".join(out))


# -- the same hop on raw Redis (--target redis) -------------------------------------------------


def raw_key(topic: str) -> str:
    return f"perf-raw:{{{topic}}}"


class RawProducer:
    """XADD of one entry per message (field ``m``: the same payload), a pipeline per burst,
    one burst in flight: what the gateway's append costs Redis, without the gateway."""

    def __init__(self, client: Any, topic: str, args: argparse.Namespace) -> None:
        self.client = client
        self.key = raw_key(topic)
        self.args = args
        self.filler = b"\x00" * max(0, args.size - 12)

    async def open(self) -> None:
        await self.client.delete(self.key)

    async def run(self, stats: Stats, window: Window, rate: float, stop_ns: int) -> None:
        pacer = Pacer(rate, 1)  # one entry per message
        while True:
            now = time.monotonic_ns()
            if now >= stop_ns:
                break
            n = pacer.due(now, self.args.burst)
            if n <= 0:
                await pacer.wait(now)
                continue
            pipe = self.client.pipeline(transaction=False)
            message = MAGIC_PERF + struct.pack(">Q", now) + self.filler
            for _ in range(n):
                pipe.xadd(self.key, {"m": message})
            await pipe.execute()
            pacer.sent += n
            done = time.monotonic_ns()
            if done in window:
                stats.published += n
                stats.publish_latency_us.extend([(done - now) // 1000] * n)


class RawConsumer:
    """XREADGROUP ... BLOCK + XACK of what was read: a consumer group's hop without the
    gateway."""

    def __init__(self, client: Any, topic: str, args: argparse.Namespace) -> None:
        self.client = client
        self.key = raw_key(topic)
        self.args = args
        self.stats = Stats()
        self.window = Window(0, 0)
        self.total: Any = None
        self.task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        with contextlib.suppress(Exception):  # BUSYGROUP: it exists
            await self.client.xgroup_create(self.key, self.args.subscription, "0", mkstream=True)

    def measure(self, stats: Stats, window: Window) -> None:
        self.stats, self.window = stats, window

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        group, key = self.args.subscription, self.key
        while True:
            reply = await self.client.xreadgroup(
                group, "c", {key: ">"}, count=self.args.receiver_queue, block=100
            )
            if not reply:
                continue
            entries = reply[0][1]
            now = time.monotonic_ns()
            counted = 0
            for _, fields in entries:
                payload = fields[b"m"]
                if now in self.window:
                    counted += 1
                    if payload[:4] == MAGIC_PERF:
                        sent = struct.unpack_from(">Q", payload, 4)[0]
                        self.stats.e2e_latency_us.append((now - sent) // 1000)
            if counted:
                self.stats.received += counted
                self.stats.last_received_ns = now
                with self.total.get_lock():
                    self.total.value += counted
            if self.args.ack != "none":
                await self.client.xack(key, group, *[entry_id for entry_id, _ in entries])


async def raw_clients(
    args: argparse.Namespace, topics: list[str], index: int
) -> tuple[list[Any], list[Any], list[Any]]:
    """Producers and consumers of this process on raw Redis, each on its own connection."""
    import redis.asyncio as aioredis

    clients: list[Any] = []
    producers: list[Any] = []
    consumers: list[Any] = []

    def connect() -> Any:
        client = aioredis.Redis.from_url(args.redis_url, protocol=2)
        clients.append(client)
        return client

    if args.mode in ("consume", "e2e"):
        for i in share(args.topics * args.consumers, args.processes, index):
            consumer = RawConsumer(connect(), topics[i % args.topics], args)
            await consumer.open()
            consumers.append(consumer)
    if args.mode in ("produce", "e2e"):
        for i in share(args.topics * args.producers, args.processes, index):
            producer = RawProducer(connect(), topics[i % args.topics], args)
            producers.append(producer)
    return clients, producers, consumers


# -- one process ---------------------------------------------------------------------------------


def service_addresses(args: argparse.Namespace) -> list[tuple[str, int]]:
    """``--service-url``: one gateway or several, comma-separated (connections are spread
    over them round-robin)."""
    out = []
    for item in args.service_url.split(","):
        url = urlparse(item.strip())
        out.append((url.hostname or "127.0.0.1", url.port or 6650))
    return out


def topic_names(args: argparse.Namespace) -> list[str]:
    return [f"persistent://public/default/{args.topic_prefix}-{i}" for i in range(args.topics)]


def share(items: int, parts: int, index: int) -> list[int]:
    """The items (0..items-1) process ``index`` of ``parts`` takes, round-robin."""
    return [i for i in range(items) if i % parts == index]


def finished(args: argparse.Namespace, total: Any, end_ns: int) -> bool:
    """The window is over: its time is up, or ``--messages`` were received."""
    if time.monotonic_ns() >= end_ns:
        return True
    return bool(args.messages) and total.value >= args.messages


async def worker_main(
    args: argparse.Namespace, index: int, ready: Any, go: Any, results: Any, total: Any
) -> None:
    loop = asyncio.get_running_loop()
    topics = topic_names(args)
    connections: list[Connection] = []
    producers: list[Any] = []
    consumers: list[Any] = []
    raw: list[Any] = []
    if args.target == "redis":
        raw, producers, consumers = await raw_clients(args, topics, index)
    else:
        addresses = service_addresses(args)
        for k in range(args.connections):
            host, port = addresses[(index * args.connections + k) % len(addresses)]
            _, conn = await loop.create_connection(Connection, host, port)
            await asyncio.wait_for(conn.connected, 30)
            connections.append(conn)
    if args.mode in ("consume", "e2e") and not raw:
        count = args.topics * args.consumers
        for k, i in enumerate(share(count, args.processes, index)):
            conn = connections[k % len(connections)]
            consumer = Consumer(conn, 1000 + k, topics[i % args.topics], args.subscription, args)
            await consumer.open()
            consumers.append(consumer)
    if args.mode in ("produce", "e2e") and not raw:
        count = args.topics * args.producers
        for k, i in enumerate(share(count, args.processes, index)):
            conn = connections[k % len(connections)]
            producer = Producer(conn, 1 + k, topics[i % args.topics], args)
            await producer.open()
            producers.append(producer)
    ready.put(index)
    start_ns, end_ns = await loop.run_in_executor(None, go.get)
    window = Window(start_ns, end_ns)
    stats = Stats()
    for consumer in consumers:
        consumer.measure(stats, window)
        consumer.total = total
        consumer.start()
    me = psutil.Process()
    cpu_before: float | None = None

    async def cpu_mark() -> None:
        nonlocal cpu_before
        await asyncio.sleep(max(0.0, (start_ns - time.monotonic_ns()) / NS))
        t = me.cpu_times()
        cpu_before = t.user + t.system
        while not finished(args, total, end_ns):
            await asyncio.sleep(0.005)
        # --messages ended the window early: what arrives from now on is not counted, as
        # the parent's CPU figures end now too (they would be spread over messages the
        # gateway's CPU of the window did not pay for)
        window.end_ns = min(window.end_ns, time.monotonic_ns())
        t = me.cpu_times()
        stats.cpu_seconds = t.user + t.system - cpu_before

    marks = asyncio.create_task(cpu_mark())
    rate = args.rate / max(1, args.topics * args.producers)
    await asyncio.gather(*(p.run(stats, window, rate, end_ns) for p in producers), marks)
    if not producers:
        await asyncio.sleep(0.2)
    for conn in connections:
        if conn.transport is not None:
            conn.transport.close()
    for consumer in consumers:
        task = getattr(consumer, "task", None)
        if task is not None:
            task.cancel()
    for client in raw:
        await client.aclose()
    results.put((index, _pack(stats)))


def _pack(stats: Stats) -> dict[str, Any]:
    d = asdict(stats)
    d["publish_latency_us"] = stats.publish_latency_us.tobytes()
    d["e2e_latency_us"] = stats.e2e_latency_us.tobytes()
    return d


def _unpack(d: dict[str, Any]) -> Stats:
    publish, e2e = array("q"), array("q")
    publish.frombytes(d["publish_latency_us"])
    e2e.frombytes(d["e2e_latency_us"])
    return Stats(
        d["published"],
        d["received"],
        publish,
        e2e,
        d["cpu_seconds"],
        d["last_received_ns"],
    )


def worker(
    args: argparse.Namespace, index: int, ready: Any, go: Any, results: Any, total: Any
) -> None:
    try:
        asyncio.run(worker_main(args, index, ready, go, results, total))
    except BaseException as exc:  # reported to the parent, which fails the run
        results.put((index, f"{type(exc).__name__}: {exc}"))


# -- the run -------------------------------------------------------------------------------------


def process_cpu(pid: int | None) -> float | None:
    if pid is None:
        return None
    with contextlib.suppress(psutil.Error):
        t = psutil.Process(pid).cpu_times()
        return float(t.user + t.system)
    return None


def gateways_cpu(pids: list[int]) -> float | None:
    """CPU seconds of every gateway measured, summed (None when none is known)."""
    if not pids:
        return None
    seconds = [process_cpu(pid) for pid in pids]
    return None if None in seconds else sum(s for s in seconds if s is not None)


def percentiles(values: array[int]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000

    return {
        "p50": at(0.50),
        "p95": at(0.95),
        "p99": at(0.99),
        "p99.9": at(0.999),
        "max": ordered[-1] / 1000,
        "mean": statistics.fmean(ordered) / 1000,
    }


def run(
    args: argparse.Namespace,
    gateway_pids: list[int],
    redis_pid: int | None,
    profile: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    ready, go, results = ctx.Queue(), ctx.Queue(), ctx.Queue()
    total = ctx.Value("q", 0)
    procs = [
        ctx.Process(target=worker, args=(args, i, ready, go, results, total), daemon=True)
        for i in range(args.processes)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        try:
            got = ready.get(timeout=120)
        except Exception as exc:
            raise PerfError("a load process did not connect in 120 s") from exc
        del got
    start_ns = time.monotonic_ns() + int(args.warmup * NS)
    end_ns = start_ns + int(args.duration * NS)
    for _ in procs:
        go.put((start_ns, end_ns))
    time.sleep(max(0.0, (start_ns - time.monotonic_ns()) / NS))
    gw0, rd0 = gateways_cpu(gateway_pids), process_cpu(redis_pid)
    with profile():
        while not finished(args, total, end_ns):
            time.sleep(0.005)
    gw1, rd1 = gateways_cpu(gateway_pids), process_cpu(redis_pid)
    window_s = (time.monotonic_ns() - start_ns) / NS
    merged = Stats()
    for _ in procs:
        index, payload = results.get(timeout=120)
        if isinstance(payload, str):
            raise PerfError(f"load process {index} failed: {payload}")
        s = _unpack(payload)
        merged.published += s.published
        merged.received += s.received
        merged.publish_latency_us.extend(s.publish_latency_us)
        merged.e2e_latency_us.extend(s.e2e_latency_us)
        merged.cpu_seconds += s.cpu_seconds
        merged.last_received_ns = max(merged.last_received_ns, s.last_received_ns)
    for p in procs:
        p.join(timeout=30)
    messages = merged.received if args.mode != "produce" else merged.published
    elapsed = window_s
    if args.mode == "consume" and merged.last_received_ns:
        # a backlog drained before the window ended: its rate is over the draining time
        elapsed = min(elapsed, (merged.last_received_ns - start_ns) / NS)

    def per_message(before: float | None, after: float | None) -> float | None:
        if before is None or after is None or not messages:
            return None
        return (after - before) / messages * 1e6

    def percent(before: float | None, after: float | None) -> float | None:
        if before is None or after is None:
            return None
        return (after - before) / window_s * 100

    return {
        "mode": args.mode,
        "duration_s": args.duration,
        "messages": messages,
        "published": merged.published,
        "received": merged.received,
        "elapsed_s": elapsed,
        "msg_per_s": messages / elapsed,
        "mb_per_s": messages * args.size / elapsed / 1e6,
        "publish_latency_ms": percentiles(merged.publish_latency_us),
        "e2e_latency_ms": percentiles(merged.e2e_latency_us),
        "gateway_us_per_msg": per_message(gw0, gw1),
        "gateway_cpu_pct": percent(gw0, gw1),
        "redis_us_per_msg": per_message(rd0, rd1),
        "redis_cpu_pct": percent(rd0, rd1),
        "perf_cpu_pct": merged.cpu_seconds / window_s * 100,
        "config": {
            k: getattr(args, k)
            for k in (
                "rate",
                "size",
                "batch",
                "topics",
                "producers",
                "consumers",
                "connections",
                "processes",
                "subscription_type",
                "ack",
                "max_pending",
            )
        }
        | {"gateways": len(args.service_url.split(",")) if args.target == "gateway" else 0},
    }


def fmt(value: float | None, spec: str = ",.1f") -> str:
    return "n/a" if value is None else format(value, spec)


def report(result: dict[str, Any]) -> str:
    c = result["config"]
    lines = [
        f"perf {result['mode']}: {result['duration_s']:g} s, {c['gateways'] or 'no'} "
        f"gateway(s), {c['processes']} process(es) x "
        f"{c['connections']} connection(s), {c['topics']} topic(s), {c['size']} B, "
        f"batch {c['batch']}, rate {c['rate'] or 'max'}",
        "",
        "| msg/s | MB/s | gateway µs/msg | gateway CPU % | Redis µs/msg | Redis CPU % "
        "| perf CPU % |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {fmt(result['msg_per_s'], ',.0f')} | {fmt(result['mb_per_s'])} "
        f"| {fmt(result['gateway_us_per_msg'], '.2f')} | {fmt(result['gateway_cpu_pct'], '.0f')} "
        f"| {fmt(result['redis_us_per_msg'], '.2f')} | {fmt(result['redis_cpu_pct'], '.0f')} "
        f"| {fmt(result['perf_cpu_pct'], '.0f')} |",
    ]
    names = ["publish_latency_ms"] if result["mode"] == "produce" else []
    # in consume mode the messages were sent before the run: their age says nothing
    names += ["e2e_latency_ms"] if result["mode"] == "e2e" else []
    for name in names:
        p = result[name]
        if p:
            lines.append(
                f"{name.replace('_ms', '').replace('_', ' ')} ms: p50 {p['p50']:.3f}  "
                f"p95 {p['p95']:.3f}  p99 {p['p99']:.3f}  p99.9 {p['p99.9']:.3f}  "
                f"max {p['max']:.3f}"
            )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["produce", "consume", "e2e"])
    p.add_argument(
        "--service-url",
        default="pulsar://127.0.0.1:6650",
        help="a gateway, or several comma-separated (connections spread round-robin)",
    )
    p.add_argument("--start", action="store_true", help="start a redis-server and a gateway")
    p.add_argument(
        "--target",
        choices=["gateway", "redis"],
        default="gateway",
        help="redis: the same hop on raw Redis (XADD, XREADGROUP BLOCK + XACK), no gateway",
    )
    p.add_argument("--redis-url", help="--target redis: the Redis (default: --start's)")
    p.add_argument(
        "--compare-raw",
        action="store_true",
        help="with --start: run the same load on raw Redis too and print the ratios",
    )
    p.add_argument("--aof", action="store_true", help="with --start: appendfsync everysec")
    p.add_argument("--rate", type=float, default=0, help="messages/s in total (0: max)")
    p.add_argument("--size", type=int, default=100, help="payload bytes (>= 12)")
    p.add_argument("--batch", type=int, default=1, help="messages per SEND (a client batch)")
    p.add_argument("--topics", type=int, default=1)
    p.add_argument("--topic-prefix", default=f"perf-{os.getpid()}")
    p.add_argument("--producers", type=int, default=1, help="per topic")
    p.add_argument("--consumers", type=int, default=1, help="per topic")
    p.add_argument("--subscription", default="perf")
    p.add_argument("--subscription-type", choices=list(SUBSCRIPTION_TYPES), default="Shared")
    p.add_argument(
        "--ack",
        choices=["grouped", "each", "none"],
        default="grouped",
        help="grouped: one ACK per read; each: one ACK command per message",
    )
    p.add_argument("--receiver-queue", type=int, default=1000)
    p.add_argument("--max-pending", type=int, default=1000, help="per producer")
    p.add_argument("--burst", type=int, default=100, help="most SENDs per write")
    p.add_argument("--connections", type=int, default=1, help="per process")
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--warmup", type=float, default=2)
    p.add_argument(
        "--messages",
        type=int,
        default=0,
        help="consume: end the window once this many were received (0: run --duration)",
    )
    p.add_argument(
        "--prefill",
        type=int,
        default=0,
        help="consume: first publish this many messages per topic (untimed)",
    )
    p.add_argument(
        "--gateways",
        type=int,
        default=1,
        help="with --start: gateways on the one Redis (connections spread over them)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="with --start: each gateway runs this many worker processes (pulsar-gateway "
        "--workers; their CPU is summed)",
    )
    p.add_argument(
        "--gateway-pid",
        type=int,
        action="append",
        help="a gateway whose CPU to measure (repeat for several; their sum is reported)",
    )
    p.add_argument("--redis-pid", type=int)
    p.add_argument("--json", type=Path)
    p.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="py-spy the gateway (--start or --gateway-pid) during the window; profiling "
        "costs CPU, so do not take this run's figures as the benchmark's",
    )
    args = p.parse_args(argv)
    if args.compare_raw and (args.mode == "consume" or not args.start):
        p.error("--compare-raw needs --start, with produce or e2e")
    if args.size < 12:
        p.error("--size must be at least 12 (the PERF marker and the send time)")
    for name in (
        "batch",
        "topics",
        "producers",
        "consumers",
        "connections",
        "processes",
        "gateways",
        "workers",
    ):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env = None
    raw_result: dict[str, Any] | None = None
    gateway_pids, redis_pid = list(args.gateway_pid or []), args.redis_pid
    more_gateways: list[Any] = []
    try:
        if args.start:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from harness import BenchEnv, GatewayProcess, RedisServer

            env = BenchEnv("perf-")
            env.rds = RedisServer(env.workdir, args.aof)
            extra = ("--workers", str(args.workers))
            env.gw = GatewayProcess(env.rds.url, env.workdir, extra=extra)
            env.watchdog.gateway = env.gw
            for i in range(1, args.gateways):
                more_gateways.append(
                    GatewayProcess(env.rds.url, env.workdir, name=str(i), extra=extra)
                )
            started = [env.gw, *more_gateways]
            args.service_url = ",".join(gw.url for gw in started)
            # a supervisor's CPU and its workers' (they are its children)
            gateway_pids = [pid for gw in started for pid in gw.pids()]
            redis_pid = env.rds.proc.pid
        if args.prefill:
            fill = argparse.Namespace(**{**vars(args), "mode": "produce", "rate": 0})
            fill.duration, fill.warmup = 3600.0, 0.0
            prefill(fill, args.prefill)
        profile: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext
        profiler = None
        if args.profile is not None:
            if not gateway_pids:
                raise SystemExit("--profile needs --start or --gateway-pid")
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from harness import Profiler, find_py_spy

            args.profile.mkdir(parents=True, exist_ok=True)
            profiler = Profiler(find_py_spy(None), args.profile, gateway_pids[0], 200)
            if not profiler.enabled:
                raise SystemExit("--profile: no py-spy on PATH or beside this Python")
            profile = partial(profiler.record, args.mode)
        if args.target == "redis":
            if env is not None:
                args.redis_url = env.rds.url
            if not args.redis_url:
                raise SystemExit("--target redis needs --redis-url or --start")
            gateway_pids = []
        result = run(args, gateway_pids, redis_pid, profile)
        if profiler is not None:
            print(profiler.reports.get(args.mode, "(no profile)"))
        raw_result = None
        if args.compare_raw:
            if env is None:
                raise SystemExit("--compare-raw needs --start")
            raw_args = argparse.Namespace(**{**vars(args), "target": "redis"})
            raw_args.redis_url = env.rds.url
            raw_result = run(raw_args, [], redis_pid)
        if env is not None:
            env.failed = False
    finally:
        for gw in more_gateways:
            gw.stop()
        if env is not None:
            env.watchdog.stop()
            env.cleanup()
    print(report(result))
    if raw_result is not None:
        print("\nThe same load on raw Redis (XADD; XREADGROUP BLOCK + XACK), same Redis:\n")
        print(report(raw_result))
        print("\n" + compare(result, raw_result))
        result = {**result, "raw": raw_result}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


def compare(gateway: dict[str, Any], raw: dict[str, Any]) -> str:
    """Gateway / raw Redis ratios of one run."""
    lines = ["| figure | gateway | raw Redis | ratio |", "|---|---:|---:|---:|"]

    def row(name: str, g: float | None, r: float | None, spec: str) -> None:
        ratio = f"{g / r:.2f}" if g is not None and r else "n/a"
        lines.append(f"| {name} | {fmt(g, spec)} | {fmt(r, spec)} | {ratio} |")

    row("msg/s", gateway["msg_per_s"], raw["msg_per_s"], ",.0f")
    row("Redis µs/msg", gateway["redis_us_per_msg"], raw["redis_us_per_msg"], ".2f")
    for name in ("publish_latency_ms", "e2e_latency_ms"):
        g, r = gateway[name], raw[name]
        if g and r:
            label = name.replace("_latency_ms", "")
            for q in ("p50", "p99", "p99.9"):
                row(f"{label} latency {q}, ms", g[q], r[q], ".3f")
    return "\n".join(lines)


def prefill(args: argparse.Namespace, per_topic: int) -> None:
    """Publish ``per_topic`` messages to every topic with the lean producer (untimed)."""

    async def fill() -> None:
        host, port = service_addresses(args)[0]
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(Connection, host, port)
        await asyncio.wait_for(conn.connected, 30)
        for k, topic in enumerate(topic_names(args)):
            producer = Producer(conn, 1 + k, topic, args)
            await producer.open()
            stats = Stats()
            task = asyncio.create_task(producer.run(stats, Window(0, 2**62), 0, 2**62))
            while stats.published < per_topic:
                await asyncio.sleep(0.01)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert conn.transport is not None
        conn.transport.close()

    asyncio.run(fill())


if __name__ == "__main__":
    sys.exit(main())
