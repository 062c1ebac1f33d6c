"""Schemas as the protocol carries them (``Schema``, ``schema_version``), for the schema
registry and the adapters alike.

Versions travel on the wire as 8-byte big-endian int64 (``schema_version``; the C++ client's
``lib/Int64SerDes.h``, docs/binary_protocol.md "Requests and responses"). The admin API names
schema types as Pulsar's ``SchemaType`` enum does (``AVRO``, ``STRING``, ...);
:data:`SCHEMA_TYPES` maps those names to the protocol's ``Schema.Type``
numbers the registry stores (Pulsar's ``Commands.getSchemaType``: a ``SchemaType`` whose
value is negative, such as ``BYTES``, is ``None`` on the wire).

A topic's history may hold a deletion marker (``deleted``): Pulsar's
``SchemaRegistryServiceImpl.deleteSchema`` appends one instead of erasing the versions, and
the versions before the latest marker no longer count (``trimDeletedSchemaAndGetList``).

A KEY_VALUE schema's data is the binary form clients send (``KeyValueSchemaInfo``,
``KeyValue.encode``): the key schema's definition and the value schema's, each after its
length as a 4-byte big-endian int; the two types travel in the properties
``key.schema.type`` and ``value.schema.type`` (with ``kv.encoding.type`` ``INLINE`` or
``SEPARATED``). The admin API writes it as JSON ``{"key": <definition>, "value":
<definition>}``, a primitive side as ``""`` (Pulsar's ``SchemaUtils``
``convertKeyValueDataStringToSchemaInfoSchema`` on upload,
``convertKeyValueSchemaInfoDataToString`` on reading): :meth:`SchemaData.from_definition`,
:meth:`SchemaData.definition_text`.
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
_KEY_VALUE = SCHEMA_TYPES["KEY_VALUE"]
#: Pulsar's ``SchemaType.isPrimitiveType`` (NONE and BYTES are 0 here): a key or value of
#: these types has no definition, written ``""`` in the admin API's JSON.
_PRIMITIVE = frozenset(
    SCHEMA_TYPES[name]
    for name in (
        "NONE",
        "STRING",
        "BOOLEAN",
        "INT8",
        "INT16",
        "INT32",
        "INT64",
        "FLOAT",
        "DOUBLE",
        "DATE",
        "TIME",
        "TIMESTAMP",
        "INSTANT",
        "LOCAL_DATE",
        "LOCAL_TIME",
        "LOCAL_DATE_TIME",
    )
)
#: ``KeyValueSchemaInfo``'s property names of the two sides' types.
_KEY_TYPE, _VALUE_TYPE = "key.schema.type", "value.schema.type"


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


def _compact(value: Any) -> str:
    """A parsed JSON value written as Gson's ``JsonElement.toString`` writes it: no spaces,
    key order kept, non-ASCII as is, U+2028 and U+2029 escaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _side_bytes(value: Any) -> bytes:
    """``SchemaUtils.getKeyOrValueSchemaBytes``: ``""`` (a primitive side) is no bytes,
    anything else its compact JSON."""
    text = _compact(value)
    return b"" if text == '""' else text.encode()


def key_value_data(definition: str) -> bytes:
    """The stored KEY_VALUE data of the admin API's ``{"key": ..., "value": ...}`` text.

    Raises:
        ValueError: not a JSON object with ``key`` and ``value``.
    """
    try:
        parsed = json.loads(definition)
    except ValueError:
        raise ValueError("not JSON") from None
    if not isinstance(parsed, dict) or "key" not in parsed or "value" not in parsed:
        raise ValueError('expected {"key": <schema definition>, "value": <schema definition>}')
    key, value = _side_bytes(parsed["key"]), _side_bytes(parsed["value"])
    return struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value


def _split_key_value(data: bytes) -> tuple[bytes, bytes] | None:
    """``KeyValue.decode``: the two definitions (a length of -1 reads as none)."""
    try:
        (key_length,) = struct.unpack_from(">i", data, 0)
        key = data[4 : 4 + max(key_length, 0)]
        (value_length,) = struct.unpack_from(">i", data, 4 + len(key))
        start = 8 + len(key)
        value = data[start : start + max(value_length, 0)]
    except struct.error:
        return None
    return key, value


def _side_text(data: bytes, type_name: str | None) -> Any:
    """One side as ``convertKeyValueSchemaInfoDataToString`` writes it: ``""`` for a
    primitive type (an absent or unknown one reads as BYTES, as ``decodeSubSchemaInfo``
    defaults), else the definition parsed (its text when it is not JSON)."""
    number = SCHEMA_TYPES.get(type_name or "BYTES", 0)
    if number in _PRIMITIVE:
        return ""
    parsed = _parsed(data)
    return parsed if parsed is not None else data.decode("utf-8", errors="replace")


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

    @classmethod
    def from_definition(
        cls, type_: int, name: str, definition: str, properties: tuple[tuple[str, str], ...]
    ) -> SchemaData:
        """The schema of an admin API ``PostSchemaPayload``: the definition as UTF-8, a
        KEY_VALUE one converted to its binary form (``SchemasResourceBase.postSchema``).

        Raises:
            ValueError: an AVRO, JSON or PROTOBUF definition that is not JSON (Pulsar's
                ``StructSchemaDataValidator``), a KEY_VALUE one that is not ``{"key": ...,
                "value": ...}``.
        """
        if type_ == _KEY_VALUE:
            data = key_value_data(definition)
        else:
            data = definition.encode()
            if type_ in _JSON_DEFINED and _parsed(data) is None:
                raise ValueError("not JSON")
        return cls(type_, name, data, properties)

    def definition_text(self) -> str:
        """The definition as the admin API answers it (``GetSchemaResponse.data``): the
        data as UTF-8 text, a KEY_VALUE schema's as ``{"key": ..., "value": ...}``."""
        if self.type == _KEY_VALUE:
            sides = _split_key_value(self.data)
            if sides is not None:
                props = dict(self.properties)
                doc = {
                    "key": _side_text(sides[0], props.get(_KEY_TYPE)),
                    "value": _side_text(sides[1], props.get(_VALUE_TYPE)),
                }
                return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        return self.data.decode("utf-8", errors="replace")

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
