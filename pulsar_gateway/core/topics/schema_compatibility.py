"""Schema compatibility: may a topic move from its latest schema to a new one?

Pulsar's default strategy is BACKWARD (``schemaCompatibilityStrategy=FULL`` was the old
default; since 2.x the namespace default is ``BACKWARD``, checked against the latest
version only): data written with the old schema must be readable with the new one. What
this gateway checks:

* a change of schema type (``Schema.Type``) is always incompatible;
* AVRO and JSON (the Python and Java clients send an Avro record definition for both): Avro
  schema resolution with the new schema as reader and the latest as writer: every reader
  field either exists in the writer with a type the writer's can be promoted to (int ->
  long/float/double, long -> float/double, float -> double, string <-> bytes, unions by
  branch) or has a default; enums may only gain symbols (or have a default); arrays, maps,
  fixed and nested records recursively; records must keep their name;
* every other type (STRING, PROTOBUF, PROTOBUF_NATIVE, KEY_VALUE, primitives): compatible
  when the type is the same (Pulsar checks PROTOBUF_NATIVE descriptors and KEY_VALUE
  components; this gateway does not).

Pure functions, no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from pulsar_gateway.core.errors import IncompatibleSchema

__all__ = ["AVRO", "JSON", "check_backward", "is_backward_compatible_avro"]

#: ``Schema.Type`` values whose data is an Avro definition.
JSON = 2
AVRO = 4

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
#: (writer type, reader type) pairs Avro resolves by promotion.
_PROMOTIONS = frozenset(
    {
        ("int", "long"),
        ("int", "float"),
        ("int", "double"),
        ("long", "float"),
        ("long", "double"),
        ("float", "double"),
        ("string", "bytes"),
        ("bytes", "string"),
    }
)


def check_backward(old_type: int, old_data: bytes, new_type: int, new_data: bytes) -> None:
    """Raise IncompatibleSchema unless data written with the old schema reads with the new.

    Raises:
        IncompatibleSchema: with the reason.
    """
    if old_type != new_type:
        raise IncompatibleSchema(
            f"Incompatible schema: the topic's schema type is {old_type}, not {new_type}"
        )
    if new_type not in (JSON, AVRO) or old_data == new_data:
        return
    try:
        reader = json.loads(new_data)
        writer = json.loads(old_data)
    except ValueError:
        raise IncompatibleSchema("Incompatible schema: not a valid Avro definition") from None
    if not is_backward_compatible_avro(reader, writer):
        raise IncompatibleSchema(
            "Incompatible schema: the new schema cannot read data written with the latest "
            "version (BACKWARD)"
        )


def is_backward_compatible_avro(reader: Any, writer: Any) -> bool:
    """Whether Avro data written with ``writer`` can be read with ``reader``."""
    return _Resolver(_named_types(reader), _named_types(writer)).can_read(reader, writer)


def _full_name(schema: dict[str, Any], namespace: str | None) -> str:
    name = str(schema.get("name", ""))
    if "." in name:
        return name
    ns = schema.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


def _named_types(
    schema: Any, namespace: str | None = None, out: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Every named type (record, enum, fixed) a schema defines, by short and full name."""
    names: dict[str, Any] = {} if out is None else out
    if isinstance(schema, list):
        for branch in schema:
            _named_types(branch, namespace, names)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error", "enum", "fixed") and "name" in schema:
            full = _full_name(schema, namespace)
            names[full] = schema
            names[full.rsplit(".", 1)[-1]] = schema
            namespace = full.rpartition(".")[0] or namespace
        for f in schema.get("fields", ()) if kind in ("record", "error") else ():
            if isinstance(f, dict):
                _named_types(f.get("type"), namespace, names)
        if kind == "array":
            _named_types(schema.get("items"), namespace, names)
        elif kind == "map":
            _named_types(schema.get("values"), namespace, names)
        elif isinstance(kind, dict | list):
            _named_types(kind, namespace, names)
    return names


class _Resolver:
    def __init__(self, reader_names: dict[str, Any], writer_names: dict[str, Any]) -> None:
        self._r = reader_names
        self._w = writer_names
        self._assumed: set[tuple[str, str]] = set()

    @staticmethod
    def _resolve(schema: Any, names: dict[str, Any]) -> Any:
        while True:
            if isinstance(schema, str) and schema not in _PRIMITIVES:
                schema = names.get(schema, schema)
                if isinstance(schema, str):
                    return schema
            elif isinstance(schema, dict) and isinstance(schema.get("type"), dict | list):
                schema = schema["type"]
            elif (
                isinstance(schema, dict)
                and isinstance(schema.get("type"), str)
                and schema["type"] not in ("record", "error", "enum", "fixed", "array", "map")
            ):
                # {"type": "long", "logicalType": ...} or a reference written as a dict
                schema = schema["type"]
            else:
                return schema

    @staticmethod
    def _kind(schema: Any) -> str:
        if isinstance(schema, str):
            return schema
        if isinstance(schema, dict):
            return "record" if schema.get("type") == "error" else str(schema.get("type"))
        return "union"

    def can_read(self, reader: Any, writer: Any) -> bool:
        reader = self._resolve(reader, self._r)
        writer = self._resolve(writer, self._w)
        if isinstance(writer, list):
            return all(self.can_read(reader, branch) for branch in writer)
        if isinstance(reader, list):
            return any(self.can_read(branch, writer) for branch in reader)
        rk, wk = self._kind(reader), self._kind(writer)
        if rk in _PRIMITIVES or wk in _PRIMITIVES:
            return rk == wk or (wk, rk) in _PROMOTIONS
        if rk != wk:
            return False
        if rk == "record":
            return self._records(reader, writer)
        if rk == "enum":
            if (
                str(reader.get("name")).rsplit(".", 1)[-1]
                != str(writer.get("name")).rsplit(".", 1)[-1]
            ):
                return False
            return set(writer.get("symbols", ())) <= set(reader.get("symbols", ())) or (
                "default" in reader
            )
        if rk == "fixed":
            return bool(reader.get("size") == writer.get("size"))
        if rk == "array":
            return self.can_read(reader.get("items"), writer.get("items"))
        if rk == "map":
            return self.can_read(reader.get("values"), writer.get("values"))
        # Unknown kinds or unresolved names: equal names read each other.
        return bool(reader == writer)

    def _records(self, reader: dict[str, Any], writer: dict[str, Any]) -> bool:
        rname = str(reader.get("name", "")).rsplit(".", 1)[-1]
        wname = str(writer.get("name", "")).rsplit(".", 1)[-1]
        if rname != wname and wname not in reader.get("aliases", ()):
            return False
        pair = (rname, wname)
        if pair in self._assumed:  # recursive type: assume it holds while checking it
            return True
        self._assumed.add(pair)
        writer_fields: dict[str, dict[str, Any]] = {}
        for f in writer.get("fields", ()):
            writer_fields[str(f.get("name"))] = f
        for f in reader.get("fields", ()):
            match = writer_fields.get(str(f.get("name")))
            if match is None:
                for alias in f.get("aliases", ()):
                    match = writer_fields.get(str(alias))
                    if match is not None:
                        break
            if match is None:
                if "default" not in f:
                    return False
            elif not self.can_read(f.get("type"), match.get("type")):
                return False
        return True
