"""What compaction needs to know of a stored Pulsar entry, behind the core's EntryInspector.

A stored entry is the producer's blob (:func:`codec.parse_blob`): ``MessageMetadata`` and a
payload that is one message or a client batch (``num_messages_in_batch`` set), compressed as a
whole with the producer's codec (docs/binary_protocol.md "Batches, compression and chunks"). The
facts used, from Pulsar's compactor (``AbstractTwoPhaseCompactor.extractKeyAndSize``,
``RawBatchConverter``):

* the compaction key is the message's ``partition_key`` (not the ordering key);
* a message is a tombstone when its value is null: ``null_value`` set, or an empty
  payload (``payload_size`` 0 in a batch, an uncompressed size of 0 otherwise);
* a batch is split only when it is readable: batched and not encrypted. An encrypted batch
  is one unit, keyed by the outer metadata's key (the first message's);
* a rewritten batch keeps every slot: a superseded message becomes a
  ``SingleMessageMetadata{compacted_out=true, payload_size=0}`` with no payload, the batch
  is compressed again with the same codec and ``uncompressed_size`` updated.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import lz4.block
import snappy
import zstandard

from pulsar_gateway.adapters.pulsar_binary.codec import (
    CodecError,
    encode_batch,
    make_blob,
    parse_batch,
    parse_blob,
    proto_text,
)
from pulsar_gateway.core import EntryFormatError, MessageKey
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["BinaryEntryInspector", "compress", "decompress"]


def decompress(codec: int, data: bytes, uncompressed_size: int) -> bytes:
    """Undo a producer's compression (the formats of the C++ client's ``lib/CompressionCodec*.cc``).

    Raises:
        EntryFormatError: unknown codec or corrupt data.
    """
    try:
        if codec == pb.NONE:
            return data
        if codec == pb.LZ4:
            return bytes(lz4.block.decompress(data, uncompressed_size=uncompressed_size))
        if codec == pb.ZLIB:
            return zlib.decompress(data)
        if codec == pb.ZSTD:
            return bytes(
                zstandard.ZstdDecompressor().decompress(data, max_output_size=uncompressed_size)
            )
        if codec == pb.SNAPPY:
            return bytes(snappy.uncompress(data))
    except Exception as exc:  # each library has its own error types
        raise EntryFormatError(f"cannot decompress a {codec} payload: {exc}") from exc
    raise EntryFormatError(f"unknown compression type {codec}")


def compress(codec: int, data: bytes) -> bytes:
    """Compress as the Pulsar clients do: LZ4 raw block, zlib stream, zstd frame (level 3),
    raw snappy block."""
    if codec == pb.NONE:
        return data
    if codec == pb.LZ4:
        return bytes(lz4.block.compress(data, store_size=False))
    if codec == pb.ZLIB:
        return zlib.compress(data)
    if codec == pb.ZSTD:
        return bytes(zstandard.ZstdCompressor(level=3).compress(data))
    if codec == pb.SNAPPY:
        return bytes(snappy.compress(data))
    raise EntryFormatError(f"unknown compression type {codec}")


def _split(blob: bytes) -> tuple[pb.MessageMetadata, list[tuple[pb.SingleMessageMetadata, bytes]]]:
    """The metadata and the messages of a readable batch, decompressed."""
    try:
        parsed = parse_blob(blob)
        metadata = parsed.metadata
        payload = decompress(metadata.compression, parsed.payload, metadata.uncompressed_size)
        return metadata, parse_batch(payload, metadata.num_messages_in_batch)
    except CodecError as exc:
        raise EntryFormatError(str(exc)) from exc


def _readable_batch(metadata: pb.MessageMetadata) -> bool:
    # RawBatchConverter.isReadableBatch: batched and not encrypted
    return metadata.HasField("num_messages_in_batch") and not metadata.encryption_keys


class BinaryEntryInspector:
    """:class:`pulsar_gateway.core.admin.compaction.EntryInspector` for blobs stored by the binary
    adapter."""

    def messages(self, blob: bytes) -> list[MessageKey]:
        try:
            metadata = parse_blob(blob).metadata
        except CodecError as exc:
            raise EntryFormatError(str(exc)) from exc
        if not _readable_batch(metadata):
            key = proto_text(metadata.partition_key) if metadata.HasField("partition_key") else None
            if metadata.HasField("uncompressed_size"):
                empty = metadata.uncompressed_size == 0
            else:
                empty = len(parse_blob(blob).payload) == 0
            return [MessageKey(key, metadata.null_value or empty)]
        _, messages = _split(blob)
        out = []
        for single, data in messages:
            if single.compacted_out:
                out.append(MessageKey(None, True))
            else:
                key = proto_text(single.partition_key) if single.HasField("partition_key") else None
                out.append(MessageKey(key, single.null_value or not data))
        return out

    def rewrite(self, blob: bytes, keep: Sequence[bool]) -> bytes:
        metadata, messages = _split(blob)
        if len(keep) != len(messages):
            raise EntryFormatError(f"{len(keep)} flags for a batch of {len(messages)}")
        dropped = pb.SingleMessageMetadata(compacted_out=True, payload_size=0)
        batch = encode_batch(
            (single, data) if kept else (dropped, b"")
            for (single, data), kept in zip(messages, keep, strict=True)
        )
        if metadata.compression != pb.NONE or metadata.HasField("uncompressed_size"):
            metadata.uncompressed_size = len(batch)
        return make_blob(metadata, compress(metadata.compression, batch))
