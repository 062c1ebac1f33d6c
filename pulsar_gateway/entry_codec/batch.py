"""A client batch: the payload of an entry whose ``MessageMetadata.num_messages_in_batch`` is
set, once decompressed (docs/binary_protocol.md "Batches, compression and chunks").

Layout, once per message: 4-byte big-endian size, ``SingleMessageMetadata``,
``payload_size`` bytes of message.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from pulsar_gateway.entry_codec.errors import MalformedFrame
from pulsar_gateway.entry_codec.metadata import parse_proto
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["encode_batch", "parse_batch"]

_U32 = struct.Struct(">I")


def parse_batch(payload: bytes, num_messages: int) -> list[tuple[pb.SingleMessageMetadata, bytes]]:
    """Split an uncompressed batch payload into its messages.

    Layout, ``num_messages`` times: 4-byte size, SingleMessageMetadata,
    ``payload_size`` bytes of message.

    Args:
        payload: the (already decompressed) batch payload.
        num_messages: ``MessageMetadata.num_messages_in_batch``.

    Returns:
        ``(metadata, message bytes)`` for each message, in order.

    Raises:
        MalformedFrame: truncated, invalid metadata, a negative count, or bytes
            left over after the last message.
    """
    if num_messages < 0:
        raise MalformedFrame(f"negative batch size {num_messages}")
    messages = []
    size = len(payload)
    offset = 0
    with memoryview(payload) as view:
        for index in range(num_messages):
            if size - offset < 4:
                raise MalformedFrame(f"batch truncated before message {index}")
            metadata_size = _U32.unpack_from(view, offset)[0]
            offset += 4
            if metadata_size > size - offset:
                raise MalformedFrame(f"batch message {index}: metadata size exceeds the batch")
            metadata = parse_proto(
                pb.SingleMessageMetadata(),
                view[offset : offset + metadata_size].tobytes(),
                f"batch message {index}: SingleMessageMetadata",
            )
            offset += metadata_size
            payload_size = metadata.payload_size
            if payload_size < 0 or payload_size > size - offset:
                raise MalformedFrame(f"batch message {index}: payload_size {payload_size} invalid")
            messages.append((metadata, view[offset : offset + payload_size].tobytes()))
            offset += payload_size
    if offset != size:
        raise MalformedFrame(f"{size - offset} bytes left after {num_messages} batch messages")
    return messages


def encode_batch(messages: Iterable[tuple[pb.SingleMessageMetadata, bytes]]) -> bytes:
    """Build an uncompressed batch payload; inverse of parse_batch.

    ``payload_size`` is filled in (on a copy) when unset.

    Raises:
        ValueError: a message's payload_size is set and differs from its length.
        google.protobuf.message.EncodeError: a required field is unset.
    """
    parts: list[bytes] = []
    for metadata, data in messages:
        if not metadata.HasField("payload_size"):
            filled = pb.SingleMessageMetadata()
            filled.CopyFrom(metadata)
            filled.payload_size = len(data)
            metadata = filled
        elif metadata.payload_size != len(data):
            raise ValueError(f"payload_size {metadata.payload_size} != message length {len(data)}")
        serialized = metadata.SerializeToString()
        parts += (_U32.pack(len(serialized)), serialized, data)
    return b"".join(parts)
