"""pulsar_gateway.entry_codec: the stored-entry format as data (blobs, batches, metadata,
message ids, CRC32C). The single-message codec is tests/unit/test_messages.py's, the compaction
inspector tests/unit/test_entry_format.py's, frames tests/unit/test_codec.py's.

Golden blobs and batches are written field by field; hypothesis checks the hand-written
encoders byte for byte against protobuf.
"""

from __future__ import annotations

import importlib.util
import struct
import sys

import pytest
from google.protobuf.message import EncodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_gateway.entry_codec import (
    MAGIC_CRC32C,
    MalformedFrame,
    Payload,
    checksum,
    crc32c,
    encode_batch,
    encode_message_id_data,
    encode_metadata,
    make_blob,
    parse_batch,
    parse_blob,
    parse_proto,
)
from pulsar_gateway.proto import PulsarApi_pb2 as pb


def u32(value: int) -> bytes:
    return struct.pack(">I", value)


def u16(value: int) -> bytes:
    return struct.pack(">H", value)


# ---------------------------------------------------------------------------
# Golden blob and batch, written field by field
# ---------------------------------------------------------------------------

METADATA_BYTES = bytes.fromhex(
    "0a 01 70"  # field 1 (producer_name), 1 byte: "p"
    "10 07"  # field 2 (sequence_id): 7
    "18 e807"  # field 3 (publish_time): 1000
)
METADATA = pb.MessageMetadata(producer_name="p", sequence_id=7, publish_time=1000)
# Everything the CRC covers: metadataSize, metadata, payload.
CHECKED = u32(len(METADATA_BYTES)) + METADATA_BYTES + b"hello"
GOLDEN_CRC = 0x1EC5E22A  # CRC32C of CHECKED
BLOB = (
    u16(MAGIC_CRC32C)  # 0x0e01: a checksum follows
    + u32(GOLDEN_CRC)  # CRC32C of the rest of the frame
    + CHECKED
)

# The three-message batch captured from the official client (docs/binary_protocol.md
# "Batches, compression and chunks").
GOLDEN_BATCH = b"".join(
    u32(4)  # SingleMessageMetadata size
    + bytes.fromhex("18 02")  # field 3 (payload_size): 2
    + bytes((0x40, i))  # field 8 (sequence_id): i
    + b"b%d" % i  # the message
    for i in range(3)
)

u64 = st.integers(0, 2**64 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=12)
key_values = st.lists(st.builds(pb.KeyValue, key=text, value=text), max_size=3)


def test_blob_golden() -> None:
    assert crc32c(CHECKED) == GOLDEN_CRC
    assert checksum._crc32c_python(CHECKED) == GOLDEN_CRC
    assert METADATA.SerializeToString() == METADATA_BYTES
    assert make_blob(METADATA, b"hello") == BLOB
    assert make_blob(METADATA_BYTES, b"hello") == BLOB
    assert parse_blob(BLOB) == Payload(METADATA, b"hello", BLOB, True)


def test_batch_golden() -> None:
    messages = [
        (pb.SingleMessageMetadata(payload_size=2, sequence_id=i), b"b%d" % i) for i in range(3)
    ]
    assert encode_batch(messages) == GOLDEN_BATCH
    assert parse_batch(GOLDEN_BATCH, 3) == messages


def test_parse_blob_round_trip() -> None:
    metadata = pb.MessageMetadata(
        producer_name="prod",
        sequence_id=2**64 - 1,
        publish_time=1_700_000_000_000,
        properties=[pb.KeyValue(key="k", value="v")],
        num_messages_in_batch=3,
        compression=pb.ZSTD,
        uncompressed_size=30,
    )
    blob = make_blob(metadata, GOLDEN_BATCH)
    assert parse_blob(blob) == Payload(metadata, GOLDEN_BATCH, blob, True)
    assert parse_blob(bytearray(blob)) == Payload(metadata, GOLDEN_BATCH, blob, True)


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        BLOB[:9],  # shorter than magic + crc + metadataSize
        b"\x0e\x02" + BLOB[2:],  # wrong magic
        BLOB[:6] + u32(len(CHECKED)) + CHECKED[4:],  # metadataSize past the end
        BLOB[:6] + u32(2) + b"\xff\xff",  # metadata is not protobuf
        make_blob(b"\x0a\x01p", b"x"),  # metadata lacks sequence_id and publish_time
    ],
)
def test_parse_blob_rejects(blob: bytes) -> None:
    with pytest.raises(MalformedFrame):
        parse_blob(blob)


