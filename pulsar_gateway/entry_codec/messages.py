"""Single messages <-> stored Pulsar entries, for the surfaces that handle one message at a
time: the WebSocket API, REST produce (PIP-64), the admin API's peek and the Spark data
source.

Sans-I/O. An entry is stored exactly as a binary producer sends it (docs/architecture.md "Design
decisions", one stream entry per Pulsar entry): ``MessageMetadata`` and a payload, compressed as
a whole and possibly a client batch. :func:`encode_entry` builds that form for a message that
did not arrive as a binary SEND, so a binary consumer reads it unchanged; :func:`unpack_entry`
goes the other way, decompressing and unbatching (docs/binary_protocol.md "Batches, compression
and chunks").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pulsar_gateway.core import EntryFormatError, EntryToAppend, MessageId
from pulsar_gateway.entry_codec.batch import parse_batch
from pulsar_gateway.entry_codec.blob import make_blob, read_stored_blob
from pulsar_gateway.entry_codec.compression import compress, decompress
from pulsar_gateway.entry_codec.errors import CodecError
from pulsar_gateway.entry_codec.metadata import encode_metadata, proto_field
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = [
    "MessageFormatError",
    "OutgoingMessage",
    "ReceivedMessage",
    "encode_entry",
    "entry_to_append",
    "unpack_entry",
]

_U64_MASK = (1 << 64) - 1


class MessageFormatError(ValueError):
    """A stored entry that cannot be read as Pulsar messages."""


@dataclass(slots=True)
class OutgoingMessage:
    """One message to append, as the WebSocket and REST producers describe it.

    ``deliver_at`` is ``MessageMetadata.deliver_at_time`` (ms since epoch), None when the
    message is not delayed.
    """

    payload: bytes
    key: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    event_time: int = 0
    ordering_key: bytes | None = None
    deliver_at: int | None = None
    replication_clusters: tuple[str, ...] = ()

    @property
    def sticky_key(self) -> bytes | None:
        """The Key_Shared routing key: the ordering key, else the partition key."""
        if self.ordering_key is not None:
            return self.ordering_key
        return self.key.encode() if self.key is not None else None


def encode_entry(
    message: OutgoingMessage,
    producer_name: str,
    sequence_id: int,
    publish_time: int,
    compression: int = pb.NONE,
    schema_version: bytes | None = None,
) -> bytes:
    """The stored blob of one non-batched message, compressed with ``compression``
    (a ``pb.CompressionType``) as a binary producer with that codec would send it."""
    payload = message.payload
    uncompressed_size = 0
    if compression != pb.NONE:
        uncompressed_size = len(payload)
        payload = compress(compression, payload)
    metadata = encode_metadata(  # positional: a dozen keywords cost a microsecond
        producer_name,
        sequence_id,
        publish_time,
        message.properties.items(),
        message.key,
        message.replication_clusters,
        compression,
        uncompressed_size,
        message.event_time if message.event_time > 0 else 0,
        schema_version,
        message.ordering_key,
        message.deliver_at,
    )
    return make_blob(metadata, payload)


def entry_to_append(
    message: OutgoingMessage, blob: bytes, sequence_id: int, publish_time: int
) -> EntryToAppend:
    """What a producer appends for ``message`` stored as ``blob`` (:func:`encode_entry`):
    one whole message, neither a batch nor a chunk, so deduplication records its own
    sequence id; its Key_Shared key and delivery time are the message's."""
    return EntryToAppend(
        blob,
        1,
        sequence_id,
        sequence_id,
        message.sticky_key,
        None,
        publish_time,
        message.deliver_at,
    )


