"""Stored entries straight into a read's columns, without a Python object per message: the
path most entries of a read take.

An entry is the blob a producer sent (``pulsar_gateway.entry_codec.blob``: magic 0x0e01,
CRC32C, metadataSize, ``MessageMetadata``, payload), its payload one message or, with
``num_messages_in_batch`` set, a client batch (``pulsar_gateway.entry_codec.batch``: per
message a 4-byte size, ``SingleMessageMetadata``, the message's bytes). The gateway's own
reading, ``unpack_entry``, makes a ``ReceivedMessage`` per message, which costs more than
everything else a row needs; :func:`add_entries` reads the same entries into the row
batcher's column lists (:class:`pyspark_pulsar.columns.RowBatcher`) with one protobuf parse
per metadata, no message object and no ``MessageId``, and gives the same rows, byte for byte
(tested against the gateway's path over varied entries, ``tests/unit/test_spark_entries.py``).

It takes entries that are neither compressed nor encrypted nor a chunk, single messages and
batches alike, whose stream entry holds the blob first and otherwise only the numbers the
gateway writes beside it (broker and publish times, message count, key hash, delivery
time; ``pulsar_gateway.core.model.entry``). It stops at any other entry, and at
any it cannot read in full (a blob that is not one, metadata that is not protobuf, a batch
that does not add up), before adding any of that entry's rows: the caller reads that one
the gateway's way, which decompresses, keeps an encrypted payload as stored, reassembles a
chunked message, or raises the error the entry deserves. Neither path verifies the CRC32C:
the gateway checked it when the entry was appended (``read_stored_blob``).

The ``__messageId`` bytes are the official clients' ``MessageIdData`` serialization, as
:func:`pulsar_gateway.entry_codec.serialize_message_id` writes it: ledger id and entry id,
the partition when there is one, and in a batch the batch index and batch size; the varints
of an entry's ledger id and the tail of a batch's ids are made once per entry.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final, TypeAlias

from google.protobuf.message import DecodeError

from pulsar_gateway.core.model.entry import (
    BLOB,
    BROKER_TIME,
    DELIVER_AT,
    KEY_HASH,
    NUM_MESSAGES,
    PUBLISH_TIME,
)
from pulsar_gateway.entry_codec import proto_text
from pulsar_gateway.entry_codec.varint import VARINT_1, ivarint, uvarint
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from pyspark_pulsar.columns import RowBatcher
from pyspark_pulsar.storage import RawEntry

__all__ = ["add_entries"]

_MAGIC: Final = b"\x0e\x01"
_HEADER: Final = 10  # magic(2) + crc(4) + metadataSize(4)
_U32: Final = struct.Struct(">I").unpack_from
_INT32_MAX: Final = 2**31 - 1
#: The stream entry's fields besides the blob that this path reads past (all numbers).
_NUMBERS: Final = frozenset((BROKER_TIME, PUBLISH_TIME, NUM_MESSAGES, KEY_HASH, DELIVER_AT))
_metadata: Final = pb.MessageMetadata.FromString
_single_metadata: Final = pb.SingleMessageMetadata.FromString
#: ``MessageIdData.batch_index`` (field 4) and ``batch_size`` (field 6) below 128.
_INDEX_TAGS: Final = tuple(b"\x20" + varint for varint in VARINT_1)
_SIZE_TAGS: Final = tuple(b"\x30" + varint for varint in VARINT_1)
_LONE_ID_TAIL: Final = _INDEX_TAGS[0] + _SIZE_TAGS[1]
_Metadata: TypeAlias = pb.MessageMetadata | pb.SingleMessageMetadata


class _Refused(Exception):
    """An entry :func:`add_entries` leaves to the gateway's own reading."""


def add_entries(
    rows: RowBatcher,
    page: Sequence[RawEntry],
    lo: int,
    hi: int,
    partition: int,
    partial: tuple[bytes, ...],
) -> int:
    """Add the rows of ``page[lo:hi]`` to ``rows``, until ``rows`` holds ``rows.size`` rows
    or an entry this path does not take: the entries of ``partial`` (stream ids of entries
    only partly in the range read), and those the module docstring lists.

    Returns:
        The index of the first entry not read: ``hi`` when all were.
    """
    # One loop with everything inlined and the lists' methods bound: a Python call costs
    # about as much as a field read from the parsed metadata, and this runs per message.
    values = rows.values[0]
    keys, ids = rows.keys, rows.message_ids
    publish_times, event_times = rows.publish_times, rows.event_times
    offsets, property_keys = rows.property_offsets, rows.property_keys
    add_value, add_key, add_id = values.append, keys.append, ids.append
    add_publish_time, add_event_time = publish_times.append, event_times.append
    add_offset = offsets.append
    limit = rows.size
    partition_tag = b"\x18" + ivarint(partition, 32) if partition >= 0 else b""
    last_ledger, ledger_prefix = b"", b""
    for index in range(lo, hi):
        stream_id, fields = page[index]
        if partial and stream_id in partial:
            return index
        before = len(ids)
        try:
            if not _common_fields(fields) and not _other_fields(fields):
                raise _Refused
            blob = fields[1]
            if blob[:2] != _MAGIC or len(blob) < _HEADER:
                raise _Refused
            size = len(blob)
            offset = _HEADER + _U32(blob, 6)[0]
            if offset > size:
                raise _Refused
            metadata = _metadata(blob[_HEADER:offset])
            if metadata.compression or metadata.encryption_keys:
                raise _Refused
            ledger, _, entry = stream_id.partition(b"-")
            if ledger != last_ledger:
                ledger_prefix = b"\x08" + uvarint(int(ledger)) + b"\x10"
                last_ledger = ledger
            entry_id = int(entry or 0)
            message_id = (
                ledger_prefix
                + (VARINT_1[entry_id] if 0 <= entry_id < 128 else uvarint(entry_id))
                + partition_tag
            )
            publish_time = metadata.publish_time * 1000
            messages: Sequence[tuple[_Metadata, bytes, bytes]]
            if metadata.HasField("num_messages_in_batch"):
                count = metadata.num_messages_in_batch
                messages = _lone(blob, offset) if count == 1 else _batch(blob, offset, count)
            else:
                messages = ((metadata, blob[offset:], b""),)
            for single, payload, id_tail in messages:
                add_value(payload)
                add_id(message_id + id_tail)
                if key := single.partition_key:
                    add_key(proto_text(key).encode())
                else:
                    add_key(b"" if single.HasField("partition_key") else None)
                add_publish_time(publish_time)
                event_time = single.event_time
                add_event_time(event_time * 1000 if event_time > 0 else None)
                if properties := single.properties:
                    if id_tail and not single.IsInitialized():
                        # a batch's message (its id has a tail): parse_batch checks the
                        # required fields, a property's key and value among them, where
                        # read_stored_blob checks none of an entry's own metadata
                        raise _Refused
                    # a dict, as unpack_entry reads them: a repeated name keeps its last value
                    pairs = {proto_text(kv.key): proto_text(kv.value) for kv in properties}
                    property_keys += pairs.keys()
                    rows.property_values += pairs.values()
                add_offset(len(property_keys))
        except (_Refused, DecodeError, ValueError):
            _drop_rows(rows, before)
            return index
        if len(ids) >= limit:
            return index + 1
    return hi


