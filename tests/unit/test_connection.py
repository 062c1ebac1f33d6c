"""The sans-I/O ServerConnection, driven with bytes built by the codec (no sockets, no Redis).

Covers the state table (``ACCEPTS``), the handshake, PING/PONG, the keep-alive verdict,
malformed input, unsupported commands, and the encoding of every outbound ``send_*`` frame
(each must decode to its type with every proto2 required field present: a frame missing one
makes the official client drop the connection: docs/binary_protocol.md "Framing").
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pulsar_gateway import entry_codec, frame_codec
from pulsar_gateway.adapters.pulsar_binary.commands import (
    Connect,
    Flow,
    Producer,
    Send,
    Unsupported,
)
from pulsar_gateway.adapters.pulsar_binary.connection import (
    ACCEPTS,
    PROTOCOL_VERSION,
    ConnectionState,
    ServerConnection,
)
from pulsar_gateway.core.model.entry import Delivery
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.frames import command

T = pb.BaseCommand.Type
U64_MINUS_ONE = 2**64 - 1

#: Types the official client accepts after CONNECTED (``ClientConnection::handleIncomingCommand``
#: in apache/pulsar-client-cpp; docs/binary_protocol.md "Requests and responses"); any other type
#: sent by the server makes it drop the connection.
CLIENT_ACCEPTS = frozenset(
    {
        T.SEND_RECEIPT,
        T.SEND_ERROR,
        T.SUCCESS,
        T.ERROR,
        T.PRODUCER_SUCCESS,
        T.PARTITIONED_METADATA_RESPONSE,
        T.LOOKUP_RESPONSE,
        T.CONSUMER_STATS_RESPONSE,
        T.GET_LAST_MESSAGE_ID_RESPONSE,
        T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
        T.GET_SCHEMA_RESPONSE,
        T.ACK_RESPONSE,
        T.CLOSE_PRODUCER,
        T.CLOSE_CONSUMER,
        T.PING,
        T.PONG,
        T.AUTH_CHALLENGE,
        T.ACTIVE_CONSUMER_CHANGE,
        T.TOPIC_MIGRATED,
        T.MESSAGE,
    }
)


# -- building inbound frames ---------------------------------------------------------------


def frame(type_: int, **fields: Any) -> bytes:
    return frame_codec.encode_command(command(type_, **fields))


def raw_frame(cmd: pb.BaseCommand) -> bytes:
    """Frame a command without the required-field check (to build invalid input)."""
    data = cmd.SerializePartialToString()
    return struct.pack(">II", len(data) + 4, len(data)) + data


def connect_frame(protocol_version: int | None = 20, client_version: str = "test-client") -> bytes:
    cmd = command(T.CONNECT, client_version=client_version, auth_method_name="none")
    if protocol_version is not None:
        cmd.connect.protocol_version = protocol_version
    return frame_codec.encode_command(cmd)


def make_blob(payload: bytes = b"hello", sequence_id: int = 0) -> bytes:
    metadata = pb.MessageMetadata(
        producer_name="p", sequence_id=sequence_id, publish_time=int(time.time() * 1000)
    )
    return entry_codec.make_blob(metadata, payload)


def send_frame(producer_id: int = 0, sequence_id: int = 0, blob: bytes | None = None) -> bytes:
    cmd = command(T.SEND, producer_id=producer_id, sequence_id=sequence_id)
    return frame_codec.encode_payload_command(cmd, make_blob() if blob is None else blob)


def decode_all(data: bytes) -> list[frame_codec.Frame]:
    """Every frame in ``data`` (which must hold whole frames only)."""
    decoder = frame_codec.FrameDecoder(1 << 30)
    decoder.feed(data)
    frames = []
    while (f := decoder.next_frame()) is not None:
        frames.append(f)
    assert decoder.buffered == 0, "trailing partial frame"
    return frames


def out_commands(conn: ServerConnection) -> list[pb.BaseCommand]:
    return [f.command for f in decode_all(conn.data_to_send())]


def only_command(conn: ServerConnection) -> pb.BaseCommand:
    cmds = out_commands(conn)
    assert len(cmds) == 1, [pb.BaseCommand.Type.Name(c.type) for c in cmds]
    return cmds[0]


def sub_message(cmd: pb.BaseCommand) -> Any:
    field = cmd.DESCRIPTOR.fields_by_number[cmd.type]
    assert cmd.HasField(field.name), f"{field.name} missing from its own frame"
    return getattr(cmd, field.name)


@pytest.fixture
def conn() -> ServerConnection:
    return ServerConnection()


@pytest.fixture
def connected() -> ServerConnection:
    c = ServerConnection(server_version="gw-test")
    c.receive_data(connect_frame())
    assert c.state is ConnectionState.CONNECTED
    c.events_received()
    c.data_to_send()
    return c


def assert_closed(c: ServerConnection) -> None:
    assert c.close_expected()
    assert c.state is ConnectionState.CLOSED
    assert c.close_reason


def assert_open(c: ServerConnection) -> None:
    assert not c.close_expected()
    assert c.state is ConnectionState.CONNECTED


# -- the state table ---------------------------------------------------------------------


def test_accepts_covers_every_state() -> None:
    assert set(ACCEPTS) == set(ConnectionState)


def test_start_accepts_only_connect() -> None:
    assert ACCEPTS[ConnectionState.START] == frozenset({T.CONNECT})


def test_connected_accepts_everything_but_connect() -> None:
    every = frozenset(pb.BaseCommand.Type.values())
    assert ACCEPTS[ConnectionState.CONNECTED] == every - {T.CONNECT}
    assert T.CONNECT not in ACCEPTS[ConnectionState.CONNECTED]
    for t in (T.PING, T.PONG, T.PRODUCER, T.SEND, T.SUBSCRIBE, T.FLOW, T.ACK, T.LOOKUP):
        assert t in ACCEPTS[ConnectionState.CONNECTED]


def test_closed_accepts_nothing() -> None:
    assert ACCEPTS[ConnectionState.CLOSED] == frozenset()


def test_new_connection_starts_in_start(conn: ServerConnection) -> None:
    assert conn.state is ConnectionState.START
    assert not conn.close_expected()
    assert conn.data_to_send() == b""
    assert conn.events_received() == []


# -- handshake ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("client_version", "expected"),
    [(20, 20), (19, 19), (6, 6), (1, 1), (0, 0), (21, PROTOCOL_VERSION), (999, PROTOCOL_VERSION)],
)
def test_connect_answers_connected_with_min_protocol_version(
    client_version: int, expected: int
) -> None:
    conn = ServerConnection(server_version="gw-x", max_message_size=123456)
    conn.receive_data(connect_frame(client_version, client_version="Pulsar-CPP-v4.2.0"))
    cmd = only_command(conn)
    assert cmd.type == T.CONNECTED
    assert cmd.IsInitialized()
    assert cmd.connected.server_version == "gw-x"
    assert cmd.connected.HasField("protocol_version")
    assert cmd.connected.protocol_version == expected
    assert cmd.connected.max_message_size == 123456
    assert conn.state is ConnectionState.CONNECTED
    assert conn.protocol_version == expected
    assert conn.client_version == "Pulsar-CPP-v4.2.0"
    events = conn.events_received()
    assert len(events) == 1
    assert isinstance(events[0], Connect)
    assert events[0].client_version == "Pulsar-CPP-v4.2.0"
    assert events[0].protocol_version == client_version
    assert events[0].auth_method_name == "none"
    assert not conn.close_expected()


def test_connect_without_protocol_version_reads_as_zero(conn: ServerConnection) -> None:
    conn.receive_data(connect_frame(None))
    cmd = only_command(conn)
    assert cmd.connected.HasField("protocol_version")
    assert cmd.connected.protocol_version == 0


def test_connected_defaults(conn: ServerConnection) -> None:
    conn.receive_data(connect_frame())
    cmd = only_command(conn)
    assert cmd.connected.protocol_version == PROTOCOL_VERSION == 20
    assert cmd.connected.max_message_size == frame_codec.DEFAULT_MAX_MESSAGE_SIZE
    assert cmd.connected.server_version


def test_connect_with_auth_data_is_passed_on(conn: ServerConnection) -> None:
    cmd = command(T.CONNECT, client_version="c", protocol_version=20)
    cmd.connect.auth_method_name = "token"
    cmd.connect.auth_data = b"eyJtoken"
    conn.receive_data(frame_codec.encode_command(cmd))
    (event,) = conn.events_received()
    assert isinstance(event, Connect)
    assert event.auth_method_name == "token"
    assert event.auth_data == b"eyJtoken"


def test_command_before_connect_gets_error_and_closes(conn: ServerConnection) -> None:
    conn.receive_data(
        frame(T.PRODUCER, topic="persistent://public/default/t", producer_id=1, request_id=7)
    )
    cmd = only_command(conn)
    assert cmd.type == T.ERROR
    assert cmd.IsInitialized()
    assert cmd.error.request_id == 7
    assert cmd.error.error == pb.NotAllowedError
    assert cmd.error.message
    assert_closed(conn)
    assert conn.events_received() == []


@pytest.mark.parametrize(
    "data",
    [
        frame(T.PING),
        frame(T.PONG),
        frame(T.FLOW, consumer_id=0, messagePermits=10),
        send_frame(),
    ],
    ids=["PING", "PONG", "FLOW", "SEND"],
)
def test_command_without_request_id_before_connect_closes_silently(
    conn: ServerConnection, data: bytes
) -> None:
    conn.receive_data(data)
    assert conn.data_to_send() == b""
    assert_closed(conn)
    assert conn.events_received() == []


def test_frames_after_a_refused_command_are_not_processed(conn: ServerConnection) -> None:
    conn.receive_data(frame(T.LOOKUP, topic="t", request_id=3) + connect_frame() + frame(T.PING))
    cmd = only_command(conn)
    assert cmd.type == T.ERROR
    assert cmd.error.request_id == 3
    assert_closed(conn)
    assert conn.events_received() == []


def test_second_connect_closes(connected: ServerConnection) -> None:
    connected.receive_data(connect_frame())
    assert_closed(connected)
    out = out_commands(connected)
    assert all(c.type != T.CONNECTED for c in out)
    assert connected.events_received() == []


def test_handshake_split_into_single_bytes(conn: ServerConnection) -> None:
    data = connect_frame() + frame(T.PING)
    for i in range(len(data)):
        conn.receive_data(data[i : i + 1])
    assert [c.type for c in out_commands(conn)] == [T.CONNECTED, T.PONG]
    assert [type(e) for e in conn.events_received()] == [Connect]


def test_many_frames_in_one_read(conn: ServerConnection) -> None:
    flows = b"".join(frame(T.FLOW, consumer_id=i, messagePermits=i + 1) for i in range(50))
    conn.receive_data(connect_frame() + flows)
    events = conn.events_received()
    assert isinstance(events[0], Connect)
    assert events[1:] == [Flow(i, i + 1) for i in range(50)]


# -- PING / PONG ---------------------------------------------------------------------------


def test_ping_gets_pong_and_no_event(connected: ServerConnection) -> None:
    connected.receive_data(frame(T.PING))
    cmd = only_command(connected)
    assert cmd.type == T.PONG
    assert cmd.HasField("pong")
    assert connected.events_received() == []
    assert_open(connected)


def test_pong_is_consumed_silently(connected: ServerConnection) -> None:
    connected.receive_data(frame(T.PONG))
    assert connected.data_to_send() == b""
    assert connected.events_received() == []
    assert_open(connected)


def test_each_ping_gets_its_own_pong(connected: ServerConnection) -> None:
    connected.receive_data(frame(T.PING) * 3)
    assert [c.type for c in out_commands(connected)] == [T.PONG] * 3


# -- keep-alive ----------------------------------------------------------------------------


def test_keepalive_counts_connect_as_traffic(connected: ServerConnection) -> None:
    # The CONNECT frame was heard in this interval: no PING yet.
    connected.keepalive_tick()
    assert connected.data_to_send() == b""
    assert_open(connected)


def quiet(c: ServerConnection) -> ServerConnection:
    """Let one interval pass that consumes the liveness of the handshake."""
    c.keepalive_tick()
    assert c.data_to_send() == b""
    return c


def test_keepalive_pings_a_quiet_peer_then_closes(connected: ServerConnection) -> None:
    quiet(connected)
    connected.keepalive_tick()
    cmd = only_command(connected)
    assert cmd.type == T.PING
    assert cmd.HasField("ping")
    assert_open(connected)
    connected.keepalive_tick()
    assert_closed(connected)
    assert connected.data_to_send() == b""


def test_keepalive_spares_a_connection_the_gateway_does_not_read(
    connected: ServerConnection,
) -> None:
    """While reading is paused (throttled), the PONG may be in the unread bytes: an
    unanswered PING closes nothing (Pulsar's PulsarHandler checks autoRead first)."""
    quiet(connected)
    connected.keepalive_tick()
    assert only_command(connected).type == T.PING
    connected.keepalive_tick(reading=False)
    connected.keepalive_tick(reading=False)
    assert_open(connected)
    connected.receive_data(frame(T.PONG))  # reading again: the answer was there
    connected.keepalive_tick()
    assert_open(connected)


def test_a_connection_without_connect_is_closed_at_the_first_tick_even_unread() -> None:
    conn = ServerConnection()
    conn.keepalive_tick(reading=False)
    assert_closed(conn)


@pytest.mark.parametrize(
    "answer",
    [
        frame(T.PONG),
        frame(T.PING),
        frame(T.FLOW, consumer_id=0, messagePermits=1),
        send_frame(),
        frame(T.ACK, consumer_id=0, ack_type=pb.CommandAck.Individual),
    ],
    ids=["PONG", "PING", "FLOW", "SEND", "ACK"],
)
def test_any_frame_answers_the_keepalive(connected: ServerConnection, answer: bytes) -> None:
    quiet(connected)
    connected.keepalive_tick()
    assert only_command(connected).type == T.PING
    connected.receive_data(answer)
    connected.data_to_send()
    connected.keepalive_tick()
    assert_open(connected)
    # The peer was heard in that interval, so no new PING either ...
    assert connected.data_to_send() == b""
    # ... but a quiet interval after it starts the cycle again.
    connected.keepalive_tick()
    assert only_command(connected).type == T.PING
    connected.keepalive_tick()
    assert_closed(connected)


def test_busy_peer_is_never_pinged(connected: ServerConnection) -> None:
    for i in range(10):
        connected.receive_data(frame(T.FLOW, consumer_id=0, messagePermits=i + 1))
        connected.keepalive_tick()
        assert connected.data_to_send() == b""
        assert_open(connected)


def test_keepalive_in_start_state_closes(conn: ServerConnection) -> None:
    conn.keepalive_tick()
    assert_closed(conn)
    assert conn.data_to_send() == b""


def test_keepalive_after_close_does_nothing(connected: ServerConnection) -> None:
    connected.close("test")
    connected.keepalive_tick()
    assert connected.data_to_send() == b""
    assert connected.close_reason == "test"


# -- malformed input ---------------------------------------------------------------------


def test_garbage_closes(connected: ServerConnection) -> None:
    body = b"\xff" * 96
    connected.receive_data(struct.pack(">II", len(body) + 4, len(body)) + body)
    assert_closed(connected)
    assert connected.events_received() == []


def test_garbage_before_connect_closes(conn: ServerConnection) -> None:
    conn.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_closed(conn)
    assert conn.data_to_send() == b""


@pytest.mark.parametrize("max_message_size", [1024, frame_codec.DEFAULT_MAX_MESSAGE_SIZE])
def test_oversized_frame_header_closes(max_message_size: int) -> None:
    conn = ServerConnection(max_message_size=max_message_size)
    conn.receive_data(connect_frame())
    conn.data_to_send()
    limit = max_message_size + frame_codec.FRAME_PADDING
    # totalSize counts the bytes after itself: totalSize + 4 == limit + 1.
    conn.receive_data(struct.pack(">I", limit - 3))
    assert_closed(conn)
    assert conn.events_received() == [Connect("test-client", 20, "none", b"")]


def test_huge_frame_header_closes_at_once(connected: ServerConnection) -> None:
    connected.receive_data(struct.pack(">I", 50 * 1024 * 1024))
    assert_closed(connected)


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    max_message_size = 1024
    conn = ServerConnection(max_message_size=max_message_size)
    conn.receive_data(connect_frame())
    conn.events_received()
    limit = max_message_size + frame_codec.FRAME_PADDING
    header = send_frame(blob=make_blob(b""))
    payload = b"x" * (limit - len(header))
    data = send_frame(blob=make_blob(payload))
    assert len(data) == limit
    conn.receive_data(data)
    assert_open(conn)
    (event,) = conn.events_received()
    assert isinstance(event, Send)
    assert event.payload.payload == payload
    assert event.payload.checksum_ok
    # One byte more is refused.
    conn.receive_data(send_frame(blob=make_blob(payload + b"x")))
    assert_closed(conn)
    assert conn.events_received() == []


@pytest.mark.parametrize(
    ("type_", "present"),
    [
        (T.SUBSCRIBE, None),
        (T.PRODUCER, None),
        (T.LOOKUP, None),
        (T.FLOW, None),
        (T.PRODUCER, "subscribe"),
    ],
    ids=["SUBSCRIBE-empty", "PRODUCER-empty", "LOOKUP-empty", "FLOW-empty", "PRODUCER-wrong"],
)
def test_type_without_its_sub_message_closes(
    connected: ServerConnection, type_: int, present: str | None
) -> None:
    cmd = pb.BaseCommand(type=type_)  # type: ignore[arg-type]
    if present == "subscribe":
        cmd.subscribe.topic = "t"
        cmd.subscribe.subscription = "s"
        cmd.subscribe.subType = pb.CommandSubscribe.Shared
        cmd.subscribe.consumer_id = 1
        cmd.subscribe.request_id = 2
    connected.receive_data(frame_codec.encode_command(cmd))
    assert_closed(connected)
    assert connected.events_received() == []


def test_missing_required_field_closes(connected: ServerConnection) -> None:
    cmd = pb.BaseCommand(type=T.PRODUCER)
    cmd.producer.topic = "t"
    cmd.producer.producer_id = 1  # request_id (required) left out
    connected.receive_data(raw_frame(cmd))
    assert_closed(connected)
    assert connected.events_received() == []


def test_unknown_command_type_closes(connected: ServerConnection) -> None:
    # BaseCommand{type=99}: proto2 drops the unknown enum value, so the required
    # `type` is missing and the frame is malformed.
    body = b"\x08\x63"
    connected.receive_data(struct.pack(">II", len(body) + 4, len(body)) + body)
    assert_closed(connected)


def test_payload_on_a_simple_command_closes(connected: ServerConnection) -> None:
    data = frame(T.PING)
    body = data[4:] + b"\x0e\x01junk"
    connected.receive_data(struct.pack(">I", len(body)) + body)
    assert_closed(connected)


def test_send_without_payload_closes(connected: ServerConnection) -> None:
    connected.receive_data(raw_frame(command(T.SEND, producer_id=0, sequence_id=0)))
    assert_closed(connected)


def test_frames_after_malformed_input_are_ignored(connected: ServerConnection) -> None:
    connected.receive_data(struct.pack(">II", 8, 4) + b"\xff" * 4 + frame(T.PING))
    assert_closed(connected)
    assert connected.data_to_send() == b""
    connected.receive_data(frame(T.PING))
    assert connected.data_to_send() == b""
    assert connected.events_received() == []


def test_bad_checksum_is_an_event_not_a_close(connected: ServerConnection) -> None:
    blob = bytearray(make_blob(b"payload"))
    blob[2] ^= 0xFF  # corrupt the CRC32C
    connected.receive_data(send_frame(producer_id=3, sequence_id=9, blob=bytes(blob)))
    assert_open(connected)
    (event,) = connected.events_received()
    assert isinstance(event, Send)
    assert (event.producer_id, event.sequence_id) == (3, 9)
    assert not event.payload.checksum_ok


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=st.lists(st.binary(max_size=64), max_size=8), handshake=st.booleans())
def test_arbitrary_bytes_never_raise(chunks: list[bytes], handshake: bool) -> None:
    conn = ServerConnection(max_message_size=1024)
    if handshake:
        conn.receive_data(connect_frame())
    for chunk in chunks:
        conn.receive_data(chunk)
        for cmd in out_commands(conn):
            assert cmd.IsInitialized()
        conn.events_received()
    if conn.close_expected():
        assert conn.state is ConnectionState.CLOSED


