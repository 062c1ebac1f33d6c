"""Whole binary-protocol client sessions with hostile values, on a real socket.

A :class:`BinarySession` is the script of one connection, written step by step against what
the gateway has answered so far: a CONNECT (now and then a hostile one, or none), then
commands drawn by weight from a session's vocabulary (PRODUCER and SENDs on the producers it
got, SUBSCRIBE and FLOW, ACKs and redeliveries of message ids the gateway delivered, SEEK,
lookups, closes), any other command of PulsarApi.proto filled from its descriptor, raw
protobuf bytes merged into a command, and byte-level mutations of the frames. Every
well-formed command carries hostile values in its fields (:class:`~tests.fuzz.hostile.Hostile`).
Sessions end the ways clients end: CLOSE of everything, FIN, reset, or half a frame.

:func:`run_binary_session` plays one session and reads everything the gateway sends back,
decoding it with the gateway's own codec: a frame the codec cannot decode is a finding
(``malformed_answers``), as is any error of the gateway's own (the campaign reads its log).
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.message import Message

from pulsar_gateway import frame_codec
from pulsar_gateway.entry_codec import make_blob
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.fuzz.hostile import Hostile, length_delimited, noise
from tests.fuzz.stats import SessionStats

T = pb.BaseCommand.Type

#: Commands this script builds with care (the rest come from the descriptor alone).
_SUB_MESSAGE = {
    f.number: f.name for f in pb.BaseCommand.DESCRIPTOR.fields if f.message_type is not None
}
_ALL_TYPES = tuple(sorted(_SUB_MESSAGE))
_OTHER_TYPES = tuple(
    t
    for t in _ALL_TYPES
    if t
    not in (
        T.CONNECT,
        T.PRODUCER,
        T.SEND,
        T.SUBSCRIBE,
        T.FLOW,
        T.ACK,
        T.SEEK,
        T.LOOKUP,
        T.CLOSE_PRODUCER,
        T.CLOSE_CONSUMER,
        T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
    )
)
_PAYLOAD_TYPES = (T.SEND, T.MESSAGE)
_COMPRESSIONS = (pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY)
#: Seconds a session waits for the answer to a request before going on: some are never
#: answered, by design (a WaitForExclusive producer waits for its turn, as in Pulsar).
REPLY_WAIT = 0.5


def _fill_required(message: Message, hostile: Hostile) -> None:
    """Set every required field left unset in ``message`` and its set sub-messages."""
    for field in message.DESCRIPTOR.fields:
        if field.message_type is not None:
            if field.is_repeated:
                for item in getattr(message, field.name):
                    _fill_required(item, hostile)
            elif message.HasField(field.name) or field.is_required:
                _fill_required(getattr(message, field.name), hostile)
                getattr(message, field.name).SetInParent()
        elif field.is_required and not message.HasField(field.name):
            setattr(message, field.name, hostile.scalar(field))


def frame(command: bytes, blob: bytes = b"") -> bytes:
    """A frame around serialized command bytes (and a payload blob), sizes consistent."""
    return struct.pack(">II", 4 + len(command) + len(blob), len(command)) + command + blob


@dataclass
class _Producer:
    """A producer the session asked for: the PRODUCER's request id, the name the gateway
    gave it (once PRODUCER_SUCCESS came), the next sequence id."""

    request_id: int
    name: str = "fuzz"
    sequence: int = 0


class BinarySession:
    """The script of one connection; :meth:`next_input` writes its next input."""

    def __init__(self, rng: random.Random, topics: tuple[str, ...], subscriptions: tuple[str, ...]):
        self.rng = rng
        self.topics = topics
        self.subscriptions = subscriptions
        self.hostile = Hostile(rng, topics + subscriptions)
        self.producers: dict[int, _Producer] = {}
        self.consumers: list[int] = []
        #: ids of messages the gateway delivered, as sent (for ACK, REDELIVER, SEEK)
        self.delivered: list[pb.MessageIdData] = []
        self._ids = iter(range(1, 1 << 62))
        self.wildness = rng.choice((0.0, 0.01, 0.03, 0.1, 0.3))
        self.waiting: dict[int, asyncio.Future[pb.BaseCommand]] = {}
        self.connected: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def next_id(self) -> int:
        return next(self._ids)

    # -- what the gateway answered ---------------------------------------------------------

    def answered(self, cmd: pb.BaseCommand) -> None:
        """Learn from one answer: producer names, delivered ids, replies to wait for."""
        if cmd.type == T.CONNECTED and not self.connected.done():
            self.connected.set_result(None)
        elif cmd.type == T.PRODUCER_SUCCESS:
            ok = cmd.producer_success
            for producer in self.producers.values():
                if producer.request_id == ok.request_id:
                    producer.name = ok.producer_name
        elif cmd.type == T.MESSAGE and len(self.delivered) < 500:
            self.delivered.append(cmd.message.message_id)
        sub = getattr(cmd, _SUB_MESSAGE.get(cmd.type, "type"), None)
        request_id = getattr(sub, "request_id", None)
        if isinstance(request_id, int):
            waiter = self.waiting.pop(request_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(cmd)

    # -- the script ------------------------------------------------------------------------

    def opening(self) -> bytes:
        """The first input: a CONNECT, mostly a sound one."""
        roll = self.rng.random()
        cmd = pb.BaseCommand(type=T.CONNECT)
        if roll < 0.85:
            cmd.connect.client_version = "fuzz"
            cmd.connect.protocol_version = self.rng.choice((6, 10, 15, 19, 20, 21))
            if self.rng.random() < 0.3:
                cmd.connect.feature_flags.supports_auth_refresh = self.rng.random() < 0.5
            return frame(cmd.SerializeToString())
        if roll < 0.95:
            self.hostile.fill(cmd.connect)
            return frame(cmd.SerializePartialToString())
        return self.any_command()  # no CONNECT first

    def next_input(self) -> tuple[bytes, int | None]:
        """The next input, and the request id whose answer to wait for (or None). Most
        inputs are commands a client sends, fields hostile; a session's ``wildness`` is the
        share of inputs that are malformed on purpose (most cost the connection, so careful
        sessions reach deeper states)."""
        r = self.rng
        if r.random() < self.wildness:
            return r.choice((self.any_command, self.merged_raw, self.mutated))(), None
        steps: tuple[tuple[float, Callable[[], tuple[bytes, int | None]]], ...] = (
            (0.10, self.producer),
            (0.40, self.send),
            (0.50, self.subscribe),
            (0.58, self.flow),
            (0.68, self.ack),
            (0.72, self.redeliver),
            (0.76, self.seek),
            (0.81, self.request_on_consumer),
            (0.85, self.close_one),
            (0.93, self.discovery),
            (1.00, lambda: (self.any_command(unsupported_only=True), None)),
        )
        roll = r.random()
        for bound, step in steps:
            if roll < bound:
                return step()
        raise AssertionError("unreachable")

    def mutated(self) -> bytes:
        return self.hostile.mutate(self.plausible())

    def plausible(self) -> bytes:
        """Any input of the session's vocabulary (for mutation)."""
        data, _ = self.rng.choice(
            (self.producer, self.send, self.subscribe, self.flow, self.ack, self.seek)
        )()
        return data

    def _topic(self) -> str:
        return self.rng.choice(self.topics) if self.rng.random() < 0.85 else self.hostile.text()

    def _command(self, type_: int, density: float = 0.15) -> tuple[pb.BaseCommand, object]:
        """A command of ``type_`` whose sub-message has hostile optional fields."""
        cmd = pb.BaseCommand(type=type_)  # type: ignore[arg-type]
        sub = getattr(cmd, _SUB_MESSAGE[type_])
        self.hostile.fill(sub, density=density)
        sub.SetInParent()
        return cmd, sub

    def _serialized(self, cmd: pb.BaseCommand) -> bytes:
        return cmd.SerializePartialToString()

    def producer(self) -> tuple[bytes, int | None]:
        cmd, sub = self._command(T.PRODUCER, 0.1)
        rid, pid = self.next_id(), self.next_id()
        sub.topic = self._topic()  # type: ignore[attr-defined]
        sub.request_id = rid  # type: ignore[attr-defined]
        sub.producer_id = pid  # type: ignore[attr-defined]
        if self.rng.random() < 0.7:
            sub.ClearField("producer_name")  # type: ignore[attr-defined]
        self.producers[pid] = _Producer(rid)
        return frame(self._serialized(cmd)), rid

    def send(self) -> tuple[bytes, int | None]:
        r = self.rng
        cmd = pb.BaseCommand(type=T.SEND)
        if self.producers and r.random() < 0.9:
            pid = r.choice(list(self.producers))
            producer = self.producers[pid]
            name, sequence = producer.name, producer.sequence
            producer.sequence += 1
        else:
            pid, name, sequence = self.hostile.integer(4), self.hostile.text(), 0
        cmd.send.producer_id = pid
        cmd.send.sequence_id = sequence if r.random() < 0.9 else self.hostile.integer(4)
        if r.random() < 0.2:
            cmd.send.num_messages = self.hostile.integer(5)
        metadata = pb.MessageMetadata()
        if r.random() < 0.25:
            self.hostile.fill(metadata, density=0.1)
        metadata.producer_name = name if r.random() < 0.9 else self.hostile.text()
        metadata.sequence_id = cmd.send.sequence_id
        metadata.publish_time = (
            int(time.time() * 1000) if r.random() < 0.9 else (self.hostile.integer(4))
        )
        payload = self._payload(metadata)
        meta = metadata.SerializePartialToString()
        if r.random() < 0.05:
            meta += self.hostile.raw_fields(pb.MessageMetadata.DESCRIPTOR)
        blob = make_blob(meta, payload)
        if r.random() < 0.03:  # a checksum that does not match
            blob = blob[:2] + bytes(4) + blob[6:]
        return frame(self._serialized(cmd), blob), None

    def _payload(self, metadata: pb.MessageMetadata) -> bytes:
        r = self.rng
        roll = r.random()
        if roll < 0.6:
            return r.randbytes(r.randrange(0, 200))
        if roll < 0.8:  # a batch, its metadata sometimes lying about the count
            batch = bytearray()
            count = r.randrange(1, 6)
            for _ in range(count):  # per message: metadata size, metadata, payload
                single = pb.SingleMessageMetadata(payload_size=0)
                self.hostile.fill(single, density=0.2)
                data = r.randbytes(r.randrange(0, 50))
                if r.random() < 0.9:
                    single.payload_size = len(data)
                meta = single.SerializePartialToString()
                batch += struct.pack(">I", len(meta)) + meta + data
            metadata.num_messages_in_batch = count if r.random() < 0.7 else self.hostile.integer(5)
            return bytes(batch)
        if roll < 0.95:  # compressed, the declared size true or not
            data = r.randbytes(r.randrange(0, 300))
            metadata.compression = r.choice(_COMPRESSIONS)
            metadata.uncompressed_size = len(data) if r.random() < 0.5 else self.hostile.integer(13)
            return data  # not compressed at all: the codec must refuse, not crash
        return noise(r, r.choice((10_000, 100_000)))

    def subscribe(self) -> tuple[bytes, int | None]:
        cmd, sub = self._command(T.SUBSCRIBE, 0.1)
        rid, cid = self.next_id(), self.next_id()
        sub.topic = self._topic()  # type: ignore[attr-defined]
        sub.subscription = (  # type: ignore[attr-defined]
            self.rng.choice(self.subscriptions) if self.rng.random() < 0.8 else self.hostile.text()
        )
        sub.request_id = rid  # type: ignore[attr-defined]
        sub.consumer_id = cid  # type: ignore[attr-defined]
        self.consumers.append(cid)
        return frame(self._serialized(cmd)), rid

    def _consumer_id(self) -> int:
        if self.consumers and self.rng.random() < 0.9:
            return self.rng.choice(self.consumers)
        return self.hostile.integer(4)

    def _delivered_ids(self) -> list[pb.MessageIdData]:
        r = self.rng
        ids = [r.choice(self.delivered) for _ in range(r.randrange(1, 4))] if self.delivered else []
        if not ids or r.random() < 0.3:
            hostile = pb.MessageIdData(ledgerId=0, entryId=0)
            self.hostile.fill(hostile, density=0.4)
            ids.append(hostile)
        return ids

    def flow(self) -> tuple[bytes, int | None]:
        cmd = pb.BaseCommand(type=T.FLOW)
        cmd.flow.consumer_id = self._consumer_id()
        cmd.flow.messagePermits = (
            self.rng.randrange(1, 1000) if self.rng.random() < 0.7 else self.hostile.integer(13)
        )
        return frame(self._serialized(cmd)), None

    def ack(self) -> tuple[bytes, int | None]:
        cmd, sub = self._command(T.ACK, 0.1)
        sub.consumer_id = self._consumer_id()  # type: ignore[attr-defined]
        del sub.message_id[:]  # type: ignore[attr-defined]
        for mid in self._delivered_ids():
            copy = sub.message_id.add()  # type: ignore[attr-defined]
            copy.CopyFrom(mid)
            if self.rng.random() < 0.1:
                copy.ack_set.extend(self.hostile.integer(3) for _ in range(2))
        return frame(self._serialized(cmd)), None

    def redeliver(self) -> tuple[bytes, int | None]:
        cmd = pb.BaseCommand(type=T.REDELIVER_UNACKNOWLEDGED_MESSAGES)
        cmd.redeliverUnacknowledgedMessages.consumer_id = self._consumer_id()
        if self.rng.random() < 0.6:
            for mid in self._delivered_ids():
                cmd.redeliverUnacknowledgedMessages.message_ids.add().CopyFrom(mid)
        return frame(self._serialized(cmd)), None

    def seek(self) -> tuple[bytes, int | None]:
        cmd = pb.BaseCommand(type=T.SEEK)
        rid = self.next_id()
        cmd.seek.consumer_id = self._consumer_id()
        cmd.seek.request_id = rid
        if self.rng.random() < 0.5:
            cmd.seek.message_id.CopyFrom(self._delivered_ids()[0])
        else:
            cmd.seek.message_publish_time = self.hostile.integer(4)
        return frame(self._serialized(cmd)), rid

    def request_on_consumer(self) -> tuple[bytes, int | None]:
        type_ = self.rng.choice((T.GET_LAST_MESSAGE_ID, T.CONSUMER_STATS, T.UNSUBSCRIBE))
        cmd, sub = self._command(type_, 0.1)
        rid = self.next_id()
        sub.request_id = rid  # type: ignore[attr-defined]
        sub.consumer_id = self._consumer_id()  # type: ignore[attr-defined]
        return frame(self._serialized(cmd)), rid

    def close_one(self) -> tuple[bytes, int | None]:
        rid = self.next_id()
        if self.producers and self.rng.random() < 0.5:
            cmd = pb.BaseCommand(type=T.CLOSE_PRODUCER)
            cmd.close_producer.producer_id = self.rng.choice(list(self.producers))
            cmd.close_producer.request_id = rid
        else:
            cmd = pb.BaseCommand(type=T.CLOSE_CONSUMER)
            cmd.close_consumer.consumer_id = self._consumer_id()
            cmd.close_consumer.request_id = rid
        return frame(self._serialized(cmd)), rid

    def discovery(self) -> tuple[bytes, int | None]:
        type_ = self.rng.choice(
            (T.LOOKUP, T.PARTITIONED_METADATA, T.GET_TOPICS_OF_NAMESPACE, T.GET_SCHEMA, T.PING)
        )
        cmd, sub = self._command(type_, 0.2)
        if type_ == T.PING:
            return frame(self._serialized(cmd)), None
        rid = self.next_id()
        sub.request_id = rid  # type: ignore[attr-defined]
        if type_ == T.GET_TOPICS_OF_NAMESPACE:
            sub.namespace = (  # type: ignore[attr-defined]
                "public/default" if self.rng.random() < 0.5 else self.hostile.text()
            )
        else:
            sub.topic = self._topic()  # type: ignore[attr-defined]
        return frame(self._serialized(cmd)), rid

    def any_command(self, unsupported_only: bool = False) -> bytes:
        """Any command type of the proto (some no client sends a broker), fields hostile,
        required ones sometimes missing; SEND and MESSAGE with a blob, or without one.
        ``unsupported_only``: a type this script does not build with care, every required
        field set (a broker must answer or ignore it, not drop the connection)."""
        type_ = self.rng.choice(_OTHER_TYPES if unsupported_only else _ALL_TYPES)
        cmd, sub = self._command(type_, 0.5)
        if unsupported_only:
            _fill_required(sub, self.hostile)
        blob = b""
        if type_ in _PAYLOAD_TYPES and self.rng.random() < 0.7:
            blob = make_blob(self.hostile.blob(), self.hostile.blob())
        return frame(self._serialized(cmd), blob)

    def merged_raw(self) -> bytes:
        """A plausible command with raw protobuf bytes merged into its sub-message (unknown
        enum numbers, strings that are not UTF-8, wrong wire types, overlong varints)."""
        type_ = self.rng.choice((T.PRODUCER, T.SUBSCRIBE, T.FLOW, T.ACK, T.LOOKUP, T.SEEK))
        cmd, _ = self._command(type_, 0.3)
        descriptor = pb.BaseCommand.DESCRIPTOR.fields_by_number[type_].message_type
        extra = self.hostile.raw_fields(descriptor)
        return frame(self._serialized(cmd) + length_delimited(type_, extra))

    def ending(self) -> str:
        """How the session ends: ``close`` (CLOSE_* then FIN), ``fin``, ``reset``, ``half``
        (half a frame, then FIN)."""
        return self.rng.choice(("close", "fin", "fin", "reset", "half"))

    def closes(self) -> bytes:
        """CLOSE_PRODUCER and CLOSE_CONSUMER for everything the session opened."""
        out = bytearray()
        for pid in self.producers:
            cmd = pb.BaseCommand(type=T.CLOSE_PRODUCER)
            cmd.close_producer.producer_id = pid
            cmd.close_producer.request_id = self.next_id()
            out += frame(cmd.SerializeToString())
        for cid in self.consumers:
            cmd = pb.BaseCommand(type=T.CLOSE_CONSUMER)
            cmd.close_consumer.consumer_id = cid
            cmd.close_consumer.request_id = self.next_id()
            out += frame(cmd.SerializeToString())
        return bytes(out)


