"""The hashes of a message key that the Java client routes partitions by (its producer's
``hashingScheme``), so every surface that picks a partition for a key (the WebSocket
producer, the Spark writer) picks the one a Java producer would:

* ``JavaStringHash`` (the default): ``String.hashCode() & Integer.MAX_VALUE``;
* ``Murmur3_32Hash``: Murmur3-32, seed 0, of the key's UTF-8 bytes, ``& Integer.MAX_VALUE``.
"""

from __future__ import annotations

import mmh3

__all__ = ["java_string_hash", "murmur3_32_hash"]

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