def test_eof_closes(connected: ServerConnection) -> None:
    connected.receive_eof()
    assert_closed(connected)
    connected.receive_data(frame(T.PING))
    assert connected.data_to_send() == b""


def test_close_on_gateway_initiative(connected: ServerConnection) -> None:
    connected.close("shutting down")
    assert_closed(connected)
    assert connected.close_reason == "shutting down"
    connected.close("again")
    assert connected.close_reason == "shutting down"


# -- unsupported commands ----------------------------------------------------------------


def consumer_stats(request_id: int) -> bytes:
    cmd = pb.BaseCommand(type=T.CONSUMER_STATS)
    cmd.consumerStats.request_id = request_id
    cmd.consumerStats.consumer_id = 1
    return frame_codec.encode_command(cmd)


def test_unsupported_command_reaches_the_events(connected: ServerConnection) -> None:
    connected.receive_data(consumer_stats(42))
    assert_open(connected)
    assert connected.data_to_send() == b""
    (event,) = connected.events_received()
    assert event == Unsupported(T.CONSUMER_STATS, "CONSUMER_STATS", 42)
    connected.refuse_unsupported(event)
    cmd = only_command(connected)
    assert cmd.type == T.ERROR
    assert cmd.IsInitialized()
    assert cmd.error.request_id == 42
    assert cmd.error.error == pb.NotAllowedError
    assert "CONSUMER_STATS" in cmd.error.message
    assert_open(connected)


