"""pulsar_gateway.adapters.pulsar_binary.codec: frames as data, no sockets. (The blob,
batches and metadata a frame carries are tests/unit/test_entry_codec.py's.)

Every decoder case goes through ``tr`` (after h11's tests/test_io.py): the
input whole, the input one byte at a time, and the input followed by the
start of another frame, which must stay buffered. Golden frames are written
field by field; hypothesis checks the decoder's contract (frames or CodecError,
nothing else) and encode/decode round trips.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from google.protobuf.message import EncodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pulsar_gateway import frame_codec
from pulsar_gateway.core.model.entry import Delivery
from pulsar_gateway.entry_codec import (
    MAGIC_BROKER_ENTRY_METADATA,
    Payload,
    make_blob,
    parse_blob,
)
from pulsar_gateway.frame_codec import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    CodecError,
    Frame,
    FrameDecoder,
    FrameTooLarge,
    MalformedFrame,
    encode_command,
    encode_message,
    encode_messages,
    encode_payload_command,
    encode_send_receipt,
)
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.unit.test_entry_codec import (
    BLOB,
    CHECKED,
    METADATA,
    METADATA_BYTES,
    i64,
    key_values,
    text,
    u16,
    u32,
    u64,
)

T = pb.BaseCommand  # command type constants: T.PING, T.SEND, ...


# ---------------------------------------------------------------------------
# Golden frames, written field by field
# ---------------------------------------------------------------------------

PING_CMD = bytes.fromhex(
    "08 12"  # field 1 (type), varint: 18 = PING
    "92 01 00"  # field 18 (ping), length-delimited: tag (18 << 3 | 2) = 146, length 0
)
PING_FRAME = (
    u32(4 + 5)  # totalSize: cmdSize field + command
    + u32(5)  # cmdSize
    + PING_CMD
)
PING = pb.BaseCommand(type=T.PING, ping=pb.CommandPing())

CONNECTED_CMD = bytes.fromhex(
    "08 03"  # field 1 (type), varint: 3 = CONNECTED
    "1a 0b"  # field 3 (connected), length-delimited, 11 bytes:
    "0a 02 6777"  # .. field 1 (server_version), 2 bytes: "gw"
    "10 14"  # .. field 2 (protocol_version), varint: 20
    "18 8080c002"  # .. field 3 (max_message_size), varint: 5242880 = 0x500000
)
CONNECTED_FRAME = u32(4 + 15) + u32(15) + CONNECTED_CMD
CONNECTED = pb.BaseCommand(
    type=T.CONNECTED,
    connected=pb.CommandConnected(
        server_version="gw", protocol_version=20, max_message_size=DEFAULT_MAX_MESSAGE_SIZE
    ),
)

SEND_CMD = bytes.fromhex(
    "08 06"  # field 1 (type), varint: 6 = SEND
    "32 04"  # field 6 (send), length-delimited, 4 bytes:
    "08 01"  # .. field 1 (producer_id): 1
    "10 07"  # .. field 2 (sequence_id): 7
)
SEND = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=7))
# METADATA, CHECKED and BLOB, the golden blob: tests/unit/test_entry_codec.py.
SEND_FRAME = (
    u32(4 + len(SEND_CMD) + len(BLOB))  # totalSize
    + u32(len(SEND_CMD))  # cmdSize
    + SEND_CMD
    + BLOB
)
SEND_PAYLOAD = Payload(METADATA, b"hello", BLOB, True)

MESSAGE_CMD = bytes.fromhex(
    "08 09"  # field 1 (type), varint: 9 = MESSAGE
    "4a 08"  # field 9 (message), length-delimited, 8 bytes:
    "08 01"  # .. field 1 (consumer_id): 1
    "12 04"  # .. field 2 (message_id), 4 bytes:
    "08 02"  # .... field 1 (ledgerId): 2
    "10 03"  # .... field 2 (entryId): 3 (partition -1 and redelivery 0 are left out)
)
MESSAGE = pb.BaseCommand(
    type=T.MESSAGE,
    message=pb.CommandMessage(consumer_id=1, message_id=pb.MessageIdData(ledgerId=2, entryId=3)),
)
BROKER_ENTRY_SECTION = (
    u16(MAGIC_BROKER_ENTRY_METADATA)  # 0x0e02
    + u32(4)  # size of BrokerEntryMetadata
    + bytes.fromhex("08 05 10 06")  # broker_timestamp=5, index=6
)


# ---------------------------------------------------------------------------
# The tr helpers
# ---------------------------------------------------------------------------

# The start of a PING frame: must stay in the buffer after the tested input.
TRAILING = PING_FRAME[:7]


def drain(decoder: FrameDecoder) -> list[Frame]:
    frames = []
    while (frame := decoder.next_frame()) is not None:
        frames.append(frame)
    return frames


def tr(data: bytes, expected: Sequence[Frame], max_frame_size: int | None = None) -> None:
    """Decode ``data`` whole, byte by byte, and followed by trailing bytes."""

    def new() -> FrameDecoder:
        return FrameDecoder() if max_frame_size is None else FrameDecoder(max_frame_size)

    decoder = new()
    decoder.feed(data)
    assert drain(decoder) == list(expected)
    assert decoder.buffered == 0

    decoder = new()
    frames = []
    for i in range(len(data)):
        decoder.feed(data[i : i + 1])
        frames += drain(decoder)
    assert frames == list(expected)
    assert decoder.buffered == 0

    decoder = new()
    decoder.feed(data + TRAILING)
    assert drain(decoder) == list(expected)
    assert decoder.next_frame() is None
    assert decoder.buffered == len(TRAILING)
    decoder.feed(PING_FRAME[len(TRAILING) :])
    assert drain(decoder) == [Frame(PING, None)]
    assert decoder.buffered == 0


def tr_error(data: bytes, error: type[CodecError], max_frame_size: int | None = None) -> None:
    """Like tr, for input that must raise ``error`` (and then keep raising)."""

    def new() -> FrameDecoder:
        return FrameDecoder() if max_frame_size is None else FrameDecoder(max_frame_size)

    decoder = new()
    decoder.feed(data)
    with pytest.raises(error):
        drain(decoder)
    # The decoder is dead: same error again, input ignored.
    decoder.feed(PING_FRAME)
    with pytest.raises(error):
        decoder.next_frame()
    assert decoder.buffered == 0

    decoder = new()
    with pytest.raises(error):
        for i in range(len(data)):
            decoder.feed(data[i : i + 1])
            drain(decoder)

    decoder = new()
    decoder.feed(data + TRAILING)
    with pytest.raises(error):
        drain(decoder)


def frame_bytes(command: bytes, rest: bytes = b"") -> bytes:
    """totalSize + cmdSize + command + rest."""
    return u32(4 + len(command) + len(rest)) + u32(len(command)) + command + rest


# ---------------------------------------------------------------------------
# Golden frames: decode and encode
# ---------------------------------------------------------------------------


def test_ping_golden() -> None:
    assert PING.SerializeToString() == PING_CMD
    assert encode_command(PING) == PING_FRAME
    tr(PING_FRAME, [Frame(PING, None)])


def test_connected_golden() -> None:
    assert CONNECTED.SerializeToString() == CONNECTED_CMD
    assert encode_command(CONNECTED) == CONNECTED_FRAME
    tr(CONNECTED_FRAME, [Frame(CONNECTED, None)])


def test_send_with_checksum_golden() -> None:
    # the blob itself: tests/unit/test_entry_codec.py test_blob_golden
    assert encode_payload_command(SEND, BLOB) == SEND_FRAME
    tr(SEND_FRAME, [Frame(SEND, SEND_PAYLOAD)])


def test_message_golden() -> None:
    frame = frame_bytes(MESSAGE_CMD, BLOB)
    assert encode_message(1, 2, 3, -1, 0, BLOB) == frame
    assert encode_payload_command(MESSAGE, BLOB) == frame
    tr(frame, [Frame(MESSAGE, SEND_PAYLOAD)])


def test_several_frames_in_one_buffer() -> None:
    data = PING_FRAME + SEND_FRAME + CONNECTED_FRAME + SEND_FRAME
    tr(
        data,
        [
            Frame(PING, None),
            Frame(SEND, SEND_PAYLOAD),
            Frame(CONNECTED, None),
            Frame(SEND, SEND_PAYLOAD),
        ],
    )


# ---------------------------------------------------------------------------
# Payload sections
# ---------------------------------------------------------------------------


def test_bad_checksum_is_reported_not_raised() -> None:
    corrupt = SEND_FRAME[:-1] + b"H"  # last payload byte flipped
    blob = BLOB[:-1] + b"H"
    tr(corrupt, [Frame(SEND, Payload(METADATA, b"hellH", blob, False))])
    assert parse_blob(blob).checksum_ok is False


def test_frame_without_checksum_gets_a_synthesized_blob() -> None:
    frame = frame_bytes(SEND_CMD, CHECKED)  # no 0x0e01 magic, no CRC
    tr(frame, [Frame(SEND, SEND_PAYLOAD)])
    decoder = FrameDecoder()
    decoder.feed(frame)
    payload = drain(decoder)[0].payload
    assert payload is not None
    assert payload.blob == BLOB
    assert parse_blob(payload.blob).checksum_ok


def test_broker_entry_metadata_is_skipped() -> None:
    frame = frame_bytes(MESSAGE_CMD, BROKER_ENTRY_SECTION + BLOB)
    tr(frame, [Frame(MESSAGE, SEND_PAYLOAD)])


def test_broker_entry_metadata_without_checksum() -> None:
    frame = frame_bytes(MESSAGE_CMD, BROKER_ENTRY_SECTION + CHECKED)
    tr(frame, [Frame(MESSAGE, SEND_PAYLOAD)])


def test_empty_payload_and_empty_metadata_fields() -> None:
    blob = make_blob(METADATA, b"")
    tr(encode_payload_command(SEND, blob), [Frame(SEND, Payload(METADATA, b"", blob, True))])


# ---------------------------------------------------------------------------
# Malformed frames
# ---------------------------------------------------------------------------


def test_frame_too_large_before_body_arrives() -> None:
    limit = 64
    decoder = FrameDecoder(max_frame_size=limit)
    decoder.feed(u32(limit - 4 + 1)[:3])
    assert decoder.next_frame() is None
    decoder.feed(u32(limit - 4 + 1)[3:])  # only the size field has arrived
    with pytest.raises(FrameTooLarge) as info:
        decoder.next_frame()
    assert (info.value.size, info.value.limit) == (limit + 1, limit)
    tr_error(u32(limit - 4 + 1) + b"\x00" * 100, FrameTooLarge, max_frame_size=limit)


def test_frame_at_the_limit_is_accepted() -> None:
    padding = pb.CommandConnected(server_version="x" * 40)
    command = pb.BaseCommand(type=T.CONNECTED, connected=padding)
    frame = encode_command(command)
    tr(frame, [Frame(command, None)], max_frame_size=len(frame))
    tr_error(frame, FrameTooLarge, max_frame_size=len(frame) - 1)


def test_default_limit() -> None:
    decoder = FrameDecoder()
    assert decoder.max_frame_size == DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING
    decoder.feed(u32(DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING - 3))
    with pytest.raises(FrameTooLarge):
        decoder.next_frame()
    with pytest.raises(ValueError, match="max_frame_size"):
        FrameDecoder(max_frame_size=4)


def test_total_size_too_small_for_cmd_size() -> None:
    tr_error(u32(0), MalformedFrame)
    tr_error(u32(3) + b"\x00\x00\x00", MalformedFrame)


def test_cmd_size_larger_than_total_size() -> None:
    tr_error(u32(4 + 5) + u32(6) + PING_CMD, MalformedFrame)
    tr_error(u32(4) + u32(1), MalformedFrame)


@pytest.mark.parametrize(
    "command",
    [
        b"\xff\xff\xff",  # truncated varint tag
        b"\x08",  # field 1 without its value
        b"\x92\x01\x05",  # field 18 announces 5 bytes, none follow
        b"\x0f",  # wire type 7 does not exist
    ],
)
def test_garbage_protobuf(command: bytes) -> None:
    tr_error(frame_bytes(command), MalformedFrame)


@pytest.mark.parametrize(
    "command",
    [
        b"",  # no type
        b"\x92\x01\x00",  # ping without type
        b"\x08\x63",  # type 99 is not in the enum: kept as unknown, so type is unset
        bytes.fromhex("080b 5a02 0801"),  # FLOW without messagePermits
        bytes.fromhex("0809 4a02 0801"),  # MESSAGE without message_id: nested required
        bytes.fromhex("0809 4a06 0801 1202 0802"),  # message_id without entryId
    ],
)
def test_missing_required_field(command: bytes) -> None:
    tr_error(frame_bytes(command, BLOB), MalformedFrame)


def test_missing_required_field_in_simple_frame() -> None:
    tr_error(frame_bytes(bytes.fromhex("080b 5a02 0801")), MalformedFrame)


def test_unknown_fields_are_kept() -> None:
    # A transaction sub-message we do not declare (field 50) parses as unknown.
    command = bytes.fromhex("0832 9203 02 0801")
    decoder = FrameDecoder()
    decoder.feed(frame_bytes(command))
    frame = decoder.next_frame()
    assert frame is not None
    assert frame.command.type == T.NEW_TXN
    assert frame.command.SerializeToString() == command


def test_payload_on_a_command_that_cannot_carry_one() -> None:
    tr_error(frame_bytes(PING_CMD, BLOB), MalformedFrame)
    tr_error(frame_bytes(CONNECTED_CMD, b"\x00"), MalformedFrame)


def test_send_and_message_without_payload() -> None:
    tr_error(frame_bytes(SEND_CMD), MalformedFrame)
    tr_error(frame_bytes(MESSAGE_CMD), MalformedFrame)


@pytest.mark.parametrize(
    "rest",
    [
        b"\x00",  # not even a metadataSize
        BLOB[:9],  # magic + crc + 3 bytes of metadataSize
        u32(100) + METADATA_BYTES,  # metadataSize past the end (no checksum)
        u32(2) + b"\xff\xff",  # metadata is garbage
        u32(3) + b"\x0a\x01p",  # metadata lacks required fields
        BROKER_ENTRY_SECTION[:6],  # broker entry metadata announced, then nothing
        u16(MAGIC_BROKER_ENTRY_METADATA) + u32(50) + b"\x00" * 10,  # truncated section
        BROKER_ENTRY_SECTION,  # broker entry metadata and nothing after it
    ],
)
def test_bad_payload_section(rest: bytes) -> None:
    tr_error(frame_bytes(SEND_CMD, rest), MalformedFrame)


def test_errors_are_codec_errors() -> None:
    assert issubclass(FrameTooLarge, CodecError)
    assert issubclass(MalformedFrame, CodecError)


# ---------------------------------------------------------------------------
# Buffer management
# ---------------------------------------------------------------------------


def test_large_stream_in_odd_chunks() -> None:
    # More than _COMPACT_AT bytes, fed in chunks that split frames everywhere.
    blob = make_blob(METADATA, b"x" * 3000)
    frames = [encode_payload_command(SEND, blob), PING_FRAME] * 60
    data = b"".join(frames)
    assert len(data) > 2 * frame_codec._COMPACT_AT
    decoder = FrameDecoder()
    got: list[Frame] = []
    for start in range(0, len(data), 997):
        decoder.feed(data[start : start + 997])
        got += drain(decoder)
        assert decoder.buffered < 997 + len(frames[0])
    assert len(got) == 120
    assert got[0] == Frame(SEND, Payload(METADATA, b"x" * 3000, blob, True))
    assert got[-1] == Frame(PING, None)
    assert decoder.buffered == 0


def test_feed_accepts_bytes_like() -> None:
    decoder = FrameDecoder()
    decoder.feed(bytearray(PING_FRAME[:3]))
    decoder.feed(memoryview(PING_FRAME)[3:])
    assert drain(decoder) == [Frame(PING, None)]


# ---------------------------------------------------------------------------
# Encoders
# ---------------------------------------------------------------------------


def test_encode_command_rejects_payload_commands_and_missing_fields() -> None:
    with pytest.raises(ValueError, match="encode_payload_command"):
        encode_command(SEND)
    with pytest.raises(EncodeError):
        encode_command(pb.BaseCommand(type=T.FLOW, flow=pb.CommandFlow(consumer_id=1)))


def test_encode_payload_command_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="encode_command"):
        encode_payload_command(PING, BLOB)
    with pytest.raises(ValueError, match="blob"):
        encode_payload_command(SEND, CHECKED)
    with pytest.raises(EncodeError):
        encode_payload_command(pb.BaseCommand(type=T.SEND, send=pb.CommandSend()), BLOB)


@pytest.mark.parametrize(
    "args",
    [
        (-1, 1, 1, -1, 0),  # consumer_id is uint64
        (1, -1, 1, -1, 0),  # ledgerId is uint64 (send 2**64 - 1 for "-1")
        (1, 2**64, 1, -1, 0),
        (1, 1, 2**64, -1, 0),
        (1, 1, 1, 2**31, 0),  # partition is int32
        (1, 1, 1, -(2**31) - 1, 0),
        (1, 1, 1, -1, 2**32),  # redelivery_count is uint32
        (1, 1, 1, -1, -1),
    ],
)
def test_encode_message_range_errors(args: tuple[int, int, int, int, int]) -> None:
    with pytest.raises(ValueError, match="out of range"):
        encode_message(*args, BLOB)


def test_encode_message_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="out of range"):
        encode_message(1, 1, 1, -1, 0, BLOB, ack_set=[2**63])
    with pytest.raises(ValueError, match="blob"):
        encode_message(1, 1, 1, -1, 0, b"hello")


def test_encode_message_ledger_cache() -> None:
    # Alternate ledgers that share or do not share the cached high bits.
    base = 1_700_000_000_000
    for ledger in [base, base, base + 1, base + (1 << 14), base, 5, 200, base + 1, 2**64 - 1, 0]:
        expected = reference_message(3, ledger, 1, 0, 0, BLOB)
        assert encode_message(3, ledger, 1, 0, 0, BLOB) == expected


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------

u32s = st.integers(0, 2**32 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
message_ids = st.builds(
    pb.MessageIdData,
    ledgerId=u64,
    entryId=u64,
    partition=st.none() | i32,
    batch_index=st.none() | i32,
    ack_set=st.lists(i64, max_size=3),
)


def command(type_: int, **fields: object) -> pb.BaseCommand:
    return pb.BaseCommand(type=type_, **fields)  # type: ignore[arg-type]


simple_commands = st.one_of(
    st.just(PING),
    st.just(pb.BaseCommand(type=T.PONG, pong=pb.CommandPong())),
    st.builds(
        lambda c, n: command(T.FLOW, flow=pb.CommandFlow(consumer_id=c, messagePermits=n)),
        u64,
        u32s,
    ),
    st.builds(
        lambda v, p, name, flags: command(
            T.CONNECT,
            connect=pb.CommandConnect(
                client_version=v,
                protocol_version=p,
                auth_method_name=name,
                feature_flags=pb.FeatureFlags(supports_broker_entry_metadata=flags),
            ),
        ),
        text,
        i32,
        st.none() | text,
        st.booleans(),
    ),
    st.builds(
        lambda c, t, ids, r: command(
            T.ACK, ack=pb.CommandAck(consumer_id=c, ack_type=t, message_id=ids, request_id=r)
        ),
        u64,
        st.sampled_from([pb.CommandAck.Individual, pb.CommandAck.Cumulative]),
        st.lists(message_ids, max_size=3),
        st.none() | u64,
    ),
    st.builds(
        lambda topic, sub, kind, c, r, start: command(
            T.SUBSCRIBE,
            subscribe=pb.CommandSubscribe(
                topic=topic,
                subscription=sub,
                subType=kind,
                consumer_id=c,
                request_id=r,
                start_message_id=start,
            ),
        ),
        text,
        text,
        st.sampled_from(pb.CommandSubscribe.SubType.values()),
        u64,
        u64,
        st.none() | message_ids,
    ),
    st.builds(
        lambda r, e, m: command(T.ERROR, error=pb.CommandError(request_id=r, error=e, message=m)),
        u64,
        st.sampled_from(pb.ServerError.values()),
        text,
    ),
    st.builds(
        lambda p, s, mid: command(
            T.SEND_RECEIPT,
            send_receipt=pb.CommandSendReceipt(producer_id=p, sequence_id=s, message_id=mid),
        ),
        u64,
        u64,
        message_ids,
    ),
    st.builds(
        lambda c, ids: command(
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
            redeliverUnacknowledgedMessages=pb.CommandRedeliverUnacknowledgedMessages(
                consumer_id=c, message_ids=ids
            ),
        ),
        u64,
        st.lists(message_ids, max_size=3),
    ),
    st.builds(
        lambda r, topics: command(
            T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
            getTopicsOfNamespaceResponse=pb.CommandGetTopicsOfNamespaceResponse(
                request_id=r, topics=topics
            ),
        ),
        u64,
        st.lists(text, max_size=4),
    ),
)

metadatas = st.builds(
    pb.MessageMetadata,
    producer_name=text,
    sequence_id=u64,
    publish_time=u64,
    properties=key_values,
    partition_key=st.none() | text,
    ordering_key=st.none() | st.binary(max_size=8),
    num_messages_in_batch=st.none() | i32,
    event_time=st.none() | u64,
    deliver_at_time=st.none() | i64,
    compression=st.sampled_from(pb.CompressionType.values()),
)
sends = st.builds(
    lambda p, s, n: command(
        T.SEND, send=pb.CommandSend(producer_id=p, sequence_id=s, num_messages=n)
    ),
    u64,
    u64,
    st.none() | i32,
)
payload_frames = st.builds(
    lambda cmd, md, data: (cmd, md, data), sends, metadatas, st.binary(max_size=64)
)


@st.composite
def chunked(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` cut at random points."""
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def run_decoder(
    chunks: Sequence[bytes], max_frame_size: int
) -> tuple[list[Frame], type[CodecError] | None, int]:
    """Feed chunks; return frames, the CodecError type raised (if any), bytes left."""
    decoder = FrameDecoder(max_frame_size)
    frames: list[Frame] = []
    try:
        for chunk in chunks:
            decoder.feed(chunk)
            while (frame := decoder.next_frame()) is not None:
                frames.append(frame)
    except CodecError as exc:
        return frames, type(exc), decoder.buffered
    return frames, None, decoder.buffered


