"""pulsar_gateway/entry_codec/messages.py and message_id_data.py: single messages <-> stored
entries, and base64 message ids."""

from __future__ import annotations

import base64

import pulsar
import pytest

from pulsar_gateway.core import EntryToAppend
from pulsar_gateway.core.model.entry import decode_ack_set
from pulsar_gateway.core.model.message_id import MessageId
from pulsar_gateway.entry_codec import (
    MessageFormatError,
    OutgoingMessage,
    compress,
    decode_message_id,
    encode_batch,
    encode_entry,
    encode_message_id,
    entry_to_append,
    make_blob,
    parse_blob,
    unpack_entry,
)
from pulsar_gateway.proto import PulsarApi_pb2 as pb


@pytest.mark.parametrize("codec", [pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY])
def test_encode_then_unpack_keeps_every_field(codec: int) -> None:
    message = OutgoingMessage(
        b"hello " * 50,
        key="k1",
        properties={"a": "1", "b": "2"},
        event_time=1234,
        ordering_key=b"ok",
        deliver_at=99_000,
    )
    blob = encode_entry(message, "prod-1", 7, 5_000, compression=codec)
    metadata = parse_blob(blob).metadata
    assert metadata.compression == codec
    [got] = unpack_entry(b"1700-3", blob, partition=2, redelivery_count=4)
    assert got.message_id == MessageId(1700, 3, 2, -1)
    assert got.payload == message.payload
    assert (got.key, got.properties, got.event_time) == ("k1", {"a": "1", "b": "2"}, 1234)
    assert (got.publish_time, got.producer_name, got.sequence_id) == (5_000, "prod-1", 7)
    assert (got.ordering_key, got.deliver_at, got.redelivery_count) == (b"ok", 99_000, 4)
    assert got.batch_size == 0


def test_plain_message_has_no_optional_fields() -> None:
    blob = encode_entry(OutgoingMessage(b"x"), "p", 0, 1)
    metadata = parse_blob(blob).metadata
    for name in ("partition_key", "event_time", "ordering_key", "deliver_at_time"):
        assert not metadata.HasField(name)
    [got] = unpack_entry(b"1-0", blob)
    assert (got.key, got.event_time, got.deliver_at, got.properties) == (None, 0, None, {})


def test_sticky_key_prefers_ordering_key() -> None:
    assert OutgoingMessage(b"", key="k").sticky_key == b"k"
    assert OutgoingMessage(b"", key="k", ordering_key=b"o").sticky_key == b"o"
    assert OutgoingMessage(b"").sticky_key is None


def _batch_blob(codec: int) -> bytes:
    singles = [
        (pb.SingleMessageMetadata(partition_key=f"k{i}", event_time=i + 1), b"m%d" % i)
        for i in range(4)
    ]
    singles[2][0].compacted_out = True
    batch = encode_batch(singles)
    metadata = pb.MessageMetadata(
        producer_name="p", sequence_id=10, publish_time=42, num_messages_in_batch=4
    )
    metadata.compression = codec  # type: ignore[assignment]
    metadata.uncompressed_size = len(batch)
    return make_blob(metadata, compress(codec, batch))


@pytest.mark.parametrize("codec", [pb.NONE, pb.LZ4, pb.ZSTD])
def test_batch_is_split_and_compacted_out_messages_dropped(codec: int) -> None:
    got = unpack_entry(b"5-6", _batch_blob(codec), partition=1)
    assert [m.payload for m in got] == [b"m0", b"m1", b"m3"]
    assert [m.message_id for m in got] == [MessageId(5, 6, 1, i) for i in (0, 1, 3)]
    assert [m.key for m in got] == ["k0", "k1", "k3"]
    assert [m.sequence_id for m in got] == [10, 11, 13]
    assert {m.batch_size for m in got} == {4}
    assert {m.publish_time for m in got} == {42}


def test_ack_set_leaves_acknowledged_batch_messages_out() -> None:
    # bit i set = message i still unacked (Pulsar's ack set)
    unacked = decode_ack_set("0101")
    got = unpack_entry(b"5-6", _batch_blob(pb.NONE), ack_set=unacked)
    assert [m.message_id.batch_index for m in got] == [1, 3]