def test_unsupported_command_without_request_id(connected: ServerConnection) -> None:
    connected.receive_data(frame(T.REACHED_END_OF_TOPIC, consumer_id=5))
    (event,) = connected.events_received()
    assert isinstance(event, Unsupported)
    assert event.type == T.REACHED_END_OF_TOPIC
    assert event.request_id is None
    connected.refuse_unsupported(event)
    assert connected.data_to_send() == b""
    assert_open(connected)


def test_unsupported_command_before_connect_is_refused_and_closes(
    conn: ServerConnection,
) -> None:
    conn.receive_data(consumer_stats(11))
    cmd = only_command(conn)
    assert cmd.type == T.ERROR
    assert cmd.error.request_id == 11
    assert_closed(conn)


def test_supported_command_is_typed(connected: ServerConnection) -> None:
    connected.receive_data(
        frame(T.PRODUCER, topic="persistent://public/default/t", producer_id=4, request_id=5)
    )
    (event,) = connected.events_received()
    assert isinstance(event, Producer)
    assert (event.request_id, event.producer_id, event.topic) == (
        5,
        4,
        "persistent://public/default/t",
    )


# -- outbound frames -----------------------------------------------------------------------

BLOB = make_blob(b"stored")

#: name -> (call, expected type, check of the sub-message)
Case = tuple[Callable[[ServerConnection], None], int, Callable[[Any], None]]


