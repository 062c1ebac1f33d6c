"""Where a query stands in each topic partition: positions and the offsets JSON (sans-I/O).

A topic partition is one Redis stream whose entry ids are Pulsar entry ids (``L-E`` is
``(ledgerId, entryId)``, ``pulsar_gateway.core.model.message_id``), totally ordered. A
query's offset is, per topic partition, the :class:`Position` of the last message it has
consumed; a micro-batch reads the entries after its start position up to and including its
end position. Both ends are fixed before any executor reads, and a stream only grows at its
end, so replaying a micro-batch from the checkpoint reads exactly the same entries: this is
what makes reads exactly-once.

In the checkpoint (Spark stores ``json.dumps`` of the dict verbatim in ``offsets/N``) an
offset is ``{"persistent://t/ns/topic-partition-0": "1700000000000-3@42", ...}``: the stream id
of the last consumed entry, ``"0-0"`` for none; ``"<id>:<i>"`` when only messages 0..i of a
batch entry were consumed (a user's starting message id can point inside a batch); and after
``@``, when known, how many entries the stream had received up to that one (Redis's
``entries-added``), which is what tells exactly whether retention removed entries the query
has not read (:meth:`pyspark_pulsar.storage.TopicStore.lost_after`).

User-given offsets (``startingOffsets``/``endingOffsets``) take the reference connector's
JSON form: topic name -> the message id's serialized ``MessageIdData`` as an array of
(signed) bytes, what Java's ``MessageId.toByteArray()`` and Python's ``serialize()`` give;
the strings ``"earliest"``/``"latest"`` are accepted per topic too. As there, a starting
message id is inclusive (reading starts with it) and an ending message id is inclusive of its
whole entry (reading stops after the last message of its batch).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from pulsar_gateway.core import MessageId, parse_stream_id
from pulsar_gateway.entry_codec import deserialize_message_id

__all__ = [
    "BEGINNING",
    "Offsets",
    "Position",
    "decode_id_array",
    "position_before",
]

_MAX_SEQ: Final = 2**64 - 1


@dataclass(frozen=True, slots=True)
class Position:
    """Consumed through entry ``(ms, seq)``; through only its messages ``0..batch_index``
    when ``batch_index >= 0``, the whole entry when -1.

    ``added`` is how many entries the stream had received up to and including this one
    (-1: not known). It takes no part in comparisons: it is a fact about the entry, not a
    place in the stream.
    """

    ms: int
    seq: int
    batch_index: int = -1
    added: int = field(default=-1, compare=False)

    @classmethod
    def parse(cls, text: str) -> Position:
        """Read ``"ms-seq"``, ``"ms-seq:i"``, either followed by ``"@added"``.

        Raises:
            ValueError: not a position.
        """
        place, _, added = text.partition("@")
        entry, _, index = place.partition(":")
        if "-" not in entry:
            raise ValueError(f"not a stream position: {text!r}")
        ms, seq = parse_stream_id(entry)
        position = cls(ms, seq, int(index) if index else -1, int(added) if added else -1)
        if (
            position.ms < 0
            or not 0 <= position.seq <= _MAX_SEQ
            or position.batch_index < -1
            or position.added < -1
        ):
            raise ValueError(f"not a stream position: {text!r}")
        return position

    def __str__(self) -> str:
        text = f"{self.ms}-{self.seq}"
        if self.batch_index >= 0:
            text += f":{self.batch_index}"
        return text if self.added < 0 else f"{text}@{self.added}"

    @property
    def stream_id(self) -> str:
        return f"{self.ms}-{self.seq}"

    @property
    def whole(self) -> bool:
        """Whether the entry at this position is consumed entirely."""
        return self.batch_index < 0

    def entry_key(self) -> tuple[int, int]:
        return (self.ms, self.seq)

    def range_start(self) -> str:
        """``XRANGE``'s start for what comes after this position: exclusive of a whole
        entry, inclusive of a partly consumed one."""
        return f"({self.stream_id}" if self.whole else self.stream_id

    def _order(self) -> tuple[int, int, int]:
        # a whole entry is consumed further than any of its messages
        return (self.ms, self.seq, self.batch_index if self.batch_index >= 0 else _MAX_SEQ)

    def precedes(self, other: Position) -> bool:
        """Whether there is anything to read after ``self`` up to ``other``."""
        return self._order() < other._order()


#: Nothing consumed: stream ids start above ``0-0``.
BEGINNING: Final = Position(0, 0)


def position_before(message_id: MessageId) -> Position:
    """The position from which reading includes ``message_id`` (an inclusive start)."""
    if message_id.ledger_id < 0:
        return BEGINNING
    if message_id.batch_index > 0:
        return Position(message_id.ledger_id, message_id.entry_id, message_id.batch_index - 1)
    if message_id.entry_id > 0:
        return Position(message_id.ledger_id, message_id.entry_id - 1)
    if message_id.ledger_id > 0:
        return Position(message_id.ledger_id - 1, _MAX_SEQ)
    return BEGINNING


def decode_id_array(value: object, where: str) -> MessageId:
    """A message id in the reference connector's offsets JSON: the serialized
    ``MessageIdData`` as an array of bytes (Java's are signed, -128..127).

    Raises:
        ValueError: naming ``where`` (option and topic).
    """
    if not isinstance(value, list) or not all(
        isinstance(b, int) and not isinstance(b, bool) and -128 <= b <= 255 for b in value
    ):
        raise ValueError(
            f'{where}: expected "earliest", "latest" or a message id as an array of bytes '
            f"(MessageId.toByteArray()), got {json.dumps(value)[:100]}"
        )
    try:
        return deserialize_message_id(bytes(b & 0xFF for b in value))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Offsets:
    """A query's offset: topic partition -> position (what Spark checkpoints)."""

    positions: Mapping[str, Position]

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> Offsets:
        """Read a checkpointed offset dict.

        Raises:
            ValueError: a value that is not a position (a checkpoint of another source).
        """
        positions = {}
        for topic, text in raw.items():
            if not isinstance(text, str):
                raise ValueError(f"offset of {topic!r} is not a stream position: {text!r}")
            positions[topic] = Position.parse(text)
        return cls(positions)

    def to_json(self) -> dict[str, str]:
        return {topic: str(position) for topic, position in sorted(self.positions.items())}

    def get(self, topic: str) -> Position:
        """A topic partition's position; a partition the offset does not name yet was
        discovered after it, so it is read from its beginning (as the reference connector
        reads new partitions)."""
        return self.positions.get(topic, BEGINNING)
