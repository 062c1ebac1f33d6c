"""Schemas as the protocol carries them (``Schema``, ``schema_version``), for the schema
registry and the adapters alike.

Versions travel on the wire as 8-byte big-endian int64 (``schema_version``; protocol brief
G19). The admin API names schema types as Pulsar's ``SchemaType`` enum does (``AVRO``,
``STRING``, ...); :data:`SCHEMA_TYPES` maps those names to the protocol's ``Schema.Type``
numbers the registry stores (Pulsar's ``Commands.getSchemaType``: a ``SchemaType`` whose
value is negative, such as ``BYTES``, is ``None`` on the wire).

A topic's history may hold a deletion marker (``deleted``): Pulsar's
``SchemaRegistryServiceImpl.deleteSchema`` appends one instead of erasing the versions, and
the versions before the latest marker no longer count (``trimDeletedSchemaAndGetList``).
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SCHEMA_TYPES",
    "SchemaData",
    "decode_version",
    "encode_version",
    "schema_type_name",
]

#: Pulsar's ``SchemaType`` names -> the protocol's ``Schema.Type`` numbers.
SCHEMA_TYPES: dict[str, int] = {
    "NONE": 0,
    "BYTES": 0,
    "STRING": 1,
    "JSON": 2,
    "PROTOBUF": 3,
    "AVRO": 4,
    "BOOLEAN": 5,
    "INT8": 6,
    "INT16": 7,
    "INT32": 8,
    "INT64": 9,
    "FLOAT": 10,
    "DOUBLE": 11,
    "DATE": 12,
    "TIME": 13,
    "TIMESTAMP": 14,
    "KEY_VALUE": 15,
    "INSTANT": 16,
    "LOCAL_DATE": 17,
    "LOCAL_TIME": 18,
    "LOCAL_DATE_TIME": 19,
    "PROTOBUF_NATIVE": 20,
}
_NAMES = {number: name for name, number in SCHEMA_TYPES.items() if name != "BYTES"}

#: Types whose definition is JSON (an Avro record definition for AVRO, JSON and PROTOBUF),
#: compared parsed rather than byte for byte, as Pulsar's ``getSchemaVersionBySchemaData``
#: compares the parsed Avro schemas of these types.
_JSON_DEFINED = frozenset({2, 3, 4})


def schema_type_name(number: int) -> str:
    """Pulsar's ``SchemaType`` name of a protocol ``Schema.Type`` number."""
    return _NAMES.get(number, "NONE")


def encode_version(version: int) -> bytes:
    """``schema_version`` on the wire: 8 bytes, big-endian int64."""
    return struct.pack(">q", version)


def decode_version(raw: bytes) -> int | None:
    """A wire ``schema_version``; None when it is not 8 bytes."""
    if len(raw) != 8:
        return None
    return int(struct.unpack(">q", raw)[0])


def _parsed(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class SchemaData:
    """One schema, as the protocol's ``Schema`` message carries it; or a deletion marker
    (``deleted``) in a topic's history. ``timestamp``: when it was registered (ms)."""

    type: int
    name: str
    data: bytes
    properties: tuple[tuple[str, str], ...] = ()
    timestamp: int = 0
    deleted: bool = False

    def same_as(self, other: SchemaData) -> bool:
        """Pulsar's identity of schemas: type and definition (``SchemaHash``), a JSON
        definition compared parsed, so whitespace and key order do not make a new version."""
        if self.deleted or other.deleted or self.type != other.type:
            return False
        if self.data == other.data:
            return True
        if self.type in _JSON_DEFINED:
            mine = _parsed(self.data)
            return mine is not None and mine == _parsed(other.data)
        return False

    def to_json(self) -> str:
        obj: dict[str, Any] = {
            "type": self.type,
            "name": self.name,
            "data": base64.b64encode(self.data).decode(),
            "properties": dict(self.properties),
        }
        if self.timestamp:
            obj["timestamp"] = self.timestamp
        if self.deleted:
            obj["deleted"] = True
        return json.dumps(obj, sort_keys=True)

    @classmethod
    def from_json(cls, raw: bytes | str) -> SchemaData:
        obj = json.loads(raw)
        return cls(
            int(obj["type"]),
            str(obj.get("name", "")),
            base64.b64decode(obj["data"]),
            tuple(sorted((str(k), str(v)) for k, v in obj.get("properties", {}).items())),
            int(obj.get("timestamp", 0)),
            bool(obj.get("deleted", False)),
        )

    @classmethod
    def deletion(cls, timestamp: int) -> SchemaData:
        """The marker Pulsar's ``deleteSchema`` appends (type NONE, no data)."""
        return cls(0, "", b"", (), timestamp, True)