def _check_connected(r: Any) -> None:
    assert r.server_version == "gw-test"
    assert r.HasField("protocol_version") and r.protocol_version == 20
    assert r.max_message_size == frame_codec.DEFAULT_MAX_MESSAGE_SIZE


def _check_pmr_ok(r: Any) -> None:
    assert r.request_id == 3
    assert r.HasField("partitions") and r.partitions == 0
    assert r.HasField("response"), "response must be explicit even for Success"
    assert r.response == pb.CommandPartitionedTopicMetadataResponse.Success


def _check_pmr_n(r: Any) -> None:
    assert r.partitions == 4
    assert r.HasField("response")
    assert r.response == pb.CommandPartitionedTopicMetadataResponse.Success


def _check_pmr_error(r: Any) -> None:
    assert r.request_id == 3
    assert r.response == pb.CommandPartitionedTopicMetadataResponse.Failed
    assert r.HasField("error") and r.error == pb.InvalidTopicName
    assert r.message == "bad"


def _check_lookup(r: Any) -> None:
    assert r.request_id == 8
    assert r.HasField("response") and r.response == pb.CommandLookupTopicResponse.Connect
    assert r.brokerServiceUrl == "pulsar://127.0.0.1:6650"
    assert r.brokerServiceUrlTls == "pulsar://127.0.0.1:6650"
    assert r.authoritative is True
    assert r.HasField("proxy_through_service_url") and r.proxy_through_service_url is False


