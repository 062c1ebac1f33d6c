"""Hostile and broken input on raw TCP sockets, while a real client keeps working.

Every test runs against one real gateway (the ``gateway`` fixture) with an official-client
producer and consumer pair on it (:class:`LivePair`). The pair round-trips a message before
and after each bad input: whatever a raw socket sends, it may only cost that socket its own
connection, never another client's.

:class:`~tests.rawclient.RawConnection` is the raw-socket client that sends the bad input.
"""

from __future__ import annotations

import asyncio
import base64
import random
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import pulsar
import pytest

from pulsar_gateway import frame_codec
from pulsar_gateway.entry_codec import make_blob
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread
from tests.frames import command
from tests.rawclient import RawConnection, raw
from tests.wsclient import connect, consumer_url

T = pb.BaseCommand.Type

# -- the official client pair that must keep working ---------------------------------------


class LivePair:
    """An official-client producer and consumer on one topic of the gateway under attack."""

    def __init__(self, client: Any) -> None:
        self.topic = f"persistent://public/default/live-{uuid.uuid4().hex[:8]}"
        self.consumer = client.subscribe(
            self.topic, "live", consumer_type=pulsar.ConsumerType.Shared
        )
        self.producer = client.create_producer(self.topic)
        self.round_trips = 0

    def roundtrip(self) -> None:
        payload = f"live-{self.round_trips}-{uuid.uuid4().hex}".encode()
        self.producer.send(payload)
        msg = self.consumer.receive(timeout_millis=int(TIMEOUT * 1000))
        assert msg.data() == payload
        self.consumer.acknowledge(msg)
        self.round_trips += 1


@pytest.fixture
def live(client: Any) -> Iterator[LivePair]:
    pair = LivePair(client)
    pair.roundtrip()
    yield pair
    pair.roundtrip()


@pytest.fixture
def conn(gateway: GatewayThread, live: LivePair) -> Iterator[RawConnection]:
    """A raw connection, handshake done."""
    with raw(gateway) as c:
        connected = c.handshake()
        assert connected.protocol_version == 20
        yield c


def new_topic(prefix: str = "raw") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


# -- malformed input closes the connection -------------------------------------------------


@pytest.mark.parametrize("after_handshake", [False, True], ids=["before-connect", "connected"])
def test_oversized_frame_closes(
    gateway: GatewayThread, live: LivePair, after_handshake: bool
) -> None:
    with raw(gateway) as c:
        if after_handshake:
            c.handshake()
        c.send_bytes(struct.pack(">II", 50 * 1024 * 1024, 10) + b"\x00" * 64)
        assert c.assert_closed() == []
    live.roundtrip()


def test_frame_just_over_the_limit_closes(gateway: GatewayThread, live: LivePair) -> None:
    limit = gateway.gateway.config.max_message_size + frame_codec.FRAME_PADDING
    with raw(gateway) as c:
        c.handshake()
        c.send_bytes(struct.pack(">I", limit - 3))  # totalSize + 4 == limit + 1
        assert c.assert_closed() == []
    live.roundtrip()


def _garbage(seed: int, size: int) -> bytes:
    data = random.Random(seed).randbytes(size)
    # Precondition: the codec itself rejects these bytes (so the test cannot hang on a
    # random header that happens to announce a small frame).
    decoder = frame_codec.FrameDecoder()
    decoder.feed(data)
    with pytest.raises(frame_codec.CodecError):
        while decoder.next_frame() is not None:
            pass
    return data


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("after_handshake", [False, True], ids=["before-connect", "connected"])
def test_random_garbage_closes(
    gateway: GatewayThread, live: LivePair, seed: int, after_handshake: bool
) -> None:
    with raw(gateway) as c:
        if after_handshake:
            c.handshake()
        c.send_bytes(_garbage(seed, 4096))
        assert c.assert_closed() == []
    live.roundtrip()


@pytest.mark.parametrize("after_handshake", [False, True], ids=["before-connect", "connected"])
def test_well_sized_frame_with_garbage_body_closes(
    gateway: GatewayThread, live: LivePair, after_handshake: bool
) -> None:
    with raw(gateway) as c:
        if after_handshake:
            c.handshake()
        body = b"\xff" * 96
        c.send_bytes(struct.pack(">II", len(body) + 4, len(body)) + body)
        assert c.assert_closed() == []
    live.roundtrip()


