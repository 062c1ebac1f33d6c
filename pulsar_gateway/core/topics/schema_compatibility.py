"""Schema compatibility: may a topic move from its schemas to a new one?

Pulsar's strategies (``SchemaCompatibilityStrategy``), applied as
``SchemaRegistryServiceImpl.putSchemaIfAbsent`` and ``checkCompatible`` apply them:

* ``ALWAYS_COMPATIBLE``: anything goes, a change of type too;
* ``ALWAYS_INCOMPATIBLE``: no new version (an identical schema still finds its version,
  before any check);
* ``BACKWARD``: data written with the latest version reads with the new schema;
  ``FORWARD``: data written with the new schema reads with the latest; ``FULL``: both;
* ``BACKWARD_TRANSITIVE``, ``FORWARD_TRANSITIVE``, ``FULL_TRANSITIVE``: the same against
  every version since the latest deletion, not only the latest
  (``checkCompatibilityWithAll``);
* ``UNDEFINED`` only means "not set here": the registry resolves it to the namespace's or
  the gateway's strategy before checking.

What each check compares:

* a change of schema type (``Schema.Type``) is always incompatible (except under
  ``ALWAYS_COMPATIBLE``);
* AVRO and JSON (the Python and Java clients send an Avro record definition for both): Avro
  schema resolution, one schema as reader and the other as writer: every reader field
  either exists in the writer with a type the writer's can be promoted to (int ->
  long/float/double, long -> float/double, float -> double, string <-> bytes, unions by
  branch) or has a default; enums may only gain symbols (or have a default); arrays, maps,
  fixed and nested records recursively; records must keep their name (Pulsar's
  ``AvroSchemaBasedCompatibilityCheck`` with Avro's ``SchemaValidatorBuilder``);
* every other type (STRING, PROTOBUF, PROTOBUF_NATIVE, KEY_VALUE, primitives): compatible
  when the type is the same, unless the strategy is ``ALWAYS_INCOMPATIBLE`` (Pulsar's
  ``SchemaCompatibilityCheck.DEFAULT``; Pulsar checks PROTOBUF_NATIVE descriptors and
  KEY_VALUE components, this gateway does not).

Pure functions, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pulsar_gateway.core.errors import IncompatibleSchema

__all__ = [
    "AUTO_UPDATE_STRATEGIES",
    "AVRO",
    "JSON",
    "STRATEGIES",
    "check",
    "check_backward",
    "is_backward_compatible_avro",
]

#: ``Schema.Type`` values whose data is an Avro definition.
JSON = 2
AVRO = 4

#: Pulsar's ``SchemaCompatibilityStrategy`` names.
STRATEGIES = (
    "UNDEFINED",
    "ALWAYS_INCOMPATIBLE",
    "ALWAYS_COMPATIBLE",
    "BACKWARD",
    "FORWARD",
    "FULL",
    "BACKWARD_TRANSITIVE",
    "FORWARD_TRANSITIVE",
    "FULL_TRANSITIVE",
)
#: Pulsar's deprecated ``SchemaAutoUpdateCompatibilityStrategy`` names -> the strategy
#: each stands for (``SchemaCompatibilityStrategy.fromAutoUpdatePolicy``).
AUTO_UPDATE_STRATEGIES = {
    "AutoUpdateDisabled": "ALWAYS_INCOMPATIBLE",
    "Backward": "BACKWARD",
    "Forward": "FORWARD",
    "Full": "FULL",
    "AlwaysCompatible": "ALWAYS_COMPATIBLE",
    "BackwardTransitive": "BACKWARD_TRANSITIVE",
    "ForwardTransitive": "FORWARD_TRANSITIVE",
    "FullTransitive": "FULL_TRANSITIVE",
}
_TRANSITIVE = frozenset({"BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE"})
#: strategies under which the new schema must read the old data / the old the new data
_NEW_READS_OLD = frozenset({"BACKWARD", "FULL", "BACKWARD_TRANSITIVE", "FULL_TRANSITIVE"})
_OLD_READS_NEW = frozenset({"FORWARD", "FULL", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE"})

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


def _definition(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise IncompatibleSchema("Incompatible schema: not a valid Avro definition") from None


def check(
    strategy: str,
    existing: Sequence[tuple[int, bytes]],
    new_type: int,
    new_data: bytes,
) -> None:
    """Raise IncompatibleSchema unless a schema (``new_type``, ``new_data``) may follow
    ``existing`` (type and definition of the topic's versions since the latest deletion,
    oldest first) under ``strategy``.

    Raises:
        IncompatibleSchema: with the reason.
    """
    if not existing or strategy == "ALWAYS_COMPATIBLE":
        return
    transitive = strategy in _TRANSITIVE
    against = list(existing) if transitive else [existing[-1]]
    for old_type, _ in against:
        if old_type != new_type:
            raise IncompatibleSchema(
                f"Incompatible schema: the topic's schema type is {old_type}, not {new_type}"
            )
    if not transitive and against[0][1] == new_data:
        return  # the same definition (Pulsar compares hashes before the check)
    if strategy not in _NEW_READS_OLD | _OLD_READS_NEW:  # ALWAYS_INCOMPATIBLE, or unknown
        raise IncompatibleSchema(f"Incompatible schema: the strategy is {strategy}")
    if new_type not in (JSON, AVRO):
        return
    new = _definition(new_data)
    for _, old_data in against:
        old = _definition(old_data)
        if strategy in _NEW_READS_OLD and not is_backward_compatible_avro(new, old):
            raise IncompatibleSchema(
                "Incompatible schema: the new schema cannot read data written with an "
                f"existing version ({strategy})"
            )
        if strategy in _OLD_READS_NEW and not is_backward_compatible_avro(old, new):
            raise IncompatibleSchema(
                "Incompatible schema: an existing version cannot read data written with the "
                f"new schema ({strategy})"
            )


def check_backward(old_type: int, old_data: bytes, new_type: int, new_data: bytes) -> None:
    """Raise IncompatibleSchema unless data written with the old schema reads with the new
    (``BACKWARD`` against one version).

    Raises:
        IncompatibleSchema: with the reason.
    """
    check("BACKWARD", [(old_type, old_data)], new_type, new_data)


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
