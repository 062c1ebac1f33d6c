"""Topic-list hash (Pulsar ``TopicList.calculateHash``) and topic admin helpers, no Redis."""

from __future__ import annotations

from pulsar_gateway.adapters.pulsar_binary.discovery import topics_hash


def test_topics_hash_is_guava_crc32c_of_sorted_names() -> None:
    # CRC32C("123456789") = 0xE3069283; Guava prints a 32-bit HashCode's bytes
    # little-endian.
    assert topics_hash(["123456789"]) == "839206e3"
    assert topics_hash([]) == "00000000"


def test_topics_hash_ignores_order_and_separates_names() -> None:
    a = ["persistent://public/default/a", "persistent://public/default/b"]
    assert topics_hash(a) == topics_hash(list(reversed(a)))
    # The "," delimiter keeps ["ab", "c"] and ["a", "bc"] apart.
    assert topics_hash(["ab", "c"]) != topics_hash(["a", "bc"])