def test_http_request_closes(gateway: GatewayThread, live: LivePair) -> None:
    with raw(gateway) as c:
        c.send_bytes(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert c.assert_closed() == []
    live.roundtrip()


def test_subscribe_type_without_sub_message_closes(conn: RawConnection, live: LivePair) -> None:
    conn.send(pb.BaseCommand(type=T.SUBSCRIBE))
    assert conn.assert_closed() == []
    live.roundtrip()


def test_command_before_connect_gets_error_then_close(
    gateway: GatewayThread, live: LivePair
) -> None:
    with raw(gateway) as c:
        c.send(command(T.PRODUCER, topic=new_topic(), producer_id=0, request_id=7))
        frames = c.assert_closed()
        assert [f.type for f in frames] == [T.ERROR]
        assert frames[0].error.request_id == 7
        assert frames[0].error.error == pb.NotAllowedError
    live.roundtrip()


def test_second_connect_closes(conn: RawConnection, live: LivePair) -> None:
    conn.send(command(T.CONNECT, client_version="again", protocol_version=20))
    assert all(f.type != T.CONNECTED for f in conn.assert_closed())
    live.roundtrip()


def test_peer_that_vanishes_mid_frame(gateway: GatewayThread, live: LivePair) -> None:
    with raw(gateway) as c:
        c.handshake()
        data = frame_codec.encode_command(command(T.PING))
        c.send_bytes(data[: len(data) - 1])
    live.roundtrip()


# -- SEND errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("corrupt", ["crc", "payload"])
def test_send_with_bad_checksum(
    conn: RawConnection, live: LivePair, client: Any, corrupt: str
) -> None:
    topic = new_topic("crc")
    name = conn.create_producer(topic, producer_id=1)
    conn.send_message(1, 0, name, b"corrupted", corrupt=corrupt)
    err = conn.expect(T.SEND_ERROR).send_error
    assert (err.producer_id, err.sequence_id) == (1, 0)
    assert err.error == pb.ChecksumError
    live.roundtrip()
    # The connection and the producer stay usable.
    conn.send_message(1, 1, name, b"good")
    receipt = conn.expect(T.SEND_RECEIPT).send_receipt
    assert (receipt.producer_id, receipt.sequence_id) == (1, 1)
    assert receipt.HasField("message_id")
    conn.assert_open()
    # The corrupted message was not stored.
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert reader.read_next(timeout_millis=int(TIMEOUT * 1000)).data() == b"good"
    with pytest.raises(pulsar.Timeout):
        reader.read_next(timeout_millis=500)
    reader.close()


def test_send_to_unknown_producer(conn: RawConnection, live: LivePair) -> None:
    conn.send_message(42, 5, "nobody", b"x")
    err = conn.expect(T.SEND_ERROR).send_error
    assert (err.producer_id, err.sequence_id) == (42, 5)
    assert err.error == pb.NotAllowedError
    conn.assert_open()
    live.roundtrip()


def test_send_to_closed_producer(conn: RawConnection, live: LivePair) -> None:
    name = conn.create_producer(new_topic(), producer_id=3)
    conn.send_message(3, 0, name, b"before close")
    assert conn.expect(T.SEND_RECEIPT).send_receipt.sequence_id == 0
    conn.request(T.CLOSE_PRODUCER, T.SUCCESS, producer_id=3)
    conn.send_message(3, 1, name, b"after close")
    err = conn.expect(T.SEND_ERROR).send_error
    assert (err.producer_id, err.sequence_id) == (3, 1)
    assert err.error == pb.NotAllowedError
    conn.assert_open()
    live.roundtrip()


# -- commands for unknown consumers and producers ------------------------------------------


def test_flow_and_ack_for_unknown_consumer_are_ignored(conn: RawConnection, live: LivePair) -> None:
    conn.send(command(T.FLOW, consumer_id=99, messagePermits=1000))
    ack = command(T.ACK, consumer_id=99, ack_type=pb.CommandAck.Individual)
    ack.ack.message_id.add(ledgerId=1, entryId=2)
    conn.send(ack)
    cumulative = command(T.ACK, consumer_id=99, ack_type=pb.CommandAck.Cumulative)
    cumulative.ack.message_id.add(ledgerId=1, entryId=2)
    conn.send(cumulative)
    conn.send(command(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=99))
    conn.send(command(T.PING))
    conn.expect(T.PONG)
    # Nothing but the PONG came back.
    assert [f.command.type for f in conn.received] == [T.CONNECTED, T.PONG]
    assert conn.drain() == []
    live.roundtrip()


def test_ack_with_request_id_for_unknown_consumer(conn: RawConnection, live: LivePair) -> None:
    ack = command(T.ACK, consumer_id=99, ack_type=pb.CommandAck.Individual, request_id=77)
    ack.ack.message_id.add(ledgerId=1, entryId=2)
    conn.send(ack)
    r = conn.expect(T.ACK_RESPONSE).ackResponse
    assert (r.consumer_id, r.request_id) == (99, 77)
    assert r.error == pb.ConsumerNotFound
    conn.assert_open()
    live.roundtrip()


@pytest.mark.parametrize("type_", [T.UNSUBSCRIBE, T.GET_LAST_MESSAGE_ID])
def test_request_for_unknown_consumer_gets_consumer_not_found(
    conn: RawConnection, live: LivePair, type_: int
) -> None:
    r = conn.request(type_, T.ERROR, consumer_id=123).error
    assert r.error == pb.ConsumerNotFound
    conn.assert_open()
    live.roundtrip()


@pytest.mark.parametrize(
    ("type_", "id_field"),
    [(T.CLOSE_CONSUMER, "consumer_id"), (T.CLOSE_PRODUCER, "producer_id")],
)
def test_close_of_unknown_id_succeeds(
    conn: RawConnection, live: LivePair, type_: int, id_field: str
) -> None:
    conn.request(type_, T.SUCCESS, **{id_field: 123})
    conn.assert_open()
    live.roundtrip()


# -- invalid topic names -------------------------------------------------------------------

INVALID_TOPICS = [
    "persistent://bad tenant!/ns/t",
    "foo://a/b/c",
    "a/b",
    "persistent://public/default/",
    "",
]


@pytest.mark.parametrize("topic", INVALID_TOPICS)
def test_producer_on_invalid_topic(conn: RawConnection, live: LivePair, topic: str) -> None:
    r = conn.request(T.PRODUCER, T.ERROR, topic=topic, producer_id=1).error
    assert r.error == pb.InvalidTopicName
    conn.assert_open()
    live.roundtrip()


@pytest.mark.parametrize("topic", INVALID_TOPICS)
def test_subscribe_on_invalid_topic(conn: RawConnection, live: LivePair, topic: str) -> None:
    r = conn.request(
        T.SUBSCRIBE,
        T.ERROR,
        topic=topic,
        subscription="s",
        subType=pb.CommandSubscribe.Shared,
        consumer_id=1,
    ).error
    assert r.error == pb.InvalidTopicName
    conn.assert_open()
    live.roundtrip()


@pytest.mark.parametrize("topic", INVALID_TOPICS)
def test_partitioned_metadata_on_invalid_topic(
    conn: RawConnection, live: LivePair, topic: str
) -> None:
    r = conn.request(T.PARTITIONED_METADATA, T.PARTITIONED_METADATA_RESPONSE, topic=topic)
    r = r.partitionMetadataResponse
    assert r.response == pb.CommandPartitionedTopicMetadataResponse.Failed
    assert r.error == pb.InvalidTopicName
    conn.assert_open()
    live.roundtrip()


@pytest.mark.parametrize("topic", INVALID_TOPICS)
def test_lookup_on_invalid_topic(conn: RawConnection, live: LivePair, topic: str) -> None:
    r = conn.request(T.LOOKUP, T.LOOKUP_RESPONSE, topic=topic).lookupTopicResponse
    assert r.response == pb.CommandLookupTopicResponse.Failed
    assert r.error == pb.InvalidTopicName
    conn.assert_open()
    live.roundtrip()


def test_valid_topic_answers_for_comparison(
    gateway: GatewayThread, conn: RawConnection, live: LivePair
) -> None:
    topic = new_topic()
    r = conn.request(T.PARTITIONED_METADATA, T.PARTITIONED_METADATA_RESPONSE, topic=topic)
    assert r.partitionMetadataResponse.HasField("response")
    assert (
        r.partitionMetadataResponse.response == pb.CommandPartitionedTopicMetadataResponse.Success
    )
    assert r.partitionMetadataResponse.partitions == 0
    r = conn.request(T.LOOKUP, T.LOOKUP_RESPONSE, topic=topic).lookupTopicResponse
    assert r.response == pb.CommandLookupTopicResponse.Connect
    assert r.brokerServiceUrl == gateway.url


# -- unsupported commands ------------------------------------------------------------------


def test_unsupported_command_with_request_id(conn: RawConnection, live: LivePair) -> None:
    rid = conn.request_id()
    cmd = pb.BaseCommand(type=T.CONSUMER_STATS)
    cmd.consumerStats.request_id = rid
    cmd.consumerStats.consumer_id = 1
    conn.send(cmd)
    r = conn.expect(T.ERROR).error
    assert r.request_id == rid
    assert r.error == pb.NotAllowedError
    conn.assert_open()
    live.roundtrip()


def test_unsupported_command_without_request_id(conn: RawConnection, live: LivePair) -> None:
    conn.send(command(T.ACTIVE_CONSUMER_CHANGE, consumer_id=1))
    conn.assert_open()
    assert [f.command.type for f in conn.received] == [T.CONNECTED, T.PONG]
    live.roundtrip()


def test_command_type_unknown_to_this_proto(conn: RawConnection, live: LivePair) -> None:
    # NEW_TXN (50) has no sub-message in the client's PulsarApi.proto: a bare type with no
    # request id to answer. Ignored; the connection stays open.
    conn.send(pb.BaseCommand(type=T.NEW_TXN))
    conn.assert_open()
    assert [f.command.type for f in conn.received] == [T.CONNECTED, T.PONG]
    live.roundtrip()


# -- the official client -------------------------------------------------------------------


@pytest.mark.parametrize("topic", ["foo://x/y/z", "persistent://bad tenant!/ns/t"])
def test_official_client_create_producer_on_invalid_topic(
    gateway: GatewayThread, client_factory: Callable[..., Any], live: LivePair, topic: str
) -> None:
    # InvalidTopicName is retried by the client until the operation timeout (not in
    # ``isResultRetryable``'s fatal list, lib/ResultUtils.h in apache/pulsar-client-cpp),
    # so the dedicated client has a short one.
    client = client_factory(gateway.url, operation_timeout_seconds=3)
    start = time.monotonic()
    with pytest.raises(pulsar.PulsarException):
        client.create_producer(topic)
    assert time.monotonic() - start < 3 + TIMEOUT / 2
    live.roundtrip()


@pytest.mark.parametrize("topic", ["foo://x/y/z", "persistent://bad tenant!/ns/t"])
def test_official_client_subscribe_on_invalid_topic(
    gateway: GatewayThread, client_factory: Callable[..., Any], live: LivePair, topic: str
) -> None:
    client = client_factory(gateway.url, operation_timeout_seconds=3)
    start = time.monotonic()
    with pytest.raises(pulsar.PulsarException):
        client.subscribe(topic, "s")
    assert time.monotonic() - start < 3 + TIMEOUT / 2
    live.roundtrip()


def test_official_client_on_a_name_only_the_gateway_refuses(
    gateway: GatewayThread, client_factory: Callable[..., Any], live: LivePair
) -> None:
    # The C++ client validates names itself, so the names above never reach the gateway.
    # A NUL character passes the client's checks: the gateway answers PARTITIONED_METADATA
    # with InvalidTopicName, which the client retries until its operation timeout.
    client = client_factory(gateway.url, operation_timeout_seconds=3)
    start = time.monotonic()
    with pytest.raises(pulsar.PulsarException):
        client.create_producer("persistent://public/default/nul\x00name")
    assert time.monotonic() - start < 3 + TIMEOUT / 2
    live.roundtrip()


def test_topic_whose_partition_suffix_overflows_int32(client: Any, live: LivePair) -> None:
    # For Pulsar "t-partition-99999999999" is an ordinary topic (Integer.parseInt overflows,
    # so getPartitionIndex is -1). BUG: the gateway takes 99999999999 as the partition index;
    # encode_message then raises ValueError (MESSAGE.partition is int32) inside the
    # subscription's dispatcher task, which dies: the message is never delivered.
    topic = f"persistent://public/default/big-{uuid.uuid4().hex[:6]}-partition-99999999999"
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic)
    producer.send(b"one")
    assert consumer.receive(timeout_millis=int(TIMEOUT * 1000)).data() == b"one"
    live.roundtrip()


