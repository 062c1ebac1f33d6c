"""Message ids and their mapping onto Redis stream ids.

Strategy (docs/architecture.md "Design decisions", message ids map to stream ids): the stream
entry ``L-E`` is the Pulsar entry ``(ledgerId=L, entryId=E)``: entry ``E`` (0, 1, 2, ...) of
ledger ``L`` (:mod:`.ledger`). A client batch is one entry, so the messages inside it are
``(L, E, partition, batch_index)``. Ordering of ids is the ordering of the stream, which is what
Pulsar's ``(ledgerId, entryId, batchIndex)`` comparison expects. An id says nothing of time:
positions by time are resolved in Redis from the entries' stored publish times
(:func:`time_position`).

Pulsar sends ``-1`` in unsigned 64-bit fields as ``2**64 - 1`` (``MessageId.earliest`` is
``(-1, -1)``); :func:`signed64` undoes that before any arithmetic (docs/binary_protocol.md
"Message ids").
"""

from __future__ import annotations

from typing import NamedTuple

from pulsar_gateway.core.model.subscription_type import InitialPosition

__all__ = [
    "MessageId",
    "parse_stream_id",
    "previous_stream_id",
    "signed64",
    "start_position",
    "stream_id",
    "time_position",
]

_U64 = 1 << 64
_I63 = (1 << 63) - 1
#: The largest stream sequence number; ``ms-MAX`` sorts just before ``(ms+1)-0``.
_MAX_SEQ = _U64 - 1


def signed64(value: int) -> int:
    """Read a uint64 wire value as the int64 the client meant (``2**64-1`` is ``-1``)."""
    return value - _U64 if value > _I63 else value


def stream_id(ledger_id: int, entry_id: int) -> bytes:
    """The Redis stream id of entry ``(ledger_id, entry_id)``."""
    return b"%d-%d" % (ledger_id, entry_id)


def previous_stream_id(ledger_id: int, entry_id: int) -> bytes | None:
    """The stream id just before entry ``(ledger_id, entry_id)`` (the last possible entry
    of the ledger before when ``entry_id`` is 0 or -1, a client's "before the first entry
    of ledger L"); None before the first ledger."""
    if entry_id > 0:
        return stream_id(ledger_id, entry_id - 1)
    if ledger_id > 0:
        return stream_id(ledger_id - 1, _MAX_SEQ)
    return None


def parse_stream_id(sid: bytes | str) -> tuple[int, int]:
    """``(ledgerId, entryId)`` of stream id ``sid`` (``b"1700000000000-5"``; a bare
    ``b"1700000000000"`` is entry 0, as Redis reads an id without its sequence part).

    Raises:
        ValueError: ``sid`` is not a stream id.
    """
    if isinstance(sid, str):
        sid = sid.encode()
    ms, _, seq = sid.partition(b"-")
    return int(ms), int(seq or 0)


class MessageId(NamedTuple):
    """A Pulsar message id as the core sees it (signed fields, -1 = absent).

    A named tuple: immutable, hashable, ordered field by field as Pulsar compares ids
    (``(ledgerId, entryId, partition, batchIndex)``), and made in a third of a frozen
    dataclass's time (several per delivered message on the one-message surfaces).
    """

    ledger_id: int
    entry_id: int
    partition: int = -1
    batch_index: int = -1

    @classmethod
    def from_stream_id(
        cls, sid: bytes | str, partition: int = -1, batch_index: int = -1
    ) -> MessageId:
        """Build the id of stream entry ``sid`` (``b"1700000000000-5"``)."""
        return _new(cls, (*parse_stream_id(sid), partition, batch_index))

    @property
    def stream_id(self) -> bytes:
        return stream_id(self.ledger_id, self.entry_id)

    @property
    def is_earliest(self) -> bool:
        return self.ledger_id == -1 and self.entry_id == -1

    @property
    def is_latest(self) -> bool:
        return self.ledger_id == _I63 and self.entry_id == _I63

    def __str__(self) -> str:
        # Same form as the Python client's str(MessageId).
        return f"({self.ledger_id},{self.entry_id},{self.partition},{self.batch_index})"


_new = tuple.__new__


def start_position(initial: InitialPosition, start: MessageId | None) -> bytes:
    """The consumer-group id to create (or move) a subscription at.

    A group's id is its last-delivered entry, so delivery starts *after* it: ``$`` for
    Latest, ``0`` for Earliest, and for a reader's start message id ``(L, E)`` the id just
    before it, because a reader starts at its start id inclusive (the client drops what
    precedes it itself: docs/binary_protocol.md "Consuming, acknowledging, seeking").
    """
    if start is None:
        return b"$" if initial is InitialPosition.LATEST else b"0"
    if start.is_earliest or start.ledger_id < 0:
        return b"0"
    if start.is_latest:
        return b"$"
    if start.entry_id > 0:
        return b"%d-%d" % (start.ledger_id, start.entry_id - 1)
    if start.ledger_id > 0:
        return b"%d-%d" % (start.ledger_id - 1, _MAX_SEQ)
    return b"0"


def time_position(timestamp: int) -> bytes:
    """The group position "after the newest entry published before ``timestamp``" (ms),
    which the seek and reset scripts resolve against the entries' publish times (lib.lua
    ``first_published_at``): Pulsar's ``PersistentMessageFinder`` finds that entry
    (``MessageImpl.isEntryPublishedEarlierThan``, publish time < timestamp) and
    ``PersistentSubscription.resetCursor(timestamp)`` restarts at the next one, so delivery
    starts at the first message published at or after ``timestamp``."""
    return b"@%d" % max(timestamp, 0)
