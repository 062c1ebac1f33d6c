"""The errors of reading stored entries and the frames that carry them."""

from __future__ import annotations

__all__ = ["CodecError", "MalformedFrame"]


class CodecError(Exception):
    """Base class of every codec failure.

    Every malformed input given to the frame decoder
    (``pulsar_gateway/frame_codec.py``), :func:`.blob.parse_blob` or
    :func:`.batch.parse_batch` raises a subclass of this and nothing else. On the
    binary connection any of them means "close the connection": the byte
    stream can no longer be trusted to be in sync.
    """


class MalformedFrame(CodecError):
    """The bytes do not form a valid frame, blob or batch.

    Covers bad sizes, truncated sections, protobuf that does not parse,
    missing proto2 ``required`` fields (the C++ client rejects those too,
    docs/binary_protocol.md "Framing"), a payload section on a command that cannot carry one, and a
    SEND or MESSAGE without one (the Java broker fails those as well).
    """