# -- everything at once while the real client streams --------------------------------------


def _bad_inputs(gateway: GatewayThread) -> list[Callable[[], None]]:
    """Each bad input as a self-checking callable."""

    def oversized() -> None:
        with raw(gateway) as c:
            c.send_bytes(struct.pack(">I", 50 * 1024 * 1024))
            c.assert_closed()

    def garbage() -> None:
        with raw(gateway) as c:
            c.handshake()
            c.send_bytes(_garbage(7, 2048))
            c.assert_closed()

    def before_connect() -> None:
        with raw(gateway) as c:
            c.send(command(T.PRODUCER, topic=new_topic(), producer_id=0, request_id=7))
            frames = c.assert_closed()
            assert [f.type for f in frames] == [T.ERROR]

    def bad_checksum() -> None:
        with raw(gateway) as c:
            c.handshake()
            name = c.create_producer(new_topic("crc"))
            c.send_message(1, 0, name, b"bad", corrupt="crc")
            assert c.expect(T.SEND_ERROR).send_error.error == pb.ChecksumError
            c.send_message(1, 1, name, b"good")
            assert c.expect(T.SEND_RECEIPT).send_receipt.sequence_id == 1

    def unknown_ids() -> None:
        with raw(gateway) as c:
            c.handshake()
            c.send_message(9, 0, "x", b"x")
            assert c.expect(T.SEND_ERROR).send_error.error == pb.NotAllowedError
            c.send(command(T.FLOW, consumer_id=9, messagePermits=10))
            assert c.request(T.UNSUBSCRIBE, T.ERROR, consumer_id=9).error.error == (
                pb.ConsumerNotFound
            )
            c.request(T.CLOSE_CONSUMER, T.SUCCESS, consumer_id=9)
            c.assert_open()

    def invalid_topics() -> None:
        with raw(gateway) as c:
            c.handshake()
            r = c.request(T.PRODUCER, T.ERROR, topic="foo://a/b/c", producer_id=1)
            assert r.error.error == pb.InvalidTopicName
            r = c.request(T.LOOKUP, T.LOOKUP_RESPONSE, topic="a/b")
            assert r.lookupTopicResponse.error == pb.InvalidTopicName

    def unsupported() -> None:
        with raw(gateway) as c:
            c.handshake()
            c.send(pb.BaseCommand(type=T.NEW_TXN))
            c.assert_open()

    def vanish() -> None:
        c = raw(gateway)
        c.send_bytes(struct.pack(">I", 1000) + b"\x00" * 10)
        c.close()

    return [
        oversized,
        garbage,
        before_connect,
        bad_checksum,
        unknown_ids,
        invalid_topics,
        unsupported,
        vanish,
    ]


