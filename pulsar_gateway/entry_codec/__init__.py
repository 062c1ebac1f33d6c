"""The stored-entry format: the bytes a producer sends and the gateway stores in a Redis
stream entry, and the single messages and message ids read from and written into them.

Sans-I/O, below the adapters: it imports only the wire format (:mod:`pulsar_gateway.proto`)
and the core's public API (:mod:`pulsar_gateway.core`); the binary, WebSocket and HTTP
adapters, the composition root and the Spark data source import it (a test,
``tests/unit/test_architecture.py``, checks both directions). Modules:

* :mod:`.blob`: the blob (checksum magic, CRC32C, ``MessageMetadata``, payload): parse,
  verify, build; the in-buffer parse of a frame's payload section.
* :mod:`.metadata`: protobuf parsing with required fields checked, text fields, the
  hand-written ``MessageMetadata`` of a message built by the gateway.
* :mod:`.batch`: a client batch's messages.
* :mod:`.compression`: the producers' compression codecs.
* :mod:`.message_id_data`: ``MessageIdData`` and its serialized and base64 forms.
* :mod:`.messages`: one message <-> a stored entry (WebSocket, REST, admin peek, Spark).
* :mod:`.inspector`: the core's ``EntryInspector`` (compaction keys inside an entry).
* :mod:`.checksum`, :mod:`.varint`, :mod:`.errors`: CRC32C, hand-written varints, errors.
"""

from __future__ import annotations

from pulsar_gateway.entry_codec.batch import encode_batch, parse_batch
from pulsar_gateway.entry_codec.blob import (
    BLOB_HEADER_SIZE,
    MAGIC_BROKER_ENTRY_METADATA,
    MAGIC_CRC32C,
    Payload,
    check_blob,
    make_blob,
    parse_blob,
    parse_payload_section,
    read_stored_blob,
)
from pulsar_gateway.entry_codec.checksum import crc32c
from pulsar_gateway.entry_codec.compression import compress, decompress
from pulsar_gateway.entry_codec.errors import CodecError, MalformedFrame
from pulsar_gateway.entry_codec.inspector import BinaryEntryInspector
from pulsar_gateway.entry_codec.message_id_data import (
    decode_message_id,
    decode_message_id_data,
    deserialize_message_id,
    encode_message_id,
    encode_message_id_data,
    serialize_message_id,
)
from pulsar_gateway.entry_codec.messages import (
    MessageFormatError,
    OutgoingMessage,
    ReceivedMessage,
    encode_entry,
    entry_to_append,
    unpack_entry,
)
from pulsar_gateway.entry_codec.metadata import (
    encode_metadata,
    parse_proto,
    proto_field,
    proto_text,
)

__all__ = [
    "BLOB_HEADER_SIZE",
    "MAGIC_BROKER_ENTRY_METADATA",
    "MAGIC_CRC32C",
    "BinaryEntryInspector",
    "CodecError",
    "MalformedFrame",
    "MessageFormatError",
    "OutgoingMessage",
    "Payload",
    "ReceivedMessage",
    "check_blob",
    "compress",
    "crc32c",
    "decode_message_id",
    "decode_message_id_data",
    "decompress",
    "deserialize_message_id",
    "encode_batch",
    "encode_entry",
    "encode_message_id",
    "encode_message_id_data",
    "encode_metadata",
    "entry_to_append",
    "make_blob",
    "parse_batch",
    "parse_blob",
    "parse_payload_section",
    "parse_proto",
    "proto_field",
    "proto_text",
    "read_stored_blob",
    "serialize_message_id",
    "unpack_entry",
]
