"""Schema compatibility under Pulsar's strategies (pure), schema versions on the wire,
schema records and type names."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pulsar_gateway.core.errors import IncompatibleSchema
from pulsar_gateway.core.model.schema import (
    SCHEMA_TYPES,
    SchemaData,
    decode_version,
    encode_version,
    schema_type_name,
)
from pulsar_gateway.core.topics.schema_compatibility import (
    AUTO_UPDATE_STRATEGIES,
    AVRO,
    JSON,
    STRATEGIES,
    check,
    check_backward,
    is_backward_compatible_avro,
)

STRING, PROTOBUF = 1, 3


def record(*fields: dict[str, Any], name: str = "R") -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields)}


def f(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


OLD = record(f("a", "int"), f("b", ["null", "string"]))


@pytest.mark.parametrize(
    ("new", "ok"),
    [
        (OLD, True),
        (record(f("a", "int"), f("b", ["null", "string"]), f("c", "long", default=0)), True),
        (record(f("a", "int"), f("b", ["null", "string"]), f("c", "long")), False),
        (record(f("a", "int")), True),  # dropping a field: the reader ignores it
        (record(f("a", "long"), f("b", ["null", "string"])), True),  # int -> long promotion
        (record(f("a", "double"), f("b", ["null", "string"])), True),
        (record(f("a", "string"), f("b", ["null", "string"])), False),
        (record(f("a", "int"), f("b", "string")), False),  # writer union has null
        (record(f("a", ["null", "int"]), f("b", ["null", "string", "int"])), True),
        (record(f("a", "int"), f("b", ["null", "string"]), name="Other"), False),
        (record(f("x", "int", aliases=["a"]), f("b", ["null", "string"])), True),
    ],
)
def test_record_evolution(new: dict[str, Any], ok: bool) -> None:
    assert is_backward_compatible_avro(new, OLD) is ok


def test_promotions_go_one_way() -> None:
    assert is_backward_compatible_avro("long", "int")
    assert not is_backward_compatible_avro("int", "long")
    assert is_backward_compatible_avro("bytes", "string")


def test_enums_may_only_gain_symbols() -> None:
    old = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    assert is_backward_compatible_avro({**old, "symbols": ["A", "B", "C"]}, old)
    assert not is_backward_compatible_avro({**old, "symbols": ["A"]}, old)
    assert is_backward_compatible_avro({**old, "symbols": ["A"], "default": "A"}, old)


def test_nested_arrays_maps_fixed_and_named_references() -> None:
    inner = record(f("x", "int"), name="Inner")
    old = record(
        f("items", {"type": "array", "items": inner}),
        f("again", "Inner"),
        f("m", {"type": "map", "values": "int"}),
        f("fx", {"type": "fixed", "name": "F", "size": 4}),
    )
    new = json.loads(json.dumps(old))
    new["fields"][0]["type"]["items"]["fields"].append(f("y", "int", default=1))
    new["fields"][2]["type"]["values"] = "long"
    assert is_backward_compatible_avro(new, old)
    new["fields"][3]["type"]["size"] = 8
    assert not is_backward_compatible_avro(new, old)


def test_recursive_records_terminate() -> None:
    node = record(f("v", "int"), f("next", ["null", "Node"]), name="Node")
    assert is_backward_compatible_avro(node, node)


def test_logical_types_read_as_their_base_type() -> None:
    ts = {"type": "long", "logicalType": "timestamp-millis"}
    assert is_backward_compatible_avro(record(f("t", ts)), record(f("t", "long")))


def test_check_backward_types_and_definitions() -> None:
    data = json.dumps(OLD).encode()
    check_backward(AVRO, data, AVRO, data)
    check_backward(JSON, data, JSON, json.dumps(record(f("a", "int"))).encode())
    check_backward(PROTOBUF, b"one", PROTOBUF, b"two")  # same type: not checked further
    with pytest.raises(IncompatibleSchema):
        check_backward(AVRO, data, STRING, b"")
    with pytest.raises(IncompatibleSchema):
        check_backward(AVRO, data, JSON, data)
    with pytest.raises(IncompatibleSchema):
        check_backward(AVRO, data, AVRO, b"not json")
    with pytest.raises(IncompatibleSchema):
        check_backward(AVRO, data, AVRO, json.dumps(record(f("z", "int"))).encode())


@pytest.mark.parametrize("version", [0, 1, 255, 1 << 40, (1 << 63) - 1])
def test_versions_are_eight_byte_big_endian(version: int) -> None:
    raw = encode_version(version)
    assert len(raw) == 8
    assert raw == version.to_bytes(8, "big")
    assert decode_version(raw) == version


def test_other_version_lengths_are_rejected() -> None:
    assert decode_version(b"") is None
    assert decode_version(b"\x01") is None
    assert decode_version(bytes(9)) is None


def test_schema_records_round_trip_through_json() -> None:
    schema = SchemaData(AVRO, "n", b"\x00\xffbinary", (("a", "1"), ("b", "2")))
    assert SchemaData.from_json(schema.to_json()) == schema
    assert schema.same_as(SchemaData(AVRO, "other name", b"\x00\xffbinary"))
    assert not schema.same_as(SchemaData(JSON, "n", b"\x00\xffbinary"))


def test_stored_records_keep_their_time_and_deletion_markers() -> None:
    schema = SchemaData(AVRO, "n", b"{}", timestamp=1700000000123)
    assert SchemaData.from_json(schema.to_json()) == schema
    marker = SchemaData.deletion(1700000000999)
    back = SchemaData.from_json(marker.to_json())
    assert (back.deleted, back.type, back.data, back.timestamp) == (True, 0, b"", 1700000000999)
    assert not back.same_as(back)  # a marker is no schema: never "the same schema"
    # records written before these fields existed still read
    assert not SchemaData.from_json('{"type": 1, "data": ""}').deleted


def test_json_definitions_are_compared_parsed() -> None:
    compact = json.dumps(OLD, separators=(",", ":")).encode()
    pretty = json.dumps(OLD, indent=4).encode()
    assert SchemaData(AVRO, "", compact).same_as(SchemaData(AVRO, "", pretty))
    assert SchemaData(JSON, "", compact).same_as(SchemaData(JSON, "", pretty))
    assert not SchemaData(AVRO, "", compact).same_as(SchemaData(JSON, "", pretty))
    # other types: byte for byte
    assert not SchemaData(STRING, "", b"{}").same_as(SchemaData(STRING, "", b"{ }"))
    assert not SchemaData(AVRO, "", b"not json").same_as(SchemaData(AVRO, "", b"not  json"))


def test_type_names_are_pulsars_schema_type() -> None:
    assert (SCHEMA_TYPES["AVRO"], SCHEMA_TYPES["STRING"], SCHEMA_TYPES["PROTOBUF_NATIVE"]) == (
        4,
        1,
        20,
    )
    assert SCHEMA_TYPES["BYTES"] == SCHEMA_TYPES["NONE"] == 0  # BYTES is None on the wire
    assert all(schema_type_name(n) == name for name, n in SCHEMA_TYPES.items() if name != "BYTES")
    assert schema_type_name(99) == "NONE"


V1 = json.dumps(record(f("a", "int"))).encode()
#: adds a field with a default: readable both ways
V2 = json.dumps(record(f("a", "int"), f("b", "int", default=0))).encode()
#: adds a field without a default: the new schema cannot read old data
NO_DEFAULT = json.dumps(record(f("a", "int"), f("c", "int"))).encode()
#: drops "a", which has no default: old readers cannot read new data
DROPS_A = json.dumps(record(f("b", "int", default=0))).encode()


def _ok(strategy: str, existing: list[bytes], new: bytes, new_type: int = AVRO) -> bool:
    try:
        check(strategy, [(AVRO, d) for d in existing], new_type, new)
    except IncompatibleSchema:
        return False
    return True


@pytest.mark.parametrize(
    ("strategy", "new", "ok"),
    [
        ("BACKWARD", V2, True),
        ("BACKWARD", NO_DEFAULT, False),
        ("BACKWARD", DROPS_A, True),
        ("FORWARD", V2, True),
        ("FORWARD", NO_DEFAULT, True),  # old readers ignore the new field
        ("FORWARD", DROPS_A, False),
        ("FULL", V2, True),
        ("FULL", NO_DEFAULT, False),
        ("FULL", DROPS_A, False),
        ("ALWAYS_COMPATIBLE", NO_DEFAULT, True),
        ("ALWAYS_INCOMPATIBLE", V2, False),
        ("ALWAYS_INCOMPATIBLE", V1, True),  # the same definition is no new version
    ],
)
def test_strategies_against_the_latest(strategy: str, new: bytes, ok: bool) -> None:
    assert _ok(strategy, [V1], new) is ok


def test_transitive_strategies_check_every_version_the_others_the_latest() -> None:
    history = [V1, V2]
    latest_only = json.dumps(record(f("a", "int"), f("b", "int"))).encode()
    # latest_only reads V2 data (both fields there) but not V1 data (no "b" in it, no default)
    assert _ok("BACKWARD", history, latest_only)
    assert not _ok("BACKWARD_TRANSITIVE", history, latest_only)
    assert not _ok("FULL_TRANSITIVE", history, latest_only)
    assert _ok("FORWARD_TRANSITIVE", history, V2)
    # readers of the old versions cannot read DROPS_A data: their "a" has no default
    assert not _ok("FORWARD_TRANSITIVE", history, DROPS_A)


def test_type_changes_and_other_types() -> None:
    assert not _ok("FULL", [V1], b"", STRING)
    assert _ok("ALWAYS_COMPATIBLE", [V1], b"", STRING)  # even a change of type
    assert not _ok("BACKWARD_TRANSITIVE", [V1, V2], b"", STRING)
    # same type, not Avro: compatible unless ALWAYS_INCOMPATIBLE
    assert _ok("FULL", [], b"", STRING)
    check("FULL", [(PROTOBUF, b"one")], PROTOBUF, b"two")
    with pytest.raises(IncompatibleSchema, match="ALWAYS_INCOMPATIBLE"):
        check("ALWAYS_INCOMPATIBLE", [(PROTOBUF, b"one")], PROTOBUF, b"two")
    with pytest.raises(IncompatibleSchema, match="not a valid Avro definition"):
        check("FULL", [(AVRO, V1)], AVRO, b"{broken")


def test_strategy_names_are_pulsars() -> None:
    assert len(STRATEGIES) == 9 and STRATEGIES[0] == "UNDEFINED"
    assert set(AUTO_UPDATE_STRATEGIES.values()) <= set(STRATEGIES)
    assert AUTO_UPDATE_STRATEGIES["AutoUpdateDisabled"] == "ALWAYS_INCOMPATIBLE"