def _collecting(fn: Callable[[], None], errors: list[BaseException]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    return run


def test_no_message_lost_while_bad_inputs_arrive(gateway: GatewayThread, live: LivePair) -> None:
    sent: list[bytes] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def produce() -> None:
        try:
            i = 0
            while not stop.is_set() or i < 50:
                payload = f"stream-{i}".encode()
                live.producer.send(payload)
                sent.append(payload)
                i += 1
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    bad = _bad_inputs(gateway)
    # Several rounds, some of them from parallel threads, while the producer streams.
    for _ in range(3):
        for attack in bad:
            attack()
        threads = [threading.Thread(target=_collecting(attack, errors)) for attack in bad]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
    stop.set()
    producer.join(3 * TIMEOUT)
    assert not producer.is_alive()
    assert not errors, errors

    received: list[bytes] = []
    while len(received) < len(sent):
        msg = live.consumer.receive(timeout_millis=int(TIMEOUT * 1000))
        received.append(msg.data())
        live.consumer.acknowledge(msg)
    assert sorted(received) == sorted(sent)
    assert received == sent, "Shared consumer with one member keeps the order"
    with pytest.raises(pulsar.Timeout):
        live.consumer.receive(timeout_millis=300)


# -- metadata no client library would write, read back through every front ----------------


def _length_delimited(number: int, data: bytes) -> bytes:
    return bytes([number << 3 | 2, len(data)]) + data


async def _peek_headers(url: str) -> tuple[int, dict[str, str], bytes]:
    """GET with aiohttp's client, whose parser refuses a malformed response."""
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as resp:
        return resp.status, dict(resp.headers), await resp.read()


def test_hostile_metadata_is_relayed_and_readable_everywhere(
    gateway: GatewayThread, client: Any, live: LivePair
) -> None:
    """What the fuzzer stored and other fronts could not read: string fields that are not
    UTF-8 (upb hands them over as bytes), control characters and separators in property
    names and values, times beyond year 9999, then a payload its codec cannot read. The
    official consumer gets the first as sent; the WebSocket consumer gets it as JSON (U+FFFD
    for the bytes, Java's signed years for the times); the admin peek answers 200 for both
    with headers a strict HTTP parser accepts, the second's payload served as stored, and the
    JSON peek lists the first as a message and the second whole, with the reason."""
    topic = new_topic("hostile-meta")
    local = topic.rsplit("/", 1)[1]
    consumer = client.subscribe(topic, "official")
    client.subscribe(topic, "peek").close()  # a backlog nobody consumes, for the admin peek
    metadata = pb.MessageMetadata(
        producer_name="raw", sequence_id=0, publish_time=2**63 - 1, event_time=2**63 - 1
    )
    metadata.properties.add(key="a b:\u00e9", value="line\r\nbreak\x00")
    hostile = (
        metadata.SerializeToString()
        + _length_delimited(4, _length_delimited(1, b"k\xff") + _length_delimited(2, b"\xfe"))
        + _length_delimited(6, b"key\xc3\x28")  # partition_key
    )
    unreadable = pb.MessageMetadata(
        producer_name="raw",
        sequence_id=1,
        publish_time=1,
        compression=pb.LZ4,
        uncompressed_size=100,
    )

    def send_raw(sequence: int, meta: bytes, payload: bytes) -> None:
        with raw(gateway) as conn:
            conn.handshake()
            conn.create_producer(topic)
            blob = make_blob(meta, payload)
            conn.send_payload(command(T.SEND, producer_id=1, sequence_id=sequence), blob)
            assert conn.expect(T.SEND_RECEIPT).send_receipt.sequence_id == sequence

    async def websocket_message() -> dict[str, Any]:
        async with connect(consumer_url(gateway, local, "ws", subscriptionType="Shared")) as ws:
            send_raw(0, hostile, b"hostile")
            received = consumer.receive(timeout_millis=int(TIMEOUT * 1000))
            assert received.data() == b"hostile"  # relayed as sent
            consumer.acknowledge(received)
            # Closed before the unreadable entry exists: the official client decompresses
            # what it is sent on arrival, with LZ4_decompress_fast, which trusts its input
            # and may crash the process on bytes that are not LZ4 (pulsar-client-cpp
            # CompressionCodecLZ4::decode). A Pulsar broker would relay them all the same.
            consumer.close()
            send_raw(1, unreadable.SerializeToString(), b"not lz4 at all")
            message: dict[str, Any] = await ws.receive()
            assert await ws.nothing_within(0.3)  # the unreadable one is skipped
            return message

    pushed = asyncio.run(websocket_message())
    assert base64.b64decode(pushed["payload"]) == b"hostile"
    assert pushed["publishTime"] == pushed["eventTime"] == "+292278994-08-17T07:12:55.807Z"
    assert pushed["key"] == "key\ufffd("
    assert pushed["properties"] == {"a b:\u00e9": "line\r\nbreak\x00", "k\ufffd": "\ufffd"}

    peek = f"{gateway.http_url}/admin/v2/persistent/public/default/{local}/subscription/peek"
    status, headers, body = asyncio.run(_peek_headers(f"{peek}/position/1"))
    assert (status, body) == (200, b"hostile")
    assert headers["X-Pulsar-publish-time"] == "+292278994-08-17T07:12:55.807Z"
    assert headers["X-Pulsar-partition-key"] == "key\ufffd("
    assert headers["X-Pulsar-PROPERTY-a%20b%3A%C3%A9"] == "line  break"
    assert headers["X-Pulsar-PROPERTY-k%EF%BF%BD"] == "\ufffd"
    status, headers, body = asyncio.run(_peek_headers(f"{peek}/position/2"))
    assert (status, body) == (200, b"not lz4 at all")
    assert headers["X-Pulsar-compression"] == "LZ4"

    # the JSON peek: the first split as any entry, the second whole, saying why
    status, listed = admin("GET", f"{peek}/peek?count=5")
    assert status == 200, listed
    first, second = listed["messages"]
    assert (first["key"], first["publishTime"]) == ("key\ufffd(", 2**63 - 1)
    assert first["properties"] == {"a b:\u00e9": "line\r\nbreak\x00", "k\ufffd": "\ufffd"}
    assert base64.b64decode(first["payload"]) == b"hostile"
    assert "error" not in first
    assert (second["position"], second["batchIndex"], second["sequenceId"]) == (2, -1, 1)
    assert base64.b64decode(second["payload"]) == b"not lz4 at all"
    assert second["error"].startswith("Not read as messages")
