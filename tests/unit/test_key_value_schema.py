"""KEY_VALUE schemas between the admin API's JSON and the binary form clients send
(Pulsar's ``SchemaUtils.convertKeyValueDataStringToSchemaInfoSchema`` and
``convertKeyValueSchemaInfoDataToString``): ``SchemaData.from_definition`` and
``SchemaData.definition_text``."""

from __future__ import annotations

import json
import struct

import pytest

from pulsar_gateway.core import SCHEMA_TYPES, SchemaData

KV = SCHEMA_TYPES["KEY_VALUE"]
RECORD = {"type": "record", "name": "Reading", "fields": [{"name": "é", "type": "string"}]}
TYPES = (("key.schema.type", "STRING"), ("value.schema.type", "AVRO"))


def encoded(key: bytes, value: bytes) -> bytes:
    return struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value


def test_upload_is_stored_in_the_binary_form() -> None:
    text = json.dumps({"key": "", "value": RECORD}, indent=2)
    schema = SchemaData.from_definition(KV, "n", text, TYPES)
    value = json.dumps(RECORD, separators=(",", ":"), ensure_ascii=False).encode()
    assert schema.data == encoded(b"", value)
    assert schema.definition_text() == json.dumps(
        {"key": "", "value": RECORD}, separators=(",", ":"), ensure_ascii=False
    )


def test_both_sides_structured() -> None:
    text = json.dumps({"key": RECORD, "value": RECORD})
    types = (("key.schema.type", "JSON"), ("value.schema.type", "PROTOBUF"))
    schema = SchemaData.from_definition(KV, "n", text, types)
    assert json.loads(schema.definition_text()) == {"key": RECORD, "value": RECORD}


def test_sides_read_by_their_type_property() -> None:
    data = encoded(b'{"type":"string"}', b"not json at all")
    assert SchemaData(KV, "n", data).definition_text() == '{"key":"","value":""}'
    types = (("key.schema.type", "AVRO"), ("value.schema.type", "JSON"))
    text = SchemaData(KV, "n", data, types).definition_text()
    assert json.loads(text) == {"key": {"type": "string"}, "value": "not json at all"}
    # a string side other than "" is kept as JSON text, as Gson's toString writes it
    schema = SchemaData.from_definition(KV, "n", '{"key": "k", "value": ""}', ())
    assert schema.data == encoded(b'"k"', b"")


def test_unreadable_binary_data_reads_as_text() -> None:
    assert SchemaData(KV, "n", b"\x00\x01").definition_text() == "\x00\x01"


@pytest.mark.parametrize("text", ["not json", "[]", '{"key": ""}', '{"value": ""}', '"x"', "{}"])
def test_bad_key_value_definitions(text: str) -> None:
    with pytest.raises(ValueError):
        SchemaData.from_definition(KV, "n", text, ())


def test_other_types() -> None:
    assert SchemaData.from_definition(1, "n", "héllo", ()).data == "héllo".encode()
    with pytest.raises(ValueError):
        SchemaData.from_definition(SCHEMA_TYPES["AVRO"], "n", "not json", ())
    schema = SchemaData(SCHEMA_TYPES["STRING"], "n", b"\xff")
    assert schema.definition_text() == "\ufffd"
