"""The blob: a stored entry's bytes, as a producer sends them.

Theory of operation
-------------------
The *blob* is the unit of storage: the payload section of a SEND or MESSAGE frame, from the
``0x0e01`` magic to the end of the frame (docs/binary_protocol.md "Framing")::

    [0x0e01 crc32c] metadataSize MessageMetadata payload

the CRC32C covering everything after itself. The gateway stores a producer's blob as is and
replays it after a MESSAGE command, the way the Java broker resends the stored entry with
its checksum, so delivery never re-encodes metadata or payload. When a SEND arrives without
a checksum the frame decoder synthesizes the magic and CRC (:func:`parse_payload_section`),
so every blob has the same layout (see :func:`make_blob`, which builds one for a message
that did not arrive as a binary SEND).

The frame decoder (``pulsar_gateway/frame_codec.py``) parses a payload
section in place in its buffer: the only copies are the blob (plus its payload slice) that
the caller keeps, taken through a short-lived ``memoryview`` (a small one is sliced: below
``_COPY_BELOW`` bytes a copy costs less than a view); only the metadata is parsed by
protobuf.

A bad checksum is not an error here: :attr:`Payload.checksum_ok` reports it and the binary
adapter answers SEND_ERROR(ChecksumError), as the Java broker does.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from google.protobuf.message import DecodeError

from pulsar_gateway.entry_codec.checksum import crc32c
from pulsar_gateway.entry_codec.errors import MalformedFrame
from pulsar_gateway.entry_codec.metadata import parse_proto
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = [
    "BLOB_HEADER_SIZE",
    "MAGIC_BROKER_ENTRY_METADATA",
    "MAGIC_CRC32C",
    "Payload",
    "check_blob",
    "make_blob",
    "parse_blob",
    "parse_payload_section",
    "read_stored_blob",
]

#: Marks a CRC32C field in a payload frame (Commands.java ``magicCrc32c``).
MAGIC_CRC32C: Final = 0x0E01
#: Marks a broker-entry-metadata section in a MESSAGE frame (Commands.java
#: ``magicBrokerEntryMetadata``).
MAGIC_BROKER_ENTRY_METADATA: Final = 0x0E02
#: magic(2) + crc(4) + metadataSize(4)
BLOB_HEADER_SIZE: Final = 10

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_CRC_MAGIC: Final = _U16.pack(MAGIC_CRC32C)
# Below this many bytes a slice is copied rather than viewed: for a small message the
# copy costs less than a memoryview's set-up and release (~0.35 µs per SEND).
_COPY_BELOW: Final = 8 * 1024


# A NamedTuple's own constructor is a Python function (``collections.namedtuple``
# compiles ``__new__`` from source), twice the cost of ``tuple.__new__`` on its class,
# which builds the same object; the construction below runs once per SEND.
_new = tuple.__new__


class Payload(NamedTuple):
    """The payload section of a SEND or MESSAGE frame.

    Attributes:
        metadata: the parsed ``MessageMetadata``.
        payload: the bytes after the metadata: one message, or a batch
            (``metadata.num_messages_in_batch`` set), possibly compressed.
        blob: what to store: magic 0x0e01, CRC32C, metadataSize, metadata,
            payload. Synthesized (with a correct CRC) when the frame had no
            checksum, so every blob has this layout.
        checksum_ok: False when the frame's CRC32C did not match; the rest is
            then untrusted and must not be stored.
    """

    metadata: pb.MessageMetadata
    payload: bytes
    blob: bytes
    checksum_ok: bool


def _metadata_end(blob: bytes) -> int:
    """Where a blob's metadata ends, its header checked (magic, metadataSize in bounds)."""
    size = len(blob)
    if size < BLOB_HEADER_SIZE:
        raise MalformedFrame(f"payload section of {size} bytes is too short")
    if blob[0] != 0x0E or blob[1] != 0x01:
        raise MalformedFrame("blob does not start with the 0x0e01 checksum magic")
    metadata_size: int = _U32.unpack_from(blob, 6)[0]
    metadata_end = BLOB_HEADER_SIZE + metadata_size
    if metadata_end > size:
        raise MalformedFrame(
            f"metadataSize {metadata_size} exceeds the {size - BLOB_HEADER_SIZE} bytes left"
        )
    return metadata_end


