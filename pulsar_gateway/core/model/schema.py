"""Schemas as the protocol carries them (``Schema``, ``schema_version``), for the schema
registry and the adapters alike.

Versions travel on the wire as 8-byte big-endian int64 (``schema_version``; protocol brief
G19).
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass

__all__ = ["SchemaData", "decode_version", "encode_version"]


def encode_version(version: int) -> bytes:
    """``schema_version`` on the wire: 8 bytes, big-endian int64."""
    return struct.pack(">q", version)


def decode_version(raw: bytes) -> int | None:
    """A wire ``schema_version``; None when it is not 8 bytes."""
    if len(raw) != 8:
        return None
    return int(struct.unpack(">q", raw)[0])


@dataclass(frozen=True, slots=True)
class SchemaData:
    """One schema, as the protocol's ``Schema`` message carries it."""

    type: int
    name: str
    data: bytes
    properties: tuple[tuple[str, str], ...] = ()

    def same_as(self, other: SchemaData) -> bool:
        """Pulsar's identity of schemas: type and definition (``SchemaHash``)."""
        return self.type == other.type and self.data == other.data

    def to_json(self) -> str:
        return json.dumps(
            {
                "type": self.type,
                "name": self.name,
                "data": base64.b64encode(self.data).decode(),
                "properties": dict(self.properties),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, raw: bytes | str) -> SchemaData:
        obj = json.loads(raw)
        return cls(
            int(obj["type"]),
            str(obj.get("name", "")),
            base64.b64decode(obj["data"]),
            tuple(sorted((str(k), str(v)) for k, v in obj.get("properties", {}).items())),
        )
