"""``MessageIdData``, the protobuf form of a message id, and its serialized and base64 forms.

Message ids travel as base64 of the serialized ``MessageIdData`` (Pulsar's WebSocket API
and REST produce both do), the bytes the official clients' ``MessageId.serialize()``
produce, so an id round-trips between surfaces.
"""

from __future__ import annotations

import base64
import binascii
from binascii import b2a_base64

from google.protobuf.message import DecodeError

from pulsar_gateway.core import MessageId, signed64
from pulsar_gateway.entry_codec.varint import (
    MASK64,
    VARINT_1,
    ivarint,
    ledger_varint,
    uvarint,
)
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = [
    "decode_message_id",
    "decode_message_id_data",
    "deserialize_message_id",
    "encode_message_id",
    "encode_message_id_data",
    "serialize_message_id",
]


def encode_message_id_data(
    ledger_id: int, entry_id: int, partition: int = -1, batch_index: int = -1, batch_size: int = 0
) -> bytes:
    """Serialized ``MessageIdData{ledgerId, entryId, partition, batch_index, batch_size}``,
    the -1 defaults and a zero batch size left out as the official clients leave them;
    byte-identical to protobuf's serialization (tested). Ids are unsigned on the wire:
    ``-1`` is written as ``2**64 - 1``.

    Raises:
        ValueError: a value out of its field's range.
    """
    out = b"\x08" + ledger_varint(ledger_id & MASK64) + b"\x10"
    out += VARINT_1[entry_id] if 0 <= entry_id < 128 else uvarint(entry_id & MASK64)
    if partition >= 0:
        out += b"\x18" + ivarint(partition, 32)
    if batch_index >= 0:
        out += b"\x20" + ivarint(batch_index, 32)
    if batch_size > 0:
        out += b"\x30" + ivarint(batch_size, 32)
    return out


def encode_message_id(message_id: MessageId, batch_size: int = 0) -> str:
    """Base64 of the serialized ``MessageIdData`` of ``message_id``."""
    return b2a_base64(serialize_message_id(message_id, batch_size), newline=False).decode()


def serialize_message_id(message_id: MessageId, batch_size: int = 0) -> bytes:
    """The serialized ``MessageIdData`` of ``message_id``: the bytes of the official clients'
    ``MessageId.serialize()`` (Java ``toByteArray()``), which leave the -1 defaults out."""
    return encode_message_id_data(*message_id, batch_size)


def deserialize_message_id(raw: bytes) -> MessageId:
    """Read the bytes of :func:`serialize_message_id` (or an official client's).

    Raises:
        ValueError: not a ``MessageIdData``.
    """
    return _read_message_id(raw)[0]


def _read_message_id(raw: bytes) -> tuple[MessageId, int]:
    try:
        data = pb.MessageIdData.FromString(raw)
        if not data.IsInitialized():  # proto2 parsing does not check required fields
            raise ValueError("ledgerId and entryId are required")
    except (DecodeError, ValueError) as exc:
        raise ValueError(f"not a serialized message id: {exc}") from None
    message_id = MessageId(
        signed64(data.ledgerId), signed64(data.entryId), data.partition, data.batch_index
    )
    return message_id, data.batch_size


def decode_message_id(text: str) -> MessageId:
    """Read an id written by :func:`encode_message_id` or an official client's
    ``MessageId.serialize()``, base64 (standard or URL-safe alphabet).

    Raises:
        ValueError: not base64, or not a ``MessageIdData``.
    """
    return decode_message_id_data(text)[0]


def decode_message_id_data(text: str) -> tuple[MessageId, int]:
    """:func:`decode_message_id`, and the ``batch_size`` the id carries (0 when absent).

    Raises:
        ValueError: not base64, or not a ``MessageIdData``.
    """
    try:
        raw = base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
        return _read_message_id(raw)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"Invalid message id {text[:100]!r}: {exc}") from None