def _check_lookup_error(r: Any) -> None:
    assert r.request_id == 8
    assert r.response == pb.CommandLookupTopicResponse.Failed
    assert r.error == pb.InvalidTopicName
    assert r.message == "bad"


def _check_producer_success(r: Any) -> None:
    assert r.request_id == 1
    assert r.producer_name == "prod"
    assert r.last_sequence_id == -1
    assert r.producer_ready is True
    assert not r.HasField("schema_version")


def _check_producer_success_seq(r: Any) -> None:
    assert r.last_sequence_id == 41


def _check_receipt(r: Any) -> None:
    assert (r.producer_id, r.sequence_id) == (2, 17)
    assert r.HasField("message_id"), "a receipt without message_id shows (0,0) to the user"
    assert (r.message_id.ledgerId, r.message_id.entryId) == (1700000000000, 5)


def _check_send_error(r: Any) -> None:
    assert (r.producer_id, r.sequence_id) == (2, 17)
    assert r.error == pb.ChecksumError
    assert r.message == "crc"


def _check_success(r: Any) -> None:
    assert r.request_id == 12


def _check_error(r: Any) -> None:
    assert r.request_id == 12
    assert r.error == pb.ServiceNotReady
    assert r.message == "later"


def _check_ack_ok(r: Any) -> None:
    assert (r.consumer_id, r.request_id) == (6, 7)
    assert not r.HasField("error")


