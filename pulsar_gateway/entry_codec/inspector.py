"""What compaction needs to know of a stored Pulsar entry, behind the core's EntryInspector.

A stored entry is the producer's blob (:func:`.blob.parse_blob`): ``MessageMetadata`` and a
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

from collections.abc import Sequence

from pulsar_gateway.core import EntryFormatError, MessageKey
from pulsar_gateway.entry_codec.batch import encode_batch, parse_batch
from pulsar_gateway.entry_codec.blob import make_blob, parse_blob
from pulsar_gateway.entry_codec.compression import compress, decompress
from pulsar_gateway.entry_codec.errors import CodecError
from pulsar_gateway.entry_codec.metadata import proto_field
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["BinaryEntryInspector"]


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
            key = (
                proto_field(metadata, "partition_key")
                if metadata.HasField("partition_key")
                else None
            )
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
                key = (
                    proto_field(single, "partition_key")
                    if single.HasField("partition_key")
                    else None
                )
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
