"""Partition routing of a WebSocket producer on a partitioned topic, without I/O.

A binary client picks partitions itself; for the WebSocket API the gateway stands in for
the Java client that Pulsar's WebSocket service runs, so it routes the way that client's
routers do (``RoundRobinPartitionMessageRouterImpl``, ``SinglePartitionMessageRouterImpl``):

* a message with a key goes to ``hash(key) mod partitions``, the hash being the producer's
  ``hashingScheme``: ``JavaStringHash`` (``String.hashCode() & Integer.MAX_VALUE``, the
  Java client's default) or ``Murmur3_32Hash`` (Murmur3-32, seed 0, of the key's UTF-8
  bytes, ``& Integer.MAX_VALUE``);
* a message without a key goes, with ``SinglePartition`` (the WebSocket producer's
  default), to one partition picked at random when the producer is created, and with
  ``RoundRobinPartition`` to the next partition in turn from a random start (batching is
  off for WebSocket producers, so each message moves on).
"""

from __future__ import annotations

import random

import mmh3

from pulsar_gateway.adapters.websocket.params import HashingScheme, RoutingMode

__all__ = ["PartitionRouter", "java_string_hash", "murmur3_32_hash"]

_INT_MAX = 0x7FFFFFFF


def java_string_hash(key: str) -> int:
    """``JavaStringHash.makeHash``: Java's ``String.hashCode`` over UTF-16 code units
    (32-bit wrap-around), masked to a non-negative int."""
    h = 0
    data = key.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h & _INT_MAX


def murmur3_32_hash(key: str) -> int:
    """``Murmur3Hash32.makeHash``: Murmur3-32 (seed 0) of the UTF-8 bytes, masked."""
    return mmh3.hash(key.encode("utf-8", "surrogatepass"), 0, signed=False) & _INT_MAX


class PartitionRouter:
    """Chooses the partition of each message of one producer."""

    def __init__(
        self,
        partitions: int,
        mode: RoutingMode,
        scheme: HashingScheme,
        rng: random.Random | None = None,
    ) -> None:
        if partitions <= 0:
            raise ValueError("a router needs at least one partition")
        self.partitions = partitions
        self.mode = mode
        self._hash = (
            java_string_hash if scheme is HashingScheme.JAVA_STRING_HASH else murmur3_32_hash
        )
        pick = (rng or random.Random()).randrange(partitions)
        #: the SinglePartition choice, and the round-robin start
        self._next = pick

    def choose(self, key: str | None) -> int:
        """The partition index for a message with partition key ``key``."""
        if key is not None:
            return self._hash(key) % self.partitions
        if self.mode is RoutingMode.ROUND_ROBIN_PARTITION:
            index = self._next % self.partitions
            self._next += 1
            return index
        return self._next
