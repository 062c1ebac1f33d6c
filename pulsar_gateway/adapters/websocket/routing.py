"""Partition routing of a WebSocket producer on a partitioned topic, without I/O.

A binary client picks partitions itself; for the WebSocket API the gateway stands in for
the Java client that Pulsar's WebSocket service runs, so it routes the way that client's
routers do (``RoundRobinPartitionMessageRouterImpl``, ``SinglePartitionMessageRouterImpl``):

* a message with a key goes to ``hash(key) mod partitions``, the hash being the producer's
  ``hashingScheme``: ``JavaStringHash`` (``String.hashCode() & Integer.MAX_VALUE``, the
  Java client's default) or ``Murmur3_32Hash`` (Murmur3-32, seed 0, of the key's UTF-8
  bytes, ``& Integer.MAX_VALUE``), both the core's (``core/model/key_hash.py``);
* a message without a key goes, with ``SinglePartition`` (the WebSocket producer's
  default), to one partition picked at random when the producer is created, and with
  ``RoundRobinPartition`` to the next partition in turn from a random start (batching is
  off for WebSocket producers, so each message moves on).
"""

from __future__ import annotations

import random

from pulsar_gateway.adapters.websocket.params import HashingScheme, RoutingMode
from pulsar_gateway.core import java_string_hash, murmur3_32_hash

__all__ = ["PartitionRouter"]


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