def _common_fields(fields: list[bytes]) -> bool:
    """Whether a stream entry's fields are those the gateway writes for most entries, in
    its order (``append_entries.lua``): the blob, the broker time, the publish time and a
    batch's message count, all numbers (isdigit() implies that int() reads them, as
    ``StoredEntry.parse`` does)."""
    size = len(fields)
    return (
        4 <= size <= 8
        and fields[0] == BLOB
        and fields[2] == BROKER_TIME
        and fields[3].isdigit()
        and (
            size == 4
            or (
                fields[4] == PUBLISH_TIME
                and fields[5].isdigit()
                and (size == 6 or (size == 8 and fields[6] == NUM_MESSAGES and fields[7].isdigit()))
            )
        )
    )


def _other_fields(fields: list[bytes]) -> bool:
    """Whether a stream entry holds its blob first and otherwise only numbers (a key hash,
    a delivery time): no chunk, nothing ``StoredEntry.parse`` would refuse."""
    return (
        len(fields) >= 2
        and fields[0] == BLOB
        and _NUMBERS.issuperset(fields[2::2])
        and all(map(bytes.isdigit, fields[3::2]))
    )


def _batch(
    blob: bytes, offset: int, count: int
) -> list[tuple[pb.SingleMessageMetadata, bytes, bytes]]:
    """The messages of a client batch laid out from ``offset`` to the end of ``blob``,
    checked as ``parse_batch`` checks them (the caller checks the properties): each with its
    payload and the end of its id (batch index and batch size). A
    message a compaction dropped is left out, as ``unpack_entry`` does, but counts in the
    batch size of the others' ids."""
    if not 0 < count <= _INT32_MAX:
        raise _Refused
    size_tag = _SIZE_TAGS[count] if count < 128 else b"\x30" + uvarint(count)
    size = len(blob)
    out = []
    for batch_index in range(count):
        if size - offset < 4:
            raise _Refused
        metadata_size = _U32(blob, offset)[0]
        offset += 4
        if metadata_size > size - offset:
            raise _Refused
        single = _single_metadata(blob[offset : offset + metadata_size])
        offset += metadata_size
        payload_size = single.payload_size
        if payload_size <= 0 and (payload_size < 0 or not single.HasField("payload_size")):
            raise _Refused  # a required field
        if payload_size > size - offset:
            raise _Refused
        if not single.compacted_out:
            index_tag = (
                _INDEX_TAGS[batch_index] if batch_index < 128 else b"\x20" + uvarint(batch_index)
            )
            out.append((single, blob[offset : offset + payload_size], index_tag + size_tag))
        offset += payload_size
    if offset != size:
        raise _Refused
    return out


def _lone(blob: bytes, offset: int) -> tuple[tuple[pb.SingleMessageMetadata, bytes, bytes], ...]:
    """:func:`_batch` of a batch of one message (what the official client sends for a lone
    message with batching on), in fewer steps."""
    size = len(blob)
    if size - offset < 4:
        raise _Refused
    start = offset + 4 + _U32(blob, offset)[0]
    if start > size:
        raise _Refused
    single = _single_metadata(blob[offset + 4 : start])
    payload_size = single.payload_size
    if start + payload_size != size or (payload_size == 0 and not single.HasField("payload_size")):
        raise _Refused  # parse_batch's checks: the size adds up, a required field is set
    return () if single.compacted_out else ((single, blob[start:], _LONE_ID_TAIL),)


def _drop_rows(rows: RowBatcher, count: int) -> None:
    """Take back the rows added after the first ``count`` (an entry refused midway)."""
    for column in (rows.values[0], rows.keys, rows.message_ids, rows.publish_times):
        del column[count:]
    del rows.event_times[count:]
    del rows.property_offsets[count + 1 :]
    pairs = rows.property_offsets[-1]
    del rows.property_keys[pairs:]
    del rows.property_values[pairs:]
