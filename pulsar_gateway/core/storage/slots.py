"""Which Redis Cluster slot a command goes to, and whether it writes (sans-I/O).

A Redis Cluster serves each key from the master owning its hash slot (CRC16 of the key, or
of its ``{hash tag}``, mod 16384; redis-py's ``key_slot``). A command or script whose keys
span two slots is refused (``CROSSSLOT``), so every command the gateway sends must name keys
of one slot; the key schema gives every key of a topic partition one hash tag for that
reason (:mod:`.keys`). This module reads the keys out of the commands the storage lane
sends, so the lane can route a command to its master and the tests can check that no
command spans slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from redis.crc import key_slot

__all__ = [
    "CrossSlot",
    "command_keys",
    "command_slot",
    "first_key",
    "has_hash_tag",
    "is_read_only",
]

#: Commands whose arguments after the name are all keys.
_ALL_KEYS: Final = frozenset({b"DEL", b"EXISTS", b"UNLINK", b"TOUCH"})
#: Commands whose keys follow ``STREAMS`` (as many keys as ids after them).
_STREAM_READS: Final = frozenset({b"XREAD", b"XREADGROUP"})
#: Commands that name no key: any node answers them (``PUBLISH`` reaches every node's
#: subscribers on a cluster, ``TIME`` and ``PING`` are node-local facts).
_NO_KEY: Final = frozenset({b"TIME", b"PING", b"PUBLISH", b"SCAN", b"INFO", b"WAIT"})
#: Script calls: ``EVALSHA sha numkeys key... arg...``.
_SCRIPTS: Final = frozenset({b"EVALSHA", b"EVAL", b"EVALSHA_RO", b"EVAL_RO", b"FCALL"})


#: Commands the gateway sends that change nothing (Redis's ``readonly`` command flag).
_READS: Final = frozenset(
    {
        b"EXISTS", b"GET", b"HEXISTS", b"HGET", b"HGETALL", b"HKEYS", b"HLEN", b"HMGET",
        b"HVALS", b"INFO", b"LINDEX", b"LLEN", b"LRANGE", b"MGET", b"PING", b"PTTL",
        b"SCARD", b"SISMEMBER", b"SMEMBERS", b"TIME", b"TYPE", b"XINFO", b"XLEN",
        b"XPENDING", b"XRANGE", b"XREVRANGE", b"ZCARD", b"ZCOUNT", b"ZRANGE",
        b"ZRANGEBYSCORE", b"ZSCORE", b"WAIT", b"ASKING",
    }
)  # fmt: skip


class CrossSlot(ValueError):
    """A command names keys of more than one slot."""


def _bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return str(value).encode()


def command_keys(args: Sequence[Any]) -> list[bytes]:
    """The keys a command names, for the commands the gateway sends."""
    name = _bytes(args[0]).upper()
    if name in _NO_KEY:
        return []
    if name in _SCRIPTS:
        count = int(args[2])
        return [_bytes(key) for key in args[3 : 3 + count]]
    if name in _ALL_KEYS:
        return [_bytes(key) for key in args[1:]]
    if name in _STREAM_READS:
        return [_bytes(key) for key in _stream_read_keys(args)]
    # every other command the gateway sends (X*, H*, S*, Z*, L*, GET, SET, PEXPIRE, TYPE,
    # SPUBLISH...) names one key, first
    return [_bytes(args[1])] if len(args) > 1 else []


def first_key(args: Sequence[Any]) -> Any:
    """The first key a command names, None when it names none: what a Redis Cluster client
    routes by (the tests check, with :func:`command_slot`, that the others share its slot;
    Redis refuses a command whose keys do not, with ``CROSSSLOT``)."""
    name = args[0]
    if name == "EVALSHA":  # the hot path: the gateway's script calls
        return args[3] if int(args[2]) > 0 else None
    upper = _bytes(name).upper()
    if upper in _NO_KEY:
        return None
    if upper in _SCRIPTS:
        return args[3] if int(args[2]) > 0 else None
    if upper in _STREAM_READS:
        keys = _stream_read_keys(args)
        return keys[0] if keys else None
    return args[1] if len(args) > 1 else None


def _stream_read_keys(args: Sequence[Any]) -> Sequence[Any]:
    for i in range(1, len(args)):
        if _bytes(args[i]).upper() == b"STREAMS":
            rest = args[i + 1 :]
            return rest[: len(rest) // 2]
    return []


def command_slot(args: Sequence[Any]) -> int | None:
    """The slot of the command's keys; None when it names none (any master may run it).

    Raises:
        CrossSlot: its keys are in different slots.
    """
    keys = command_keys(args)
    if not keys:
        return None
    slots = {key_slot(key) for key in keys}
    if len(slots) > 1:
        shown = ", ".join(k.decode(errors="replace") for k in keys)
        raise CrossSlot(f"{_bytes(args[0]).decode()} names keys of {len(slots)} slots: {shown}")
    return slots.pop()


def is_read_only(args: Sequence[Any], script: Any = None) -> bool:
    """Whether the command changes nothing: a read command, or a script marked read-only
    (``Script.read_only``); ``PUBLISH`` counts as a write (a hint must follow the data)."""
    if script is not None:
        return bool(script.read_only)
    return _bytes(args[0]).upper() in _READS


def has_hash_tag(name: str) -> bool:
    """Whether a key or channel name carries a ``{hash tag}`` (Redis's rule: the first
    ``{`` followed, later, by a ``}`` with something between)."""
    start = name.find("{")
    return start >= 0 and name.find("}", start + 1) > start + 1
