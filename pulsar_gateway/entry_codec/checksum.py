"""CRC32C: the C extension when installed, else a table-driven fallback."""

from __future__ import annotations

import warnings
from typing import Final, Protocol, TypeAlias

__all__ = ["ReadableBuffer", "crc32c"]

ReadableBuffer: TypeAlias = bytes | bytearray | memoryview


def _make_crc32c_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # reflected Castagnoli
        table.append(crc)
    return tuple(table)


_CRC32C_TABLE: Final = _make_crc32c_table()


def _crc32c_python(data: ReadableBuffer, value: int = 0) -> int:
    """Pure-Python CRC32C; same signature and results as ``crc32c.crc32c``."""
    table = _CRC32C_TABLE
    crc = value ^ 0xFFFFFFFF
    for byte in memoryview(data).cast("B"):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


class _Crc32c(Protocol):
    def __call__(self, data: ReadableBuffer, value: int = 0, /) -> int: ...


crc32c: _Crc32c
"""``crc32c(data, value=0)``: CRC32C (Castagnoli) of a bytes-like object.

``crc32c(b"123456789") == 0xE3069283``; pass a previous result as ``value`` to
continue it over more data.
"""
try:
    with warnings.catch_warnings():
        # The package warns when the CPU lacks the instruction and it uses its
        # own C software mode; that is still far faster than the fallback.
        warnings.simplefilter("ignore")
        from crc32c import crc32c as _crc32c_c
except ImportError:  # a declared dependency; tests cover this branch with it hidden
    crc32c = _crc32c_python
else:
    crc32c = _crc32c_c
