"""Key_Shared subscriptions: sticky-key hashing and consumer hash ranges.

Every message key maps to a hash in ``0..65535``; each consumer of a Key_Shared
subscription owns ranges of that space, so a key always goes to the same consumer.
Pulsar's hash is Murmur3-32 of the *sticky key* (the ordering key if the message has one,
else its partition key), masked to 31 bits (``Murmur3_32Hash.makeHash``), modulo the
range size 65536 (``StickyKeyConsumerSelector.DEFAULT_RANGE_SIZE``); we compute the same
value once per entry when it is appended and store it in the entry (field ``h``).

The assignment itself lives in Redis (``ks-ranges`` hash, see
:mod:`pulsar_gateway.core.storage.keys`) and is changed only by the subscription scripts in
``lua/lib.lua``, so consumers on different
gateways share one assignment:

* AUTO_SPLIT: the first consumer owns the whole space; a new consumer takes the lower half
  of the largest range; a leaving consumer's range goes to its upper neighbour (Pulsar's
  ``HashRangeAutoSplitStickyKeyConsumerSelector``).
* STICKY: each consumer brings its own ranges (``KeySharedMeta.hashRanges``); overlapping
  or malformed ranges are refused with ``ConsumerAssignError`` (Pulsar's
  ``HashRangeExclusiveStickyKeyConsumerSelector``). Hashes nobody covers wait.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import mmh3

__all__ = [
    "HASH_RANGE_SIZE",
    "KeySharedMode",
    "KeySharedPolicy",
    "parse_ranges",
    "sticky_key_hash",
]

#: Size of the hash space (Pulsar ``DEFAULT_RANGE_SIZE`` = 2^16).
HASH_RANGE_SIZE = 65536


class KeySharedMode(enum.IntEnum):
    """``KeySharedMode`` values of ``CommandSubscribe.keySharedMeta``."""

    AUTO_SPLIT = 0
    STICKY = 1


@dataclass(frozen=True, slots=True)
class KeySharedPolicy:
    """A Key_Shared consumer's request: its mode, for STICKY its inclusive ranges, and
    whether it accepts out-of-order delivery (``allowOutOfOrderDelivery``: no waiting for
    earlier messages of keys it takes over to be acked)."""

    mode: KeySharedMode = KeySharedMode.AUTO_SPLIT
    ranges: tuple[tuple[int, int], ...] = ()
    allow_out_of_order: bool = False

    def ranges_text(self) -> str:
        """The ranges as the Lua scripts store them: ``"start-end,start-end"``.

        Out-of-range values are kept for the script to refuse with Pulsar's error; a
        negative bound, which this form cannot spell, becomes the invalid range ``1-0``.
        """
        return ",".join(
            f"{start}-{end}" if start >= 0 and end >= 0 else "1-0" for start, end in self.ranges
        )


def sticky_key_hash(key: bytes) -> int:
    """The hash of a sticky key in ``0..65535``, as Pulsar computes it."""
    return (mmh3.hash(key, 0, signed=False) & 0x7FFFFFFF) % HASH_RANGE_SIZE


def parse_ranges(text: str | bytes) -> list[tuple[int, int]]:
    """``"0-99,200-299"`` -> ``[(0, 99), (200, 299)]``."""
    if isinstance(text, bytes):
        text = text.decode()
    out = []
    for part in text.split(","):
        if part:
            start, _, end = part.partition("-")
            out.append((int(start), int(end)))
    return out
