"""The stored-entry format: how one Pulsar entry is kept in a topic partition's Redis stream.

This module is the one owner of that format. The gateway writes it, the Lua scripts read it
(the field names below reach them through the generated prelude of
:mod:`pulsar_gateway.core.storage.scripts`), and anything reading a stream directly, such as
a Spark executor, decodes it here instead of re-deriving it.

Strategy (docs/architecture.md "Design decisions", one stream entry per Pulsar entry): a Pulsar
entry, a single message or a whole client batch, is one stream entry holding the producer's blob
untouched, plus the few facts dispatch needs without parsing the blob:

=========  ==============================================================================
field      contents
=========  ==============================================================================
``m``      the stored blob: magic, CRC32C, ``MessageMetadata`` and payload, exactly as the
           producer sent them (still compressed, still batched)
``t``      the broker timestamp: when Redis stored the entry (ms since the epoch, Redis's
           clock, never before its ledger's id; Pulsar's ``BrokerEntryMetadata``
           ``broker_timestamp``). Time-based operations (seek by time, TTL, retention)
           read it, since the stream id no longer says when an entry was stored. Entries
           written before ledgers existed have none: their id's first part is their time
``p``      the publish time: the producer's ``MessageMetadata.publish_time`` (ms, the
           producer's clock), which the adapter already read to append the entry. Seek and
           reset by time compare it (Pulsar's ``PersistentMessageFinder``), so the scripts
           find a position by publish time without parsing the blob. Absent when the
           adapter gave none, and on entries stored before it was kept: the broker
           timestamp stands in
``n``      messages in a client batch of more than one (``num_messages_in_batch``); absent
           when the entry is one message. Permits count messages, so dispatch needs it
``h``      the Key_Shared sticky-key hash, 0..65535 (:func:`.key_shared.sticky_key_hash`);
           absent when the entry has no key
``u``      ``"<chunk id>:<uuid>"`` of a chunk of a chunked message, so a redelivery naming
           the last chunk brings its message's earlier chunks along
``d``      deliver-at time (ms since the epoch) of a delayed message, after the topic's
           delayed-delivery policy
``a``      compacted view only: the ack set of a batch some of whose messages were compacted
           out, one ``"0"``/``"1"`` per message (``"1"`` = still delivered)
=========  ==============================================================================

The stream id ``L-E`` is the entry's message id ``(ledgerId=L, entryId=E)``: entry ``E`` of
ledger ``L`` (:mod:`.message_id`).

Ack sets. Pulsar carries a partly acknowledged batch as ``ack_set`` words: a Java
``BitSet``'s ``long[]``, bit ``i % 64`` of word ``i // 64`` set while message ``i`` is not
yet acknowledged (``CommandAck.MessageIdData.ack_set``, ``CommandMessage.ack_set``). The
scripts keep the same bits as a string, one ``"0"``/``"1"`` character per message, which Lua
can combine without 64-bit integers: :func:`encode_ack_set` and :func:`decode_ack_set`
convert between the two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pulsar_gateway.core.model.message_id import MessageId

__all__ = [
    "ACK_SET",
    "BLOB",
    "BROKER_TIME",
    "CHUNK",
    "DELIVER_AT",
    "FIELDS",
    "KEY_HASH",
    "NUM_MESSAGES",
    "PUBLISH_TIME",
    "Delivery",
    "EntryFormatError",
    "StoredEntry",
    "ack_set_of_kept",
    "decode_ack_set",
    "encode_ack_set",
]

#: Field of the stored blob.
BLOB: Final = b"m"
#: Field of the broker timestamp (ms): when Redis stored the entry.
BROKER_TIME: Final = b"t"
#: Field of the producer's publish time (ms, ``MessageMetadata.publish_time``).
PUBLISH_TIME: Final = b"p"
#: Field of the number of messages of a client batch (absent when 1).
NUM_MESSAGES: Final = b"n"
#: Field of the Key_Shared sticky-key hash (absent for an entry without a key).
KEY_HASH: Final = b"h"
#: Field of a chunk's ``"<chunk id>:<uuid>"``.
CHUNK: Final = b"u"
#: Field of a delayed message's deliver-at time, ms since the epoch.
DELIVER_AT: Final = b"d"
#: Field of a compacted-view entry's ack set (which of its batch's messages remain).
ACK_SET: Final = b"a"

#: Every field by the name the Lua prelude gives it.
FIELDS: Final[Mapping[str, bytes]] = {
    "BLOB": BLOB,
    "BROKER_TIME": BROKER_TIME,
    "PUBLISH_TIME": PUBLISH_TIME,
    "NUM_MESSAGES": NUM_MESSAGES,
    "KEY_HASH": KEY_HASH,
    "CHUNK": CHUNK,
    "DELIVER_AT": DELIVER_AT,
    "ACK_SET": ACK_SET,
}


class EntryFormatError(ValueError):
    """A stored entry that cannot be read (corrupt, encrypted, unknown codec)."""


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One entry as read back from a stream (``XRANGE`` or a script reply).

    ``num_messages`` is the entry's batch size (1 for a single message), ``is_batch``
    whether the producer sent a batch of more than one.
    """

    message_id: MessageId
    blob: bytes
    num_messages: int = 1
    is_batch: bool = False
    key_hash: int | None = None
    chunk: bytes | None = None
    deliver_at: int | None = None
    ack_set: bytes | None = None
    broker_time: int | None = None
    publish_time: int | None = None

    @classmethod
    def parse(
        cls, stream_id: bytes | str, fields: Sequence[bytes], partition: int = -1
    ) -> StoredEntry:
        """Read an entry from its stream id and flat ``[name, value, ...]`` field list.

        Raises:
            EntryFormatError: a field holds a value of the wrong form.
        """
        blob = b""
        count: bytes | None = None
        key_hash = deliver_at = broker_time = publish_time = None
        chunk = ack_set = None
        try:
            for i in range(0, len(fields) - 1, 2):
                name, value = fields[i], fields[i + 1]
                if name == BLOB:
                    blob = value
                elif name == NUM_MESSAGES:
                    count = value
                elif name == KEY_HASH:
                    key_hash = int(value)
                elif name == CHUNK:
                    chunk = value
                elif name == DELIVER_AT:
                    deliver_at = int(value)
                elif name == ACK_SET:
                    ack_set = value
                elif name == BROKER_TIME:
                    broker_time = int(value)
                elif name == PUBLISH_TIME:
                    publish_time = int(value)
            num = int(count) if count is not None else 1
        except ValueError as exc:
            raise EntryFormatError(f"entry {stream_id!r}: {exc}") from None
        return cls(
            MessageId.from_stream_id(stream_id, partition),
            blob,
            num,
            count is not None,
            key_hash,
            chunk,
            deliver_at,
            ack_set,
            broker_time,
            publish_time,
        )


