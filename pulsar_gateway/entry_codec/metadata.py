"""``MessageMetadata`` and the other protobuf messages of a stored entry: parsing with the
required fields checked, reading their text fields, and writing the metadata of a message
built by the gateway."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar, cast

from google.protobuf.message import DecodeError

from pulsar_gateway.entry_codec.errors import MalformedFrame
from pulsar_gateway.entry_codec.varint import (
    VARINT_1,
    ivarint,
    ledger_varint,
    length_delimited,
    uvarint,
)
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["encode_metadata", "parse_proto", "proto_text"]

_M = TypeVar("_M", pb.BaseCommand, pb.MessageMetadata, pb.SingleMessageMetadata)


def proto_text(value: str | bytes) -> str:
    """A string field of a parsed message, as Pulsar reads it. upb hands over a proto2
    string that is not valid UTF-8 as ``bytes``; Pulsar's LightProto decodes such bytes with
    replacement characters (U+FFFD), and so does this. Such a field is kept as sent where
    the entry is stored and relayed (the binary protocol); only readers of its text see the
    replacements."""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def proto_field(message: object, name: str) -> str:
    """The string field ``name`` of a parsed message, as :func:`proto_text` reads it.

    Read by name because the stubs type a string field as ``str``, which a module
    compiled with mypyc checks where the attribute is read (mypyc's docs, "Differences
    from Python": "Runtime type checking"), so
    ``proto_text(message.field)`` would raise TypeError on the ``bytes`` of invalid UTF-8
    before it got here; ``getattr`` yields an unchecked value."""
    return proto_text(getattr(message, name))


def parse_proto(message: _M, data: bytes | bytearray, what: str) -> _M:
    """Parse ``data`` into ``message``; reject garbage and missing required fields.

    proto2 ParseFromString does not enforce ``required`` (docs/binary_protocol.md
    "Framing"), hence
    the IsInitialized check. (upb would copy a memoryview into bytes before
    parsing, so callers pass bytes, or a bytearray, which it reads in place.)
    """
    try:
        # The stubs' ParseFromString takes bytes only; upb's takes any buffer (a
        # bytearray is read in place), so it is called untyped rather than through a cast
        # of the bytearray to bytes, which would be false.
        cast(Any, message).ParseFromString(data)
    except DecodeError as exc:
        raise MalformedFrame(f"{what}: invalid protobuf ({exc})") from exc
    if not message.IsInitialized():
        # FindInitializationErrors exists at runtime but not in the stubs.
        missing = ", ".join(cast(Any, message).FindInitializationErrors())
        raise MalformedFrame(f"{what}: missing required fields: {missing}")
    return message


def encode_metadata(
    producer_name: str,
    sequence_id: int,
    publish_time: int,
    properties: Iterable[tuple[str, str]] = (),
    partition_key: str | None = None,
    replicate_to: Iterable[str] = (),
    compression: int = 0,
    uncompressed_size: int = 0,
    event_time: int = 0,
    schema_version: bytes | None = None,
    ordering_key: bytes | None = None,
    deliver_at_time: int | None = None,
) -> bytes:
    """Serialized ``MessageMetadata`` of a message built by the gateway (WebSocket, REST):
    the fields given, in field-number order, as protobuf serializes them (byte-identical,
    tested); ``compression`` and ``uncompressed_size`` only when compressed, ``event_time``
    only when set, as a client leaves defaults out. Cheaper than filling a protobuf
    message, mostly for the publish time: its varint shares the ledger ids' cache.

    Raises:
        ValueError: a number out of its field's range.
    """
    name = producer_name.encode()
    out = (
        length_delimited(b"\x0a", name)
        + (
            b"\x10" + VARINT_1[sequence_id]
            if 0 <= sequence_id < 128
            else b"\x10" + uvarint(sequence_id)
        )
        + b"\x18"
        + ledger_varint(publish_time)
    )
    for key, value in properties:
        pair = length_delimited(b"\x0a", key.encode()) + length_delimited(b"\x12", value.encode())
        out += length_delimited(b"\x22", pair)
    if partition_key is not None:
        out += length_delimited(b"\x32", partition_key.encode())
    for cluster in replicate_to:
        out += length_delimited(b"\x3a", cluster.encode())
    if compression:
        out += b"\x40" + uvarint(compression) + b"\x48" + uvarint(uncompressed_size)
    if event_time:
        out += b"\x60" + uvarint(event_time)
    if schema_version is not None:
        out += length_delimited(b"\x82\x01", schema_version)
    if ordering_key is not None:
        out += length_delimited(b"\x92\x01", ordering_key)
    if deliver_at_time is not None:
        out += b"\x98\x01" + ivarint(deliver_at_time, 64)
    return out
