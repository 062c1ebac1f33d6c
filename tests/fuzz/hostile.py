"""Hostile values, messages and bytes, from a seeded ``random.Random``; no I/O.

:class:`Hostile` knows PulsarApi.proto only through its descriptors: :meth:`Hostile.fill`
sets the fields of any message with values at and beyond the edges of their types (and
leaves required fields out now and then), :meth:`Hostile.raw_fields` writes protobuf bytes the
Python encoder refuses to (unknown enum numbers, strings that are not UTF-8, wrong wire
types, unknown field numbers, overlong varints), and :meth:`Hostile.mutate` damages bytes
the way a broken peer does (bit flips, truncation, insertion, duplicated or swapped
slices, lying length prefixes).
"""

from __future__ import annotations

import random
import struct
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

F = FieldDescriptor

_INT_EDGES = {
    F.TYPE_INT32: (0, 1, -1, 2**31 - 1, -(2**31), 2**31 - 2, 1000, -1000),
    F.TYPE_SINT32: (0, 1, -1, 2**31 - 1, -(2**31)),
    F.TYPE_SFIXED32: (0, 1, -1, 2**31 - 1, -(2**31)),
    F.TYPE_UINT32: (0, 1, 2**32 - 1, 2**31, 2**31 - 1, 1000),
    F.TYPE_FIXED32: (0, 1, 2**32 - 1, 2**31),
    F.TYPE_INT64: (0, 1, -1, 2**63 - 1, -(2**63), 2**31, 2**53 + 1, -(2**53)),
    F.TYPE_SINT64: (0, 1, -1, 2**63 - 1, -(2**63)),
    F.TYPE_SFIXED64: (0, 1, -1, 2**63 - 1, -(2**63)),
    F.TYPE_UINT64: (0, 1, 2**64 - 1, 2**63, 2**63 - 1, 2**32, 2**53 + 1, 1000),
    F.TYPE_FIXED64: (0, 1, 2**64 - 1, 2**63),
}
_INT_BITS = {
    F.TYPE_INT32: (32, True),
    F.TYPE_SINT32: (32, True),
    F.TYPE_SFIXED32: (32, True),
    F.TYPE_UINT32: (32, False),
    F.TYPE_FIXED32: (32, False),
    F.TYPE_INT64: (64, True),
    F.TYPE_SINT64: (64, True),
    F.TYPE_SFIXED64: (64, True),
    F.TYPE_UINT64: (64, False),
    F.TYPE_FIXED64: (64, False),
}
_DOUBLES = (0.0, -0.0, 1e308, -1e308, float("inf"), float("-inf"), float("nan"), 5e-324, 0.5)

#: Strings a broker must survive: empty, control characters, separators of Pulsar names,
#: percent-encoding, non-ASCII, lone surrogates are impossible in UTF-8 so they come from
#: :meth:`Hostile.raw_fields`.
_STRINGS = (
    "",
    " ",
    "\x00",
    "a\x00b",
    "\r\n",
    "persistent://",
    "persistent://public/default/",
    "persistent://public/default/t-partition--1",
    "persistent://public/default/t-partition-99999999999999999999",
    "non-persistent://public/default/fuzz",
    "persistent://public/missing/fuzz",
    "persistent://nobody/default/fuzz",
    "public/default/fuzz",
    "fuzz",
    "//",
    "a/b/c/d/e/f",
    "../../etc/passwd",
    "%2F%00%ZZ",
    "{}",
    "*",
    "\u00e9\u4e2d\U0001f600",
    "\u202e\ufeff",
    "-1",
    "18446744073709551616",
    "token:",
    "Bearer ",
)


#: Characters of many scripts and controls, and random bytes: long values are slices of
#: these (cheap), short ones are drawn afresh.
_MIXED = "".join(chr(c) for c in random.Random(0).choices(range(1, 0x2FF), k=4096))
_NOISE = random.Random(0).randbytes(1 << 18)


def noise(rng: random.Random, size: int) -> bytes:
    """``size`` random-looking bytes (a slice of a fixed buffer), size < 256 KiB."""
    start = rng.randrange((1 << 18) - size)
    return _NOISE[start : start + size]


