"""Which Redis Cluster slot each command of the storage lane goes to."""

from __future__ import annotations

import re
from importlib import resources

import pytest
from redis.crc import key_slot

from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.scripts import READ_ONLY, SCRIPTS
from pulsar_gateway.core.storage.slots import (
    CrossSlot,
    command_keys,
    command_slot,
    has_hash_tag,
    is_read_only,
)

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


# -- which commands write (replica acknowledgements wait for writes only) -------------------

#: Redis commands that change data, as the scripts spell them.
_WRITES = re.compile(
    r"redis\.p?call\(\s*'(XADD|XACK|XCLAIM|XAUTOCLAIM|XDEL|XTRIM|XGROUP|XSETID|HSET|HSETNX|"
    r"HDEL|HINCRBY|SADD|SREM|ZADD|ZREM|ZREMRANGEBYSCORE|ZINCRBY|DEL|UNLINK|SET|INCR|INCRBY|"
    r"PEXPIRE|EXPIRE|PUBLISH|SPUBLISH|RPUSH|LPUSH|LPOP|RPOP|LTRIM|RENAME|COPY)'",
    re.IGNORECASE,
)


def _lib_functions() -> dict[str, str]:
    lib = (resources.files("pulsar_gateway.core.storage.scripts") / "lua" / "lib.lua").read_text()
    parts = re.split(r"^local function (\w+)", lib, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _writes(body: str, functions: dict[str, str], seen: set[str]) -> bool:
    if _WRITES.search(body):
        return True
    for name, text in functions.items():
        if name not in seen and re.search(rf"\b{name}\(", body):
            seen.add(name)
            if _writes(text, functions, seen):
                return True
    return False


def test_the_read_only_scripts_write_nothing_and_the_others_are_writes() -> None:
    functions = _lib_functions()
    folder = resources.files("pulsar_gateway.core.storage.scripts") / "lua"
    for name, script in SCRIPTS.items():
        body = (folder / f"{name}.lua").read_text()
        assert script.read_only == (name in READ_ONLY)
        if script.read_only:
            assert not _writes(body, functions, set()), name
    assert set(SCRIPTS) >= READ_ONLY
    assert _writes((folder / "dispatch.lua").read_text(), functions, set())


@pytest.mark.parametrize(
    ("args", "read_only"),
    [
        (("XRANGE", "k", "-", "+"), True),
        (("hgetall", "k"), True),
        (("WAIT", 1, 100), True),
        (("XADD", "k", "*", "f", "v"), False),
        (("XACK", "k", "g", "1-1"), False),
        (("PUBLISH", "c", ""), False),
        (("SPUBLISH", "c", ""), False),
        (("HSET", "k", "f", "v"), False),
    ],
)
def test_read_only_commands(args: tuple[object, ...], read_only: bool) -> None:
    assert is_read_only(args) is read_only


def test_a_script_call_is_as_read_only_as_its_script() -> None:
    stats, dispatch = SCRIPTS["topic_stats"], SCRIPTS["dispatch"]
    assert is_read_only(("EVALSHA", stats.sha, 0), stats)
    assert not is_read_only(("EVALSHA", dispatch.sha, 0), dispatch)


@pytest.mark.parametrize(
    ("name", "tagged"),
    [
        ("pgw:{persistent://a/b/c}:notify", True),
        ("pgw:policies:changed", False),
        ("pgw:{}:x", False),
        ("pgw:{}x}", False),
        ("}{a}", True),
        ("{", False),
    ],
)
def test_hash_tags(name: str, tagged: bool) -> None:
    assert has_hash_tag(name) is tagged