def _parse_blob(blob: bytes, verified: bool) -> Payload:
    """Split a blob; compute checksum_ok unless the caller just made the CRC."""
    size = len(blob)
    metadata_end = _metadata_end(blob)
    checksum_ok = verified
    if not verified:
        if size < _COPY_BELOW:
            checksum_ok = crc32c(blob[6:]) == _U32.unpack_from(blob, 2)[0]
        else:
            with memoryview(blob) as view:
                checksum_ok = crc32c(view[6:]) == _U32.unpack_from(blob, 2)[0]
    metadata = parse_proto(
        pb.MessageMetadata(), blob[BLOB_HEADER_SIZE:metadata_end], "MessageMetadata"
    )
    return _new(Payload, (metadata, blob[metadata_end:], blob, checksum_ok))


def parse_payload_section(buffer: bytearray, offset: int, end: int) -> Payload:
    """Parse ``buffer[offset:end]``, the part of a frame after the command."""
    if end - offset >= 6 and buffer[offset] == 0x0E and buffer[offset + 1] == 0x02:
        # Broker entry metadata: 2-byte magic, 4-byte size, message. Skipped:
        # the gateway keeps its own entry metadata.
        section_size = _U32.unpack_from(buffer, offset + 2)[0]
        offset += 6 + section_size
        if offset > end:
            raise MalformedFrame(f"broker entry metadata of {section_size} bytes is truncated")
    if end - offset >= 2 and buffer[offset] == 0x0E and buffer[offset + 1] == 0x01:
        if end - offset < _COPY_BELOW:
            return _parse_blob(bytes(buffer[offset:end]), verified=False)
        # One copy out of the buffer; the temporary slice dies before the view is
        # released, so the bytearray is resizable again when this returns.
        with memoryview(buffer) as view:
            return _parse_blob(view[offset:end].tobytes(), verified=False)
    with memoryview(buffer) as view:
        # No checksum: checksums are optional (protocol version < 6, or a peer
        # that skips them). Synthesize one so every stored blob looks the same.
        rest = view[offset:end]
        try:
            blob = b"".join((_CRC_MAGIC, _U32.pack(crc32c(rest)), rest))
        finally:
            rest.release()
    return _parse_blob(blob, verified=True)


def parse_blob(blob: bytes | bytearray) -> Payload:
    """Split a stored blob and verify its checksum.

    Args:
        blob: magic 0x0e01, CRC32C, metadataSize, MessageMetadata, payload; a bytearray
            (a reader's buffer) is copied to bytes first.

    Returns:
        A :class:`Payload` whose ``blob`` is the argument and whose
        ``checksum_ok`` tells whether the CRC matched.

    Raises:
        MalformedFrame: no magic, truncated, or invalid metadata.
    """
    return _parse_blob(bytes(blob), verified=False)


def read_stored_blob(blob: bytes) -> tuple[pb.MessageMetadata, bytes]:
    """A stored blob's metadata and payload, for delivery.

    Neither the checksum nor the required fields are checked again: both were when the
    entry was appended (:func:`parse_blob` of a SEND, :func:`make_blob` for the other
    surfaces), and checking them costs more than the rest of a delivery to a WebSocket
    consumer. Bytes that are not a blob still raise.

    Raises:
        MalformedFrame: no magic, truncated, or metadata that is not protobuf.
    """
    blob = bytes(blob)
    end = _metadata_end(blob)
    try:
        metadata = pb.MessageMetadata.FromString(blob[BLOB_HEADER_SIZE:end])
    except DecodeError as exc:
        raise MalformedFrame(f"MessageMetadata: invalid protobuf ({exc})") from exc
    return metadata, blob[end:]


def check_blob(blob: bytes) -> None:
    """Refuse bytes that do not start like a blob.

    Raises:
        ValueError: shorter than the blob header, or no 0x0e01 magic.
    """
    if len(blob) < BLOB_HEADER_SIZE or blob[0] != 0x0E or blob[1] != 0x01:
        raise ValueError("not a blob: expected magic 0x0e01, CRC32C and metadataSize")


def make_blob(metadata: pb.MessageMetadata | bytes, payload: bytes) -> bytes:
    """Build a blob for a message that did not arrive as a binary SEND.

    Args:
        metadata: a ``MessageMetadata`` (its required producer_name,
            sequence_id and publish_time must be set) or its serialized bytes.
        payload: the message bytes, or a batch payload built by encode_batch.

    Returns:
        magic 0x0e01, CRC32C, metadataSize, metadata, payload.

    Raises:
        google.protobuf.message.EncodeError: a required metadata field is unset.
    """
    if not isinstance(metadata, bytes):
        metadata = metadata.SerializeToString()
    covered = _U32.pack(len(metadata)) + metadata  # the checksum covers size and metadata
    crc = crc32c(payload, crc32c(covered))
    return b"".join((_CRC_MAGIC, _U32.pack(crc), covered, payload))