@st.composite
def plausible_streams(draw: st.DrawFn) -> bytes:
    """Valid frames, then damaged: bytes flipped, inserted, deleted, cut."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            parts.append(encode_command(draw(simple_commands)))
        else:
            cmd, metadata, data = draw(payload_frames)
            parts.append(encode_payload_command(cmd, make_blob(metadata, data)))
    stream = bytearray(b"".join(parts))
    for _ in range(draw(st.integers(0, 4))):
        position = draw(st.integers(0, len(stream)))
        action = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        if action == "flip" and position < len(stream):
            stream[position] ^= draw(st.integers(1, 255))
        elif action == "insert":
            stream[position:position] = draw(st.binary(min_size=1, max_size=6))
        elif action == "delete":
            del stream[position : position + draw(st.integers(1, 6))]
        elif action == "cut":
            del stream[position:]
    return bytes(stream)


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.binary(max_size=200) | plausible_streams(),
    max_frame_size=st.sampled_from([64, 512, DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING]),
    cuts=st.data(),
)
def test_any_bytes_decode_or_raise_codec_error(
    data: bytes, max_frame_size: int, cuts: st.DataObject
) -> None:
    # The websockets fuzzing contract: frames, or a CodecError; never anything
    # else, and the same result however the bytes are split.
    whole = run_decoder([data], max_frame_size)
    assert run_decoder(cuts.draw(chunked(data)), max_frame_size) == whole
    assert run_decoder([data[i : i + 1] for i in range(len(data))], max_frame_size) == whole
    frames, error, buffered = whole
    if error is not None:
        assert buffered == 0  # a failed decoder drops its buffer
    for frame in frames:
        assert frame.command.IsInitialized()
        assert (frame.payload is not None) == (frame.command.type in (T.SEND, T.MESSAGE))


@given(st.lists(simple_commands, min_size=1, max_size=4), st.data())
def test_simple_commands_round_trip(commands: list[pb.BaseCommand], cuts: st.DataObject) -> None:
    data = b"".join(encode_command(c) for c in commands)
    expected = [Frame(c, None) for c in commands]
    assert run_decoder([data], len(data) + 4) == (expected, None, 0)
    assert run_decoder(cuts.draw(chunked(data)), len(data) + 4) == (expected, None, 0)


@given(payload_frames, st.booleans(), st.booleans(), st.data())
def test_payload_commands_round_trip(
    frame: tuple[pb.BaseCommand, pb.MessageMetadata, bytes],
    checksum: bool,
    broker_entry: bool,
    cuts: st.DataObject,
) -> None:
    cmd, metadata, data = frame
    blob = make_blob(metadata, data)
    rest = blob if checksum else blob[6:]  # without checksum: no magic and no CRC
    if broker_entry:
        rest = BROKER_ENTRY_SECTION + rest
    encoded = frame_bytes(cmd.SerializeToString(), rest)
    if checksum and not broker_entry:
        assert encoded == encode_payload_command(cmd, blob)
    expected = [Frame(cmd, Payload(metadata, data, blob, True))]
    assert run_decoder([encoded], len(encoded)) == (expected, None, 0)
    assert run_decoder(cuts.draw(chunked(encoded)), len(encoded)) == (expected, None, 0)


def reference_message(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int,
    blob: bytes,
    ack_set: Sequence[int] = (),
) -> bytes:
    """encode_message's contract, built with protobuf objects."""
    message = pb.CommandMessage(
        consumer_id=consumer_id,
        message_id=pb.MessageIdData(ledgerId=ledger_id, entryId=entry_id),
        ack_set=ack_set,
    )
    if partition != -1:
        message.message_id.partition = partition
    if redelivery_count != 0:
        message.redelivery_count = redelivery_count
    return encode_payload_command(pb.BaseCommand(type=T.MESSAGE, message=message), blob)


