"""BACKWARD schema compatibility (pure), schema versions on the wire, schema records."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pulsar_gateway.core.errors import IncompatibleSchema
from pulsar_gateway.core.model.schema import SchemaData, decode_version, encode_version
from pulsar_gateway.core.topics.schema_compatibility import (
    AVRO,
    JSON,
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