class Hostile:
    """Hostile values drawn from ``rng``. ``strings`` adds names worth hitting (topics and
    subscriptions that exist) to the built-in list."""

    def __init__(self, rng: random.Random, strings: tuple[str, ...] = ()) -> None:
        self.rng = rng
        self.strings = _STRINGS + strings

    # -- scalars ---------------------------------------------------------------------------

    def integer(self, field_type: int) -> int:
        r = self.rng
        bits, signed = _INT_BITS[field_type]
        roll = r.random()
        if roll < 0.45:
            return r.choice(_INT_EDGES[field_type])
        if roll < 0.8:
            return r.randrange(0, 64)
        low = -(2 ** (bits - 1)) if signed else 0
        high = 2 ** (bits - 1) - 1 if signed else 2**bits - 1
        return r.randint(low, high)

    def text(self, long_ok: bool = True) -> str:
        """A hostile string; ``long_ok`` False leaves out the 64 KiB and 300 KB ones (for
        elements of repeated fields and nested messages, whose counts multiply)."""
        r = self.rng
        roll = r.random()
        if roll < 0.6:
            return r.choice(self.strings)
        if roll < 0.8:
            start = r.randrange(len(_MIXED) - 40)
            return _MIXED[start : start + r.randrange(1, 40)]
        if roll < 0.95 or not long_ok:
            return "x" * r.choice((255, 256, 1024, 4096))
        return "y" * r.choice((65_536, 300_000))

    def blob(self) -> bytes:
        r = self.rng
        roll = r.random()
        if roll < 0.2:
            return b""
        if roll < 0.9:
            return r.randbytes(r.randrange(1, 64))
        return noise(r, r.choice((1024, 16_384)))

    def scalar(self, field: FieldDescriptor, long_ok: bool = True) -> Any:
        t = field.type
        if t in _INT_BITS:
            return self.integer(t)
        if t == F.TYPE_BOOL:
            return self.rng.random() < 0.5
        if t == F.TYPE_STRING:
            return self.text(long_ok)
        if t == F.TYPE_BYTES:
            return self.blob() if long_ok else self.rng.randbytes(self.rng.randrange(0, 64))
        if t == F.TYPE_ENUM:
            return self.rng.choice(field.enum_type.values).number
        if t in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
            value = self.rng.choice(_DOUBLES)
            return min(max(value, -3e38), 3e38) if t == F.TYPE_FLOAT else value
        raise AssertionError(f"unhandled field type {t}")

    # -- messages --------------------------------------------------------------------------

    def fill(self, message: Message, depth: int = 0, density: float = 0.5) -> Message:
        """Set fields of ``message`` (in place, also returned): each required field most of
        the time, each optional one with probability ``density``, repeated ones with 0 to
        a few elements (sometimes many), nested messages recursively up to a depth."""
        r = self.rng
        for field in message.DESCRIPTOR.fields:
            wanted = 0.97 if field.is_required else density
            if r.random() >= wanted:
                continue
            if field.type == F.TYPE_MESSAGE:
                if depth >= 3:
                    continue
                if field.is_repeated:
                    # many elements at the top only: counts multiply down the levels
                    count = self._count() if depth == 0 else self.rng.randrange(0, 4)
                    container = getattr(message, field.name)
                    for _ in range(count):
                        self.fill(container.add(), depth + 1, density)
                else:
                    self.fill(getattr(message, field.name), depth + 1, density)
                    getattr(message, field.name).SetInParent()
            elif field.is_repeated:
                count = self._count() if depth == 0 else self.rng.randrange(0, 4)
                values = (self.scalar(field, long_ok=False) for _ in range(count))
                getattr(message, field.name).extend(values)
            else:
                setattr(message, field.name, self.scalar(field, long_ok=depth == 0))
        return message

    def _count(self) -> int:
        roll = self.rng.random()
        if roll < 0.85:
            return self.rng.randrange(0, 4)
        if roll < 0.98:
            return self.rng.randrange(4, 64)
        return self.rng.choice((1000, 5000))

    # -- raw protobuf ----------------------------------------------------------------------

    def raw_fields(self, descriptor: Any) -> bytes:
        """Protobuf bytes for fields of ``descriptor`` that the Python encoder would never
        write: appended to a serialized message, they merge into it on parsing."""
        r = self.rng
        out = bytearray()
        for _ in range(r.randrange(1, 4)):
            fields = descriptor.fields
            field = r.choice(fields) if fields else None
            number = (
                field.number
                if field is not None and r.random() < 0.8
                else r.choice((r.randrange(1, 200), 2**29 - 1, 19_000))
            )
            kind = r.randrange(7)
            if kind == 0:  # a varint: an unknown enum number, a huge or negative value
                value = r.choice((2**64 - 1, 2**63, 2**32, 99_999, 12_345_678, 0))
                out += _key(number, 0) + _varint(value)
            elif kind == 1:  # a string that is not UTF-8
                data = r.choice((b"\xff\xfe", b"\xc3\x28", b"a\xed\xa0\x80b", b"\xf8\x88\x80"))
                out += _key(number, 2) + _varint(len(data)) + data
            elif kind == 2:  # a length-delimited field for a varint one, or vice versa
                out += _key(number, r.choice((1, 2, 5))) + r.randbytes(r.randrange(0, 9))
            elif kind == 3:  # an overlong varint (11 bytes)
                out += _key(number, 0) + b"\xff" * 10 + b"\x01"
            elif kind == 4:  # a length longer than what follows
                out += _key(number, 2) + _varint(r.choice((2**31, 1000, 2**63))) + b"ab"
            elif kind == 5:  # groups (wire types 3/4, obsolete), and the invalid 6 and 7
                out += _key(number, r.choice((3, 4, 6, 7)))
            else:  # a nested message of random bytes
                data = r.randbytes(r.randrange(0, 24))
                out += _key(number, 2) + _varint(len(data)) + data
        return bytes(out)

    # -- bytes -----------------------------------------------------------------------------

    def mutate(self, data: bytes) -> bytes:
        """``data`` damaged once or a few times."""
        r = self.rng
        out = bytearray(data)
        for _ in range(r.choice((1, 1, 1, 2, 3))):
            kind = r.randrange(8)
            if kind == 0 and out:  # flip bits
                for _ in range(r.randrange(1, 4)):
                    out[r.randrange(len(out))] ^= 1 << r.randrange(8)
            elif kind == 1 and out:  # truncate
                del out[r.randrange(len(out)) :]
            elif kind == 2:  # insert random bytes
                at = r.randrange(len(out) + 1)
                out[at:at] = r.randbytes(r.randrange(1, 16))
            elif kind == 3 and len(out) > 2:  # duplicate a slice
                a = r.randrange(len(out))
                b = min(len(out), a + r.randrange(1, 64))
                at = r.randrange(len(out) + 1)
                out[at:at] = out[a:b]
            elif kind == 4 and len(out) >= 4:  # a total size that lies
                size = struct.unpack(">I", out[:4])[0]
                lie = r.choice((0, 1, 3, 4, size - 1, size + 1, size * 2, 2**31 - 1, 2**32 - 1))
                out[:4] = struct.pack(">I", lie % 2**32)
            elif kind == 5 and len(out) >= 8:  # a command size that lies
                size = struct.unpack(">I", out[4:8])[0]
                lie = r.choice((0, 1, size - 1, size + 1, 2**31, 2**32 - 1))
                out[4:8] = struct.pack(">I", lie % 2**32)
            elif kind == 6 and out:  # overwrite a byte with an edge value
                out[r.randrange(len(out))] = r.choice((0x00, 0xFF, 0x7F, 0x80, 0x0E, 0x01))
            elif out:  # zero a run
                a = r.randrange(len(out))
                b = min(len(out), a + r.randrange(1, 9))
                out[a:b] = bytes(b - a)
        return bytes(out)


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= 2**64 - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def length_delimited(number: int, data: bytes) -> bytes:
    """One length-delimited protobuf field: how a sub-message's extra bytes are appended to
    its parent (occurrences of a message field merge)."""
    return _key(number, 2) + _varint(len(data)) + data