@settings(max_examples=500)
@given(
    consumer_id=u64 | st.integers(0, 300),
    ledger_id=u64 | st.integers(1_700_000_000_000, 1_700_000_100_000) | st.integers(0, 2**15),
    entry_id=u64 | st.integers(0, 2**29),
    partition=st.just(-1) | i32,
    redelivery_count=st.just(0) | u32s,
    ack_set=st.lists(i64, max_size=14),  # up to ~150 bytes: two-byte length varints
    data=st.binary(max_size=32),
)
def test_encode_message_matches_protobuf(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int,
    ack_set: list[int],
    data: bytes,
) -> None:
    blob = make_blob(METADATA, data)
    args = (consumer_id, ledger_id, entry_id, partition, redelivery_count, blob)
    encoded = encode_message(*args, ack_set=ack_set)
    assert encoded == reference_message(*args, ack_set=ack_set)
    # And it decodes to what was asked for.
    decoder = FrameDecoder(len(encoded))
    decoder.feed(encoded)
    frame = decoder.next_frame()
    assert frame is not None and frame.payload is not None
    message = frame.command.message
    assert (message.consumer_id, message.message_id.ledgerId) == (consumer_id, ledger_id)
    assert (message.message_id.entryId, message.message_id.partition) == (entry_id, partition)
    assert (message.redelivery_count, list(message.ack_set)) == (redelivery_count, ack_set)
    assert frame.payload.blob == blob