# -- playing a session ----------------------------------------------------------------------


async def _read_answers(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    session: BinarySession,
    stats: SessionStats,
) -> None:
    """Read and decode everything the gateway sends until it closes; answer its PINGs."""
    decoder = frame_codec.FrameDecoder(1 << 30)
    while True:
        try:
            data = await reader.read(1 << 16)
        except (ConnectionError, OSError):
            return
        if not data:
            return
        decoder.feed(data)
        try:
            while (f := decoder.next_frame()) is not None:
                cmd = f.command
                name = pb.BaseCommand.Type.Name(cmd.type)
                stats.answers[name] = stats.answers.get(name, 0) + 1
                code = _error_code(cmd)
                if code is not None:
                    error = (
                        pb.ServerError.Name(code) if code in pb.ServerError.values() else str(code)
                    )
                    stats.errors[error] = stats.errors.get(error, 0) + 1
                if cmd.type == T.PING and not writer.is_closing():
                    writer.write(frame(pb.BaseCommand(type=T.PONG).SerializeToString()))
                session.answered(cmd)
        except frame_codec.CodecError as exc:
            stats.malformed_answers += 1
            stats.samples.append(f"binary answer the codec refuses: {exc}; {data[:200].hex()}")
            return


def _error_code(cmd: pb.BaseCommand) -> int | None:
    if cmd.type == T.ERROR:
        return cmd.error.error
    if cmd.type == T.SEND_ERROR:
        return cmd.send_error.error
    if cmd.type == T.LOOKUP_RESPONSE and cmd.lookupTopicResponse.HasField("error"):
        return cmd.lookupTopicResponse.error
    if cmd.type == T.PARTITIONED_METADATA_RESPONSE and cmd.partitionMetadataResponse.HasField(
        "error"
    ):
        return cmd.partitionMetadataResponse.error
    return None