@dataclass(slots=True)
class Delivery:
    """One stored entry handed to a consumer.

    ``redelivery_count`` is Pulsar's ``CommandMessage.redelivery_count``. ``ack_set`` is set
    for a partly acknowledged batch: the wire's words (:func:`decode_ack_set`), bit i set =
    message i still unacknowledged, and ``num_messages`` then counts only those.
    """

    stream_id: bytes
    blob: bytes
    num_messages: int
    redelivery_count: int
    ack_set: tuple[int, ...] = ()


def encode_ack_set(words: Sequence[int]) -> str:
    """Pulsar ``ack_set`` words -> the scripts' ``"0"``/``"1"`` string (trailing zeros
    dropped; ``""`` when no bit is set)."""
    bits = "".join("1" if (word >> bit) & 1 else "0" for word in words for bit in range(64))
    return bits.rstrip("0")


def decode_ack_set(bits: str | bytes) -> tuple[int, ...]:
    """The scripts' ``"0"``/``"1"`` string -> ``ack_set`` words, signed 64-bit as the wire
    carries them (the inverse of :func:`encode_ack_set`)."""
    if isinstance(bits, bytes):
        bits = bits.decode()
    words = []
    for start in range(0, len(bits), 64):
        word = 0
        for i, char in enumerate(bits[start : start + 64]):
            if char == "1":
                word |= 1 << i
        words.append(word - (1 << 64) if word >> 63 else word)
    return tuple(words)


def ack_set_of_kept(keep: Sequence[bool]) -> bytes:
    """The ``a`` field of a partly compacted batch: ``"1"`` per message kept, ``"0"`` per
    message compacted out (the official client skips the latter)."""
    return b"".join(b"1" if kept else b"0" for kept in keep)