@dataclass(slots=True)
class ReceivedMessage:
    """One message of a stored entry, decompressed and unbatched.

    ``batch_size`` is the number of messages of the entry's batch (0 when it is not a
    batch); ``encrypted`` marks a payload left as the producer encrypted it.
    """

    message_id: MessageId
    payload: bytes
    key: str | None
    properties: dict[str, str]
    publish_time: int
    event_time: int
    producer_name: str
    sequence_id: int
    redelivery_count: int = 0
    ordering_key: bytes | None = None
    deliver_at: int | None = None
    batch_size: int = 0
    schema_version: bytes | None = None
    encrypted: bool = False


def _properties(properties: Iterable[pb.KeyValue]) -> dict[str, str]:
    return {proto_field(kv, "key"): proto_field(kv, "value") for kv in properties}


def _unacked(ack_set: tuple[int, ...], index: int) -> bool:
    # Pulsar's ack set: bit i of word i // 64 set = message i not yet acknowledged.
    word = index // 64
    return word < len(ack_set) and (ack_set[word] & _U64_MASK) >> (index % 64) & 1 == 1


def unpack_entry(
    stream_id: bytes,
    blob: bytes,
    *,
    partition: int = -1,
    ack_set: tuple[int, ...] = (),
    redelivery_count: int = 0,
) -> list[ReceivedMessage]:
    """The messages of one stored entry, in batch order.

    Messages a compaction dropped (``compacted_out``) and, when ``ack_set`` is given (a partly
    acknowledged batch, :class:`pulsar_gateway.core.model.entry.Delivery`), messages already
    acknowledged are left out. An encrypted entry is one message with its payload as stored: the
    gateway holds no keys.

    Raises:
        MessageFormatError: the blob is not a readable Pulsar entry.
    """
    try:
        md, payload = read_stored_blob(blob)
    except CodecError as exc:
        raise MessageFormatError(str(exc)) from exc
    base = MessageId.from_stream_id(stream_id, partition)
    deliver_at = md.deliver_at_time if md.HasField("deliver_at_time") else None
    schema = md.schema_version if md.HasField("schema_version") else None
    encrypted = bool(md.encryption_keys)
    if encrypted or not md.HasField("num_messages_in_batch"):
        if not encrypted:
            payload = _decompress(md, payload)
        # positional: a dozen keywords cost more than the rest of this path
        return [
            ReceivedMessage(
                base,
                payload,
                proto_field(md, "partition_key") if md.HasField("partition_key") else None,
                _properties(md.properties) if md.properties else {},
                md.publish_time,
                md.event_time,
                proto_field(md, "producer_name"),
                md.sequence_id,
                redelivery_count,
                md.ordering_key if md.HasField("ordering_key") else None,
                deliver_at,
                0,
                schema,
                encrypted,
            )
        ]
    try:
        singles = parse_batch(_decompress(md, payload), md.num_messages_in_batch)
    except CodecError as exc:
        raise MessageFormatError(str(exc)) from exc
    out = []
    for index, (single, data) in enumerate(singles):
        if single.compacted_out or (ack_set and not _unacked(ack_set, index)):
            continue
        out.append(
            ReceivedMessage(
                message_id=MessageId(base.ledger_id, base.entry_id, partition, index),
                payload=data,
                key=proto_field(single, "partition_key")
                if single.HasField("partition_key")
                else None,
                properties=_properties(single.properties),
                publish_time=md.publish_time,
                event_time=single.event_time,
                producer_name=proto_field(md, "producer_name"),
                # the client numbers a batch's messages from the entry's sequence id
                sequence_id=single.sequence_id
                if single.HasField("sequence_id")
                else md.sequence_id + index,
                redelivery_count=redelivery_count,
                ordering_key=single.ordering_key if single.HasField("ordering_key") else None,
                deliver_at=deliver_at,
                batch_size=len(singles),
                schema_version=schema,
            )
        )
    return out


def _decompress(md: pb.MessageMetadata, payload: bytes) -> bytes:
    try:
        return decompress(md.compression, payload, md.uncompressed_size)
    except EntryFormatError as exc:
        raise MessageFormatError(str(exc)) from exc