def test_make_blob_requires_metadata_fields() -> None:
    with pytest.raises(EncodeError):
        make_blob(pb.MessageMetadata(producer_name="p"), b"x")


def test_encode_batch_fills_payload_size() -> None:
    metadata = pb.SingleMessageMetadata(sequence_id=1)
    assert parse_batch(encode_batch([(metadata, b"abc")]), 1) == [
        (pb.SingleMessageMetadata(sequence_id=1, payload_size=3), b"abc")
    ]
    assert not metadata.HasField("payload_size")  # the caller's object is untouched
    with pytest.raises(ValueError, match="payload_size"):
        encode_batch([(pb.SingleMessageMetadata(payload_size=2), b"abc")])
    assert encode_batch([]) == b""


def test_truncated_batch_is_rejected() -> None:
    for cut in range(len(GOLDEN_BATCH)):
        with pytest.raises(MalformedFrame):
            parse_batch(GOLDEN_BATCH[:cut], 3)


@pytest.mark.parametrize(
    ("payload", "count"),
    [
        (GOLDEN_BATCH, 4),  # fewer messages than announced
        (GOLDEN_BATCH, 2),  # bytes left over
        (GOLDEN_BATCH + b"\x00", 3),
        (GOLDEN_BATCH, -1),
        (u32(2) + b"\xff\xff", 1),  # metadata is garbage
        (u32(2) + b"\x40\x01", 1),  # payload_size is required
        (u32(11) + bytes.fromhex("18ffffffffffffffffff01"), 1),  # payload_size -1
        (u32(100) + GOLDEN_BATCH[4:], 1),  # metadata size past the end
    ],
)
def test_bad_batch(payload: bytes, count: int) -> None:
    with pytest.raises(MalformedFrame):
        parse_batch(payload, count)


def test_empty_batch() -> None:
    assert parse_batch(b"", 0) == []


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert checksum._crc32c_python(b"123456789") == 0xE3069283
    assert crc32c(b"") == checksum._crc32c_python(b"") == 0


@given(st.binary(max_size=2000), st.binary(max_size=100))
def test_crc32c_implementations_agree(data: bytes, more: bytes) -> None:
    assert crc32c(data) == checksum._crc32c_python(data)
    assert crc32c(memoryview(data)) == checksum._crc32c_python(bytearray(data))
    assert checksum._crc32c_python(more, checksum._crc32c_python(data)) == crc32c(data + more)
    assert crc32c(more, crc32c(data)) == crc32c(data + more)