@settings(max_examples=300)
@given(
    consumer_id=u64 | st.integers(0, 300),
    partition=st.just(-1) | i32,
    entries=st.lists(
        st.tuples(
            u64 | st.integers(1_700_000_000_000, 1_700_000_000_100),
            u64 | st.integers(0, 200) | st.integers(16_000, 16_500),
            st.just(0) | u32s,
            st.just([]) | st.lists(i64, max_size=3),
            st.binary(max_size=16),
        ),
        max_size=8,
    ),
)
def test_encode_messages_is_encode_message_of_each(
    consumer_id: int, partition: int, entries: list[tuple[int, int, int, list[int], bytes]]
) -> None:
    deliveries = [
        Delivery(b"%d-%d" % (ledger, entry), make_blob(METADATA, data), 1, count, tuple(ack_set))
        for ledger, entry, count, ack_set, data in entries
    ]
    expected = [
        encode_message(consumer_id, ledger, entry, partition, count, d.blob, ack_set)
        for (ledger, entry, count, ack_set, _), d in zip(entries, deliveries, strict=True)
    ]
    assert b"".join(encode_messages(consumer_id, partition, deliveries)) == b"".join(expected)


def test_encode_messages_rejects_what_encode_message_rejects() -> None:
    with pytest.raises(ValueError):
        encode_messages(1, -1, [Delivery(b"5-0", b"not a blob", 1, 0)])
    with pytest.raises(ValueError):
        encode_messages(1, -1, [Delivery(b"x-0", make_blob(METADATA, b"x"), 1, 0)])
    with pytest.raises(ValueError):
        encode_messages(1, -1, [Delivery(b"%d-0" % 2**64, make_blob(METADATA, b"x"), 1, 0)])