def test_encrypted_entry_is_one_message_as_stored() -> None:
    metadata = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1)
    metadata.encryption_keys.add(key="k", value=b"v")
    metadata.num_messages_in_batch = 3
    [got] = unpack_entry(b"1-1", make_blob(metadata, b"ciphertext"))
    assert got.encrypted and got.payload == b"ciphertext"


def test_unreadable_entries_raise() -> None:
    with pytest.raises(MessageFormatError):
        unpack_entry(b"1-1", b"not a blob")
    metadata = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1)
    metadata.compression = pb.LZ4
    metadata.uncompressed_size = 100
    with pytest.raises(MessageFormatError):
        unpack_entry(b"1-1", make_blob(metadata, b"\xff\xff garbage"))


def test_message_id_round_trips_with_the_official_client() -> None:
    official = pulsar.MessageId(2, 1_700_000_000_000, 5, 3)
    text = base64.b64encode(official.serialize()).decode()
    assert decode_message_id(text) == MessageId(1_700_000_000_000, 5, 2, 3)
    ours = encode_message_id(MessageId(1_700_000_000_000, 5, 2, 3), batch_size=4)
    back = pulsar.MessageId.deserialize(base64.b64decode(ours))
    assert (back.ledger_id(), back.entry_id(), back.partition(), back.batch_index()) == (
        1_700_000_000_000,
        5,
        2,
        3,
    )
    assert decode_message_id(encode_message_id(MessageId(7, 8))) == MessageId(7, 8)
    # earliest (-1, -1) survives the uint64 wire form
    assert decode_message_id(encode_message_id(MessageId(-1, -1))) == MessageId(-1, -1)


def test_message_id_accepts_the_url_safe_alphabet() -> None:
    text = encode_message_id(MessageId(1_700_000_000_000, 5, 2, 3))
    url_safe = text.replace("+", "-").replace("/", "_")
    assert decode_message_id(url_safe) == MessageId(1_700_000_000_000, 5, 2, 3)


@pytest.mark.parametrize("text", ["", "!!!", base64.b64encode(b"\xff\xff").decode(), "CAE="])
def test_bad_message_ids_raise_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        decode_message_id(text)


def _length_delimited(number: int, data: bytes) -> bytes:
    return bytes([number << 3 | 2, len(data)]) + data


def test_text_that_is_not_utf8_is_read_with_replacement_characters() -> None:
    """A producer of the binary protocol may send string fields that are not UTF-8 (upb then
    hands over bytes): readers of text get U+FFFD in their place, as Pulsar's LightProto
    decodes them, and nothing fails (the fuzzer broke a WebSocket consumer with one)."""
    bad = b"k\xff\xfe"
    metadata = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1)
    raw = (
        metadata.SerializeToString()
        + _length_delimited(1, b"prod\xc3\x28")  # producer_name (the last one counts)
        + _length_delimited(4, _length_delimited(1, bad) + _length_delimited(2, bad))
        + _length_delimited(6, bad)  # partition_key
    )
    [got] = unpack_entry(b"5-0", make_blob(raw, b"payload"), partition=-1, redelivery_count=0)
    assert got.producer_name == "prod\ufffd("
    assert got.key == "k\ufffd\ufffd"
    assert got.properties == {"k\ufffd\ufffd": "k\ufffd\ufffd"}
    assert got.payload == b"payload"


def test_a_whole_message_records_its_own_sequence_id_and_keeps_its_key_and_delay() -> None:
    message = OutgoingMessage(b"p", key="user-7", ordering_key=b"order-7", deliver_at=9_000)
    blob = encode_entry(message, "producer", 41, 1_000)

    entry = entry_to_append(message, blob, 41, 1_000)

    assert entry == EntryToAppend(blob, 1, 41, 41, b"order-7", None, 1_000, 9_000)
    keyed = OutgoingMessage(b"p", key="user-7")
    assert entry_to_append(keyed, blob, 1, 0).sticky_key == b"user-7"
