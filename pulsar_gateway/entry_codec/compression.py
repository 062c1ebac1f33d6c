"""A producer's compression of an entry's payload (batch or single message), undone and
redone with the codecs of the official clients."""

from __future__ import annotations

import zlib

import lz4.block
import snappy
import zstandard

from pulsar_gateway.core import EntryFormatError
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["compress", "decompress"]


def decompress(codec: int, data: bytes, uncompressed_size: int) -> bytes:
    """Undo a producer's compression (the formats of the C++ client's ``lib/CompressionCodec*.cc``).

    Raises:
        EntryFormatError: unknown codec or corrupt data.
    """
    try:
        if codec == pb.NONE:
            return data
        if codec == pb.LZ4:
            return bytes(lz4.block.decompress(data, uncompressed_size=uncompressed_size))
        if codec == pb.ZLIB:
            return zlib.decompress(data)
        if codec == pb.ZSTD:
            return bytes(
                zstandard.ZstdDecompressor().decompress(data, max_output_size=uncompressed_size)
            )
        if codec == pb.SNAPPY:
            return bytes(snappy.uncompress(data))
    except Exception as exc:  # each library has its own error types
        raise EntryFormatError(f"cannot decompress a {codec} payload: {exc}") from exc
    raise EntryFormatError(f"unknown compression type {codec}")


def compress(codec: int, data: bytes) -> bytes:
    """Compress as the Pulsar clients do: LZ4 raw block, zlib stream, zstd frame (level 3),
    raw snappy block."""
    if codec == pb.NONE:
        return data
    if codec == pb.LZ4:
        return bytes(lz4.block.compress(data, store_size=False))
    if codec == pb.ZLIB:
        return zlib.compress(data)
    if codec == pb.ZSTD:
        return bytes(zstandard.ZstdCompressor(level=3).compress(data))
    if codec == pb.SNAPPY:
        return bytes(snappy.compress(data))
    raise EntryFormatError(f"unknown compression type {codec}")