def test_crc32c_fallback_when_package_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    # Load a private copy of the module with the C package hidden.
    monkeypatch.setitem(sys.modules, "crc32c", None)
    spec = importlib.util.spec_from_file_location("_checksum_without_crc32c", checksum.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look it up
    spec.loader.exec_module(module)
    assert module.crc32c is module._crc32c_python
    assert module.crc32c(b"123456789") == 0xE3069283


batch_messages = st.lists(
    st.builds(
        lambda seq, props, key, data: (
            pb.SingleMessageMetadata(
                payload_size=len(data), sequence_id=seq, properties=props, partition_key=key
            ),
            data,
        ),
        u64,
        key_values,
        st.none() | text,
        st.binary(max_size=20),
    ),
    max_size=5,
)


@given(batch_messages)
def test_batch_round_trip(messages: list[tuple[pb.SingleMessageMetadata, bytes]]) -> None:
    assert parse_batch(encode_batch(messages), len(messages)) == messages


@settings(max_examples=300)
@given(
    ledger_id=st.integers(-1, 2**63 - 1) | st.integers(1_700_000_000_000, 1_700_000_100_000),
    entry_id=st.integers(-1, 2**63 - 1) | st.integers(0, 300),
    partition=st.integers(-1, 2**31 - 1),
    batch_index=st.integers(-1, 2**31 - 1),
    batch_size=st.integers(0, 2**31 - 1),
)
def test_encode_message_id_data_matches_protobuf(
    ledger_id: int, entry_id: int, partition: int, batch_index: int, batch_size: int
) -> None:
    reference = pb.MessageIdData(ledgerId=ledger_id % 2**64, entryId=entry_id % 2**64)
    if partition >= 0:
        reference.partition = partition
    if batch_index >= 0:
        reference.batch_index = batch_index
    if batch_size > 0:
        reference.batch_size = batch_size
    encoded = encode_message_id_data(ledger_id, entry_id, partition, batch_index, batch_size)
    assert encoded == reference.SerializeToString()


@settings(max_examples=300)
@given(
    producer_name=st.text(max_size=300),
    sequence_id=u64,
    publish_time=u64,
    properties=st.lists(st.tuples(st.text(max_size=20), st.text(max_size=200)), max_size=4),
    partition_key=st.none() | st.text(max_size=20),
    replicate_to=st.lists(st.text(max_size=10), max_size=3),
    compression=st.sampled_from([pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY]),
    uncompressed_size=st.integers(0, 2**32 - 1),
    event_time=u64,
    schema_version=st.none() | st.binary(max_size=9),
    ordering_key=st.none() | st.binary(max_size=200),
    deliver_at_time=st.none() | i64,
)
def test_encode_metadata_matches_protobuf(
    producer_name: str,
    sequence_id: int,
    publish_time: int,
    properties: list[tuple[str, str]],
    partition_key: str | None,
    replicate_to: list[str],
    compression: int,
    uncompressed_size: int,
    event_time: int,
    schema_version: bytes | None,
    ordering_key: bytes | None,
    deliver_at_time: int | None,
) -> None:
    reference = pb.MessageMetadata(
        producer_name=producer_name, sequence_id=sequence_id, publish_time=publish_time
    )
    for key, value in properties:
        reference.properties.add(key=key, value=value)
    if partition_key is not None:
        reference.partition_key = partition_key
    reference.replicate_to.extend(replicate_to)
    if compression:
        reference.compression = compression  # type: ignore[assignment]
        reference.uncompressed_size = uncompressed_size
    if event_time:
        reference.event_time = event_time
    if schema_version is not None:
        reference.schema_version = schema_version
    if ordering_key is not None:
        reference.ordering_key = ordering_key
    if deliver_at_time is not None:
        reference.deliver_at_time = deliver_at_time
    encoded = encode_metadata(
        producer_name,
        sequence_id,
        publish_time,
        properties=properties,
        partition_key=partition_key,
        replicate_to=replicate_to,
        compression=compression,
        uncompressed_size=uncompressed_size,
        event_time=event_time,
        schema_version=schema_version,
        ordering_key=ordering_key,
        deliver_at_time=deliver_at_time,
    )
    assert encoded == reference.SerializeToString()


def test_encode_metadata_refuses_what_protobuf_refuses() -> None:
    for bad in ({"sequence_id": -1}, {"publish_time": 2**64}):
        args = {"sequence_id": 0, "publish_time": 0} | bad
        with pytest.raises(ValueError):
            encode_metadata("p", args["sequence_id"], args["publish_time"])
    with pytest.raises(ValueError):
        encode_metadata("p", 0, 0, deliver_at_time=2**63)
    with pytest.raises(ValueError):
        encode_message_id_data(1, 2, partition=2**31)


def test_parse_proto_reads_a_bytearray_as_it_reads_bytes() -> None:
    """The frame decoder hands over a slice of its buffer, a bytearray (upb parses it in
    place): it gives what the same bytes give, and its errors are the same."""
    cmd = pb.BaseCommand(type=pb.BaseCommand.PING, ping=pb.CommandPing())
    data = cmd.SerializeToString()
    from_bytearray = parse_proto(pb.BaseCommand(), bytearray(data), "BaseCommand")
    assert from_bytearray == parse_proto(pb.BaseCommand(), data, "BaseCommand") == cmd
    with pytest.raises(MalformedFrame, match="invalid protobuf"):
        parse_proto(pb.BaseCommand(), bytearray(b"\xff\xff"), "BaseCommand")
    with pytest.raises(MalformedFrame, match="missing required fields: type"):
        parse_proto(pb.BaseCommand(), bytearray(), "BaseCommand")