async def run_binary_session(
    host: str,
    port: int,
    rng: random.Random,
    topics: tuple[str, ...],
    subscriptions: tuple[str, ...],
    max_inputs: int,
) -> SessionStats:
    """Play one session of at most ``max_inputs`` inputs; what it saw."""
    stats = SessionStats(sessions=1)
    session = BinarySession(rng, topics, subscriptions)
    reader, writer = await asyncio.open_connection(host, port)
    reading = asyncio.create_task(_read_answers(reader, writer, session, stats))
    loop = asyncio.get_running_loop()
    try:
        data = session.opening()
        writer.write(data)
        stats.inputs += 1
        if rng.random() < 0.9:  # mostly wait for CONNECTED, as a client does
            await asyncio.wait(
                [session.connected, reading], timeout=2.0, return_when="FIRST_COMPLETED"
            )
        while stats.inputs < max_inputs and not reading.done():
            data, request_id = session.next_input()
            if request_id is not None and rng.random() < 0.7:
                waiter: asyncio.Future[pb.BaseCommand] = loop.create_future()
                session.waiting[request_id] = waiter
                writer.write(data)
                stats.inputs += 1
                await asyncio.wait(
                    [waiter, reading], timeout=REPLY_WAIT, return_when="FIRST_COMPLETED"
                )
            else:
                writer.write(data)
                stats.inputs += 1
            await writer.drain()
        ending = session.ending()
        if reading.done():
            stats.closed_by_gateway += 1
        elif ending == "close":
            writer.write(session.closes())
            await writer.drain()
        elif ending == "half":
            writer.write(session.plausible()[: rng.randrange(1, 8)])
            await writer.drain()
        if ending == "reset":
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        else:
            writer.close()
        await asyncio.wait([reading], timeout=1.0)
    except (ConnectionError, OSError):
        stats.closed_by_gateway += 1
    finally:
        if not reading.done():
            reading.cancel()
        writer.transport.abort()
    return stats