def _check_ack_error(r: Any) -> None:
    assert (r.consumer_id, r.request_id) == (6, 7)
    assert r.error == pb.ConsumerNotFound
    assert r.message == "gone"


def _check_close_producer(r: Any) -> None:
    assert r.producer_id == 9
    assert r.HasField("request_id")


def _check_reached_end(r: Any) -> None:
    assert r.consumer_id == 9


def _check_close_consumer(r: Any) -> None:
    assert r.consumer_id == 9
    assert r.HasField("request_id")


def _check_last_empty(r: Any) -> None:
    assert r.request_id == 4
    assert r.last_message_id.ledgerId == U64_MINUS_ONE
    assert r.last_message_id.entryId == U64_MINUS_ONE
    assert not r.last_message_id.HasField("partition")
    assert not r.last_message_id.HasField("batch_index")
    assert r.HasField("consumer_mark_delete_position")
    assert r.consumer_mark_delete_position.ledgerId == U64_MINUS_ONE
    assert r.consumer_mark_delete_position.entryId == U64_MINUS_ONE


def _check_last_full(r: Any) -> None:
    m = r.last_message_id
    assert (m.ledgerId, m.entryId, m.partition, m.batch_index) == (1700000000000, 3, 2, 4)
    md = r.consumer_mark_delete_position
    assert (md.ledgerId, md.entryId) == (1700000000000, 2)


def _check_last_no_mark_delete(r: Any) -> None:
    assert r.last_message_id.entryId == 0
    assert not r.HasField("consumer_mark_delete_position")


def _check_topics(r: Any) -> None:
    assert r.request_id == 5
    assert list(r.topics) == ["persistent://public/default/a", "persistent://public/default/b"]


def _check_topics_empty(r: Any) -> None:
    assert r.request_id == 5
    assert list(r.topics) == []


def _check_schema_error(r: Any) -> None:
    assert r.request_id == 13
    assert r.error_code == pb.TopicNotFound
    assert r.error_message == "No schema found"


def _check_producer_success_full(r: Any) -> None:
    assert r.schema_version == b"\x00\x00\x00\x00\x00\x00\x00\x02"
    assert r.topic_epoch == 3
    assert r.producer_ready is True


def _check_producer_queued(r: Any) -> None:
    assert r.producer_ready is False
    assert not r.HasField("topic_epoch")


def _check_schema(r: Any) -> None:
    assert r.request_id == 13
    assert not r.HasField("error_code")
    assert (r.schema.type, r.schema.name, r.schema.schema_data) == (pb.Schema.Avro, "n", b"{}")
    assert [(p.key, p.value) for p in r.schema.properties] == [("k", "v")]
    assert r.schema_version == bytes(7) + b"\x01"


def _check_get_or_create(r: Any) -> None:
    assert r.request_id == 14
    assert not r.HasField("error_code")
    assert r.schema_version == bytes(8)


def _check_get_or_create_error(r: Any) -> None:
    assert r.request_id == 14
    assert r.error_code == pb.IncompatibleSchema
    assert r.error_message == "no"
    assert not r.HasField("schema_version")


def _check_ping(r: Any) -> None:
    pass


def _check_active_change(m: Any) -> None:
    assert (m.consumer_id, m.is_active) == (4, True)


def _check_auth_challenge(m: Any) -> None:
    # Pulsar's AuthData.REFRESH_AUTH_DATA, under the connection's method ("" before CONNECT)
    assert m.challenge.auth_data == b"PulsarAuthRefresh"
    assert m.server_version