@settings(max_examples=300)
@given(
    producer_id=u64 | st.integers(0, 300),
    sequence_id=u64 | st.integers(0, 2**20),
    ledger_id=u64 | st.integers(1_700_000_000_000, 1_700_000_100_000),
    entry_id=u64 | st.integers(0, 2**29),
)
def test_encode_send_receipt_matches_protobuf(
    producer_id: int, sequence_id: int, ledger_id: int, entry_id: int
) -> None:
    receipt = pb.CommandSendReceipt(
        producer_id=producer_id,
        sequence_id=sequence_id,
        message_id=pb.MessageIdData(ledgerId=ledger_id, entryId=entry_id),
    )
    reference = encode_command(pb.BaseCommand(type=T.SEND_RECEIPT, send_receipt=receipt))
    assert encode_send_receipt(producer_id, sequence_id, ledger_id, entry_id) == reference


# -- the SEND fast path ----------------------------------------------------------------------


def _decode_one(data: bytes) -> Frame:
    decoder = FrameDecoder()
    decoder.feed(data)
    frame = decoder.next_frame()
    assert frame is not None
    return frame


@settings(max_examples=400)
@given(
    producer_id=u64,
    sequence_id=u64,
    num_messages=st.none() | i32,
    txnid=st.none() | u64,
    highest=st.none() | u64,
    is_chunk=st.none() | st.booleans(),
    marker=st.none() | st.booleans(),
)
def test_send_fast_path_reads_what_protobuf_reads(
    producer_id: int,
    sequence_id: int,
    num_messages: int | None,
    txnid: int | None,
    highest: int | None,
    is_chunk: bool | None,
    marker: bool | None,
) -> None:
    send = pb.CommandSend(producer_id=producer_id, sequence_id=sequence_id)
    if num_messages is not None:
        send.num_messages = num_messages
    if txnid is not None:
        send.txnid_least_bits = send.txnid_most_bits = txnid
    if highest is not None:
        send.highest_sequence_id = highest
    if is_chunk is not None:
        send.is_chunk = is_chunk
    if marker is not None:
        send.marker = marker
    command = pb.BaseCommand(type=T.SEND, send=send)
    frame = _decode_one(encode_payload_command(command, BLOB))
    assert frame.send == (producer_id, sequence_id, send.num_messages, send.is_chunk)
    assert frame.type == T.SEND
    assert frame.command == command  # built from the same bytes when asked for
    assert frame == Frame(command, SEND_PAYLOAD)


