"""Which Redis Cluster slot each command of the storage lane goes to."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.slots import CrossSlot, command_keys, command_slot

KEYS = KeySchema("pgw")
TOPIC = KEYS.topic("persistent://public/default/orders-partition-1")
OTHER = KEYS.topic("persistent://public/default/invoices")


def test_every_key_of_a_topic_partition_is_in_one_slot() -> None:
    sub = TOPIC.subscription("sub")
    keys = [*sub.all, TOPIC.producers, TOPIC.last_sequence_ids, TOPIC.compaction]
    assert len({key_slot(k.encode()) for k in keys}) == 1
    # Redis hashes only the tag: the slot is the tag's
    assert key_slot(TOPIC.stream.encode()) == key_slot(
        b"persistent://public/default/orders-partition-1"
    )


def test_a_script_call_goes_to_its_keys_slot() -> None:
    sub = TOPIC.subscription("sub")
    args = ("EVALSHA", "0" * 40, len(sub.all), *sub.all, "ARG-{other}", 5)
    assert command_keys(args) == [k.encode() for k in sub.all]
    assert command_slot(args) == key_slot(TOPIC.stream.encode())


def test_a_script_with_keys_of_two_topics_is_refused() -> None:
    args = ("EVALSHA", "0" * 40, 2, TOPIC.stream, OTHER.stream)
    with pytest.raises(CrossSlot, match="EVALSHA names keys of 2 slots"):
        command_slot(args)


@pytest.mark.parametrize(
    ("args", "keys"),
    [
        (("XADD", TOPIC.stream, "*", "m", b"x"), [TOPIC.stream]),
        (("HGET", "pgw:tenants", "public"), ["pgw:tenants"]),
        (("DEL", TOPIC.stream, TOPIC.producers), [TOPIC.stream, TOPIC.producers]),
        (("TIME",), []),
        (("PUBLISH", TOPIC.notify_channel, b""), []),
        (("SCAN", 0, "MATCH", "pgw:ns:*:topics"), []),
        (("EVALSHA", "0" * 40, 0, "arg"), []),
    ],
)
def test_command_keys(args: tuple[object, ...], keys: list[str]) -> None:
    assert command_keys(args) == [k.encode() for k in keys]


def test_keyless_commands_have_no_slot() -> None:
    assert command_slot(("TIME",)) is None
    assert command_slot((b"PUBLISH", b"chan", b"")) is None