OUTBOUND: dict[str, Case] = {
    "send_active_consumer_change": (
        lambda c: c.send_active_consumer_change(4, True),
        T.ACTIVE_CONSUMER_CHANGE,
        _check_active_change,
    ),
    "send_auth_challenge": (
        lambda c: c.send_auth_challenge(),
        T.AUTH_CHALLENGE,
        _check_auth_challenge,
    ),
    "send_connected": (lambda c: c.send_connected(), T.CONNECTED, _check_connected),
    "send_ping": (lambda c: c.send_ping(), T.PING, _check_ping),
    "send_pong": (lambda c: c.send_pong(), T.PONG, _check_ping),
    "send_success": (lambda c: c.send_success(12), T.SUCCESS, _check_success),
    "send_error": (
        lambda c: c.send_error(12, pb.ServiceNotReady, "later"),
        T.ERROR,
        _check_error,
    ),
    "send_partition_metadata_response": (
        lambda c: c.send_partition_metadata_response(3, 0),
        T.PARTITIONED_METADATA_RESPONSE,
        _check_pmr_ok,
    ),
    "send_partition_metadata_response-4": (
        lambda c: c.send_partition_metadata_response(3, 4),
        T.PARTITIONED_METADATA_RESPONSE,
        _check_pmr_n,
    ),
    "send_partition_metadata_error": (
        lambda c: c.send_partition_metadata_error(3, pb.InvalidTopicName, "bad"),
        T.PARTITIONED_METADATA_RESPONSE,
        _check_pmr_error,
    ),
    "send_lookup_response": (
        lambda c: c.send_lookup_response(8, "pulsar://127.0.0.1:6650"),
        T.LOOKUP_RESPONSE,
        _check_lookup,
    ),
    "send_lookup_error": (
        lambda c: c.send_lookup_error(8, pb.InvalidTopicName, "bad"),
        T.LOOKUP_RESPONSE,
        _check_lookup_error,
    ),
    "send_producer_success": (
        lambda c: c.send_producer_success(1, "prod"),
        T.PRODUCER_SUCCESS,
        _check_producer_success,
    ),
    "send_producer_success-seq": (
        lambda c: c.send_producer_success(1, "prod", 41),
        T.PRODUCER_SUCCESS,
        _check_producer_success_seq,
    ),
    "send_producer_success-full": (
        lambda c: c.send_producer_success(
            1, "prod", schema_version=bytes(7) + b"\x02", topic_epoch=3
        ),
        T.PRODUCER_SUCCESS,
        _check_producer_success_full,
    ),
    "send_producer_success-queued": (
        lambda c: c.send_producer_success(1, "prod", producer_ready=False),
        T.PRODUCER_SUCCESS,
        _check_producer_queued,
    ),
    "send_get_schema_response": (
        lambda c: c.send_get_schema_response(
            13, pb.Schema.Avro, "n", b"{}", [("k", "v")], bytes(7) + b"\x01"
        ),
        T.GET_SCHEMA_RESPONSE,
        _check_schema,
    ),
    "send_get_or_create_schema_response": (
        lambda c: c.send_get_or_create_schema_response(14, bytes(8)),
        T.GET_OR_CREATE_SCHEMA_RESPONSE,
        _check_get_or_create,
    ),
    "send_get_or_create_schema_error": (
        lambda c: c.send_get_or_create_schema_error(14, pb.IncompatibleSchema, "no"),
        T.GET_OR_CREATE_SCHEMA_RESPONSE,
        _check_get_or_create_error,
    ),
    "send_send_receipt": (
        lambda c: c.send_send_receipt(2, 17, 1700000000000, 5),
        T.SEND_RECEIPT,
        _check_receipt,
    ),
    "send_send_error": (
        lambda c: c.send_send_error(2, 17, pb.ChecksumError, "crc"),
        T.SEND_ERROR,
        _check_send_error,
    ),
    "send_ack_response": (
        lambda c: c.send_ack_response(6, 7),
        T.ACK_RESPONSE,
        _check_ack_ok,
    ),
    "send_ack_response-error": (
        lambda c: c.send_ack_response(6, 7, pb.ConsumerNotFound, "gone"),
        T.ACK_RESPONSE,
        _check_ack_error,
    ),
    "send_close_producer": (
        lambda c: c.send_close_producer(9),
        T.CLOSE_PRODUCER,
        _check_close_producer,
    ),
    "send_close_consumer": (
        lambda c: c.send_close_consumer(9),
        T.CLOSE_CONSUMER,
        _check_close_consumer,
    ),
    "send_reached_end_of_topic": (
        lambda c: c.send_reached_end_of_topic(9),
        T.REACHED_END_OF_TOPIC,
        _check_reached_end,
    ),
    "send_last_message_id_response": (
        lambda c: c.send_last_message_id_response(4, (-1, -1, -1, -1), (-1, -1)),
        T.GET_LAST_MESSAGE_ID_RESPONSE,
        _check_last_empty,
    ),
    "send_last_message_id_response-full": (
        lambda c: c.send_last_message_id_response(4, (1700000000000, 3, 2, 4), (1700000000000, 2)),
        T.GET_LAST_MESSAGE_ID_RESPONSE,
        _check_last_full,
    ),
    "send_last_message_id_response-no-md": (
        lambda c: c.send_last_message_id_response(4, (5, 0, -1, -1), None),
        T.GET_LAST_MESSAGE_ID_RESPONSE,
        _check_last_no_mark_delete,
    ),
    "send_get_topics_of_namespace_response": (
        lambda c: c.send_get_topics_of_namespace_response(
            5, ["persistent://public/default/a", "persistent://public/default/b"]
        ),
        T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
        _check_topics,
    ),
    "send_get_topics_of_namespace_response-empty": (
        lambda c: c.send_get_topics_of_namespace_response(5, []),
        T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
        _check_topics_empty,
    ),
    "send_get_schema_error": (
        lambda c: c.send_get_schema_error(13, pb.TopicNotFound, "No schema found"),
        T.GET_SCHEMA_RESPONSE,
        _check_schema_error,
    ),
}