def test_send_fast_path_leaves_other_layouts_to_protobuf() -> None:
    with_id = pb.CommandSend(
        producer_id=1, sequence_id=2, message_id=pb.MessageIdData(ledgerId=3, entryId=4)
    )
    command = pb.BaseCommand(type=T.SEND, send=with_id)
    frame = _decode_one(encode_payload_command(command, BLOB))
    assert frame.send is None  # a sub-message: parsed by protobuf
    assert frame.command == command
    # send before type, and an unknown field: both still decode, through protobuf
    body = pb.CommandSend(producer_id=1, sequence_id=2).SerializeToString()
    reordered = b"\x32" + bytes((len(body),)) + body + b"\x08\x06"
    unknown = b"\x08\x06\x32" + bytes((len(body) + 3,)) + body + b"\xa0\x01\x05"
    for raw in (reordered, unknown):
        data = u32(4 + len(raw) + len(BLOB)) + u32(len(raw)) + raw + BLOB
        frame = _decode_one(data)
        assert frame.send is None
        assert (frame.command.send.producer_id, frame.command.send.sequence_id) == (1, 2)


@pytest.mark.parametrize(
    "send_body",
    [
        b"\x08\x01",  # no sequence_id
        b"\x10\x02",  # no producer_id
        b"\x08\x01\x10",  # truncated varint
        b"\x08\x01\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # 11-byte varint
    ],
)
def test_send_fast_path_rejects_like_protobuf(send_body: bytes) -> None:
    raw = b"\x08\x06\x32" + bytes((len(send_body),)) + send_body
    data = u32(4 + len(raw) + len(BLOB)) + u32(len(raw)) + raw + BLOB
    decoder = FrameDecoder()
    decoder.feed(data)
    with pytest.raises(MalformedFrame):
        decoder.next_frame()
