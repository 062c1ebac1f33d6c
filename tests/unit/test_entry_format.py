"""pulsar_gateway/entry_codec/inspector.py, the core's EntryInspector (compaction's view of
stored blobs), the compression codecs, and ack sets."""

from __future__ import annotations

import pytest

from pulsar_gateway.core.admin.compaction import MessageKey
from pulsar_gateway.core.model.entry import EntryFormatError, ack_set_of_kept, decode_ack_set
from pulsar_gateway.entry_codec import (
    BinaryEntryInspector,
    compress,
    decompress,
    encode_batch,
    make_blob,
    parse_batch,
    parse_blob,
)
from pulsar_gateway.proto import PulsarApi_pb2 as pb

CODECS = [pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY]
inspector = BinaryEntryInspector()


def metadata(**fields: object) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, **fields)


def single(data: bytes, **fields: object) -> bytes:
    return make_blob(metadata(**fields), data)


def batch(messages: list[tuple[str | None, bytes, bool]], codec: int = pb.NONE) -> bytes:
    """A client batch of ``(key, payload, null_value)`` messages, compressed with ``codec``."""
    singles = []
    for i, (key, data, null) in enumerate(messages):
        m = pb.SingleMessageMetadata(payload_size=len(data), sequence_id=i)
        if key is not None:
            m.partition_key = key
        if null:
            m.null_value = True
        m.properties.add(key="i", value=str(i))
        singles.append((m, data))
    payload = encode_batch(singles)
    md = metadata(num_messages_in_batch=len(messages))
    if messages[0][0] is not None:
        md.partition_key = messages[0][0]
    if codec != pb.NONE:
        md.compression = codec
        md.uncompressed_size = len(payload)
    return make_blob(md, compress(codec, payload))


def unbatch(blob: bytes) -> list[tuple[pb.SingleMessageMetadata, bytes]]:
    parsed = parse_blob(blob)
    md = parsed.metadata
    payload = decompress(md.compression, parsed.payload, md.uncompressed_size)
    return parse_batch(payload, md.num_messages_in_batch)


# -- reading keys ----------------------------------------------------------------------------


def test_single_message_key_and_tombstones() -> None:
    assert inspector.messages(single(b"v", partition_key="k")) == [MessageKey("k", False)]
    assert inspector.messages(single(b"v")) == [MessageKey(None, False)]
    # null_value, or an empty payload, is a tombstone
    assert inspector.messages(single(b"", partition_key="k", null_value=True)) == [
        MessageKey("k", True)
    ]
    assert inspector.messages(single(b"", partition_key="k")) == [MessageKey("k", True)]
    # the ordering key is not the compaction key (Pulsar compacts on partition_key)
    assert inspector.messages(single(b"v", ordering_key=b"o")) == [MessageKey(None, False)]


def test_compressed_single_message_uses_its_uncompressed_size() -> None:
    blob = single(compress(pb.LZ4, b""), partition_key="k", compression=pb.LZ4, uncompressed_size=0)
    assert inspector.messages(blob) == [MessageKey("k", True)]
    blob = single(
        compress(pb.LZ4, b"v"), partition_key="k", compression=pb.LZ4, uncompressed_size=1
    )
    assert inspector.messages(blob) == [MessageKey("k", False)]


@pytest.mark.parametrize("codec", CODECS, ids=pb.CompressionType.Name)
def test_batch_messages_in_index_order(codec: int) -> None:
    blob = batch(
        [("a", b"1", False), (None, b"2", False), ("a", b"", True), ("b", b"", False)], codec
    )
    assert inspector.messages(blob) == [
        MessageKey("a", False),
        MessageKey(None, False),
        MessageKey("a", True),
        MessageKey("b", True),  # empty payload_size: a tombstone, as in RawBatchConverter
    ]


def test_encrypted_batch_is_one_unit_keyed_by_the_outer_key() -> None:
    md = metadata(num_messages_in_batch=2, partition_key="k")
    md.encryption_keys.add(key="x", value=b"y")
    assert inspector.messages(make_blob(md, b"ciphertext")) == [MessageKey("k", False)]


def test_unreadable_entries_raise_entry_format_error() -> None:
    with pytest.raises(EntryFormatError):
        inspector.messages(b"garbage")
    md = metadata(num_messages_in_batch=2, compression=pb.ZSTD, uncompressed_size=10)
    with pytest.raises(EntryFormatError):
        inspector.messages(make_blob(md, b"not zstd"))


# -- rewriting batches -------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=pb.CompressionType.Name)
def test_rewrite_compacts_out_dropped_messages_in_place(codec: int) -> None:
    blob = batch([("a", b"old", False), ("b", b"bee", False), ("a", b"new", False)], codec)
    rewritten = inspector.rewrite(blob, [False, True, True])
    parsed = parse_blob(rewritten)
    assert parsed.checksum_ok
    assert parsed.metadata.num_messages_in_batch == 3  # same slots: ids do not move
    assert parsed.metadata.compression == codec
    messages = unbatch(rewritten)
    assert [(m.compacted_out, m.payload_size, data) for m, data in messages] == [
        (True, 0, b""),
        (False, 3, b"bee"),
        (False, 3, b"new"),
    ]
    assert [m.partition_key for m, _ in messages[1:]] == ["b", "a"]
    assert messages[2][0].properties[0].value == "2"  # kept messages keep their metadata
    # compacted-out slots read as keyless tombstones, so a later compaction drops them
    assert inspector.messages(rewritten)[0] == MessageKey(None, True)


def test_rewrite_checks_the_flag_count() -> None:
    with pytest.raises(EntryFormatError):
        inspector.rewrite(batch([("a", b"1", False)]), [True, False])


# -- ack sets ----------------------------------------------------------------------------------


def test_ack_set_of_a_partly_compacted_batch() -> None:
    assert ack_set_of_kept([False, True, True]) == b"011"
    # on the wire: Java BitSet words, bit i set = message i delivered
    assert decode_ack_set(ack_set_of_kept([False, True, True])) == (6,)
    assert decode_ack_set(ack_set_of_kept([True] + [False] * 64 + [True])) == (1, 2)
    assert decode_ack_set(ack_set_of_kept([False] * 63 + [True])) == (-(1 << 63),)