@pytest.mark.parametrize("name", sorted(OUTBOUND))
def test_outbound_frame(connected: ServerConnection, name: str) -> None:
    call, expected_type, check = OUTBOUND[name]
    call(connected)
    frames = decode_all(connected.data_to_send())
    assert len(frames) == 1
    cmd = frames[0].command
    assert frames[0].payload is None
    assert cmd.type == expected_type
    assert cmd.IsInitialized()
    # CONNECTED is only accepted during the handshake; every other frame must be in the
    # client's accept list for the ready state.
    # GET_OR_CREATE_SCHEMA_RESPONSE only answers a command this client never sends;
    # REACHED_END_OF_TOPIC is sent only to other clients (takes_end_of_topic).
    if cmd.type not in (T.CONNECTED, T.GET_OR_CREATE_SCHEMA_RESPONSE, T.REACHED_END_OF_TOPIC):
        assert cmd.type in CLIENT_ACCEPTS, "the official client would drop the connection"
    check(sub_message(cmd))
    # Exactly one sub-message besides `type` (docs/binary_protocol.md "Framing").
    own = cmd.DESCRIPTOR.fields_by_number[cmd.type].name
    assert [f.name for f, _ in cmd.ListFields()] == ["type", own]
    # Sending does not change the connection's state.
    assert_open(connected)


@pytest.mark.parametrize(("partition", "redelivery_count"), [(-1, 0), (2, 0), (0, 3), (7, 100)])
def test_outbound_message_frame(
    connected: ServerConnection, partition: int, redelivery_count: int
) -> None:
    delivery = Delivery(b"1700000000123-42", BLOB, 1, redelivery_count)
    connected.send_messages(11, partition, [delivery])
    (f,) = decode_all(connected.data_to_send())
    cmd = f.command
    assert cmd.type == T.MESSAGE
    assert cmd.IsInitialized()
    m = cmd.message
    assert m.consumer_id == 11
    assert (m.message_id.ledgerId, m.message_id.entryId) == (1700000000123, 42)
    if partition == -1:
        assert not m.message_id.HasField("partition")
    else:
        assert m.message_id.partition == partition
    assert m.redelivery_count == redelivery_count
    assert f.payload is not None
    assert f.payload.blob == BLOB
    assert f.payload.checksum_ok
    assert f.payload.payload == b"stored"


def test_refuse_unsupported_frame(connected: ServerConnection) -> None:
    connected.refuse_unsupported(Unsupported(T.END_TXN, "END_TXN", 77))
    cmd = only_command(connected)
    assert cmd.type == T.ERROR
    assert cmd.IsInitialized()
    assert cmd.error.request_id == 77
    assert cmd.error.error == pb.NotAllowedError


@pytest.mark.parametrize(
    ("client_version", "takes"),
    [
        ("Pulsar-CPP-v3.7.0", False),
        ("Pulsar-CPP-v3.7.0-my-app", False),
        ("Pulsar-Java-v4.0.0", True),
        ("", True),
    ],
)
def test_the_end_of_topic_goes_only_to_clients_that_handle_it(
    client_version: str, takes: bool
) -> None:
    conn = ServerConnection()
    conn.client_version = client_version
    assert conn.takes_end_of_topic is takes


def test_every_send_method_is_covered() -> None:
    methods = {n for n in dir(ServerConnection) if n.startswith("send_")}
    covered = {name.split("-")[0] for name in OUTBOUND} | {"send_messages"}
    assert methods == covered


def test_outbound_frames_are_concatenated_in_order(connected: ServerConnection) -> None:
    connected.send_success(1)
    connected.send_messages(0, -1, [Delivery(b"1-1", BLOB, 1, 0)])
    connected.send_success(2)
    types = [f.command.type for f in decode_all(connected.data_to_send())]
    assert types == [T.SUCCESS, T.MESSAGE, T.SUCCESS]
    assert connected.data_to_send() == b""
