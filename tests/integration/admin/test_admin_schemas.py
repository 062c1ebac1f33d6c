"""The schemas admin API (``/admin/v2/schemas/...``) and the schema policies, against a
real gateway and Redis, checked with the official client and raw binary frames: what is
uploaded over REST is what producers and consumers get, what they register is listed over
REST, deletions and policies act on both sides as in Pulsar.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import _pulsar
import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, Schema, StringSchema

from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import admin, admin_text
from tests.conftest import TIMEOUT, GatewayThread
from tests.frames import command
from tests.helpers import Reading, ReadingBroken, ReadingV2, schema_version_number
from tests.rawclient import RawConnection

T = pb.BaseCommand.Type
RECEIVE_MS = int(TIMEOUT * 1000)


def definition(record: type[Record]) -> str:
    return str(AvroSchema(record).schema_info().schema())


def payload(record: type[Record], type_: str = "AVRO", pretty: bool = False) -> dict[str, Any]:
    text = definition(record)
    if pretty:  # the same schema written otherwise: still the same schema
        text = json.dumps(json.loads(text), indent=2)
    return {"type": type_, "schema": text, "properties": {"origin": "rest"}}


def base(gateway: GatewayThread, topic: str, namespace: str = "public/default") -> str:
    return f"{gateway.http_url}/admin/v2/schemas/{namespace}/{topic}"


def ns_url(gateway: GatewayThread, segment: str) -> str:
    return f"{gateway.http_url}/admin/v2/namespaces/public/default/{segment}"


def topic_url(gateway: GatewayThread, topic: str, segment: str) -> str:
    return f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/{segment}"


def get_schema(gateway: GatewayThread, topic: str, version: int | None = None) -> Any:
    """The binary protocol's GET_SCHEMA answer."""
    fields: dict[str, Any] = {"topic": f"persistent://public/default/{topic}"}
    if version is not None:
        fields["schema_version"] = struct.pack(">q", version)
    with RawConnection(gateway) as conn:
        conn.handshake()
        return conn.request(T.GET_SCHEMA, T.GET_SCHEMA_RESPONSE, **fields).getSchemaResponse


# -- schemas ---------------------------------------------------------------------------------


def test_uploaded_schema_is_what_producers_and_consumers_get(gateway, client, topic):
    status, body = admin("POST", f"{base(gateway, topic)}/schema", payload(Reading, pretty=True))
    assert (status, body) == (200, {"version": {"version": 0}})

    status, got = admin("GET", f"{base(gateway, topic)}/schema")
    assert status == 200
    assert (got["version"], got["type"], got["properties"]) == (0, "AVRO", {"origin": "rest"})
    assert json.loads(got["data"]) == json.loads(definition(Reading))
    assert got["timestamp"] > 0

    binary = get_schema(gateway, topic)
    assert not binary.HasField("error_code")
    assert (binary.schema.type, schema_version_number(binary.schema_version)) == (pb.Schema.Avro, 0)
    assert json.loads(binary.schema.schema_data) == json.loads(definition(Reading))

    # The client's own (compact) definition is the same schema: version 0, no new one.
    consumer = client.subscribe(topic, "s", schema=AvroSchema(Reading))
    producer = client.create_producer(topic, schema=AvroSchema(Reading))
    producer.send(Reading(sensor="a", value=1))
    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    assert (msg.value().sensor, msg.value().value) == ("a", 1)
    assert schema_version_number(msg.schema_version()) == 0
    status, listed = admin("GET", f"{base(gateway, topic)}/schemas")
    assert status == 200 and [s["version"] for s in listed["getSchemaResponses"]] == [0]

    # A partition's schema is its partitioned topic's.
    status, part = admin("GET", f"{base(gateway, f'{topic}-partition-2')}/schema")
    assert (status, part["version"], part["type"]) == (200, 0, "AVRO")


def test_schemas_producers_register_are_listed_and_found(gateway, client, topic):
    client.create_producer(topic, schema=JsonSchema(Reading))
    client.create_producer(topic, schema=JsonSchema(ReadingV2))

    status, listed = admin("GET", f"{base(gateway, topic)}/schemas")
    assert status == 200
    answers = listed["getSchemaResponses"]
    assert [(a["version"], a["type"]) for a in answers] == [(0, "JSON"), (1, "JSON")]
    assert json.loads(answers[1]["data"]) == json.loads(definition(ReadingV2))

    status, one = admin("GET", f"{base(gateway, topic)}/schema/1")
    assert (status, one["version"]) == (200, 1)
    assert json.loads(one["data"]) == json.loads(definition(ReadingV2))
    status, latest = admin("GET", f"{base(gateway, topic)}/schema")
    assert (status, latest["version"]) == (200, 1)

    status, missing = admin("GET", f"{base(gateway, topic)}/schema/7")
    assert (status, missing) == (404, {"reason": "Schema not found"})
    status, bad = admin("GET", f"{base(gateway, topic)}/schema/latest")
    assert status == 400 and "version" in bad["reason"]

    for method in ("POST", "PUT"):
        status, found = admin(method, f"{base(gateway, topic)}/version", payload(Reading, "JSON"))
        assert (status, found) == (200, {"version": 0})
    # The same definition as another type is another schema (Pulsar's NO_SCHEMA_VERSION).
    status, none = admin("POST", f"{base(gateway, topic)}/version", payload(Reading))
    assert (status, none) == (200, {"version": -1})


def test_no_schema_is_a_404_with_pulsars_reason(gateway, topic):
    status, body = admin("GET", f"{base(gateway, topic)}/schema")
    assert (status, body) == (404, {"reason": "Schema not found"})
    status, listed = admin("GET", f"{base(gateway, topic)}/schemas")
    assert (status, listed) == (200, {"getSchemaResponses": []})


def test_incompatible_upload_is_409_and_compatibility_says_why_not(gateway, client, topic):
    admin("POST", f"{base(gateway, topic)}/schema", payload(Reading))
    url = f"{base(gateway, topic)}/compatibility"

    status, verdict = admin("POST", url, payload(ReadingV2))
    assert status == 202
    assert verdict == {
        "compatibility": True,
        "isCompatibility": True,
        "schemaCompatibilityStrategy": "FULL",  # Pulsar's broker default
    }
    status, verdict = admin("POST", url, payload(ReadingBroken))
    assert (status, verdict["compatibility"], verdict["isCompatibility"]) == (202, False, False)
    # checking uploads nothing
    assert len(admin("GET", f"{base(gateway, topic)}/schemas")[1]["getSchemaResponses"]) == 1

    for refused in (payload(ReadingBroken), {"type": "STRING", "schema": ""}):
        status, body = admin("POST", f"{base(gateway, topic)}/schema", refused)
        assert status == 409 and "Incompatible schema" in body["reason"]
    # the producer side refuses the same schemas
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(ReadingBroken))

    status, body = admin("POST", f"{base(gateway, topic)}/schema", payload(ReadingV2))
    assert (status, body) == (200, {"version": {"version": 1}})
    producer = client.create_producer(topic, schema=AvroSchema(ReadingV2))
    producer.send(ReadingV2(sensor="b", value=2, unit="K"))


def test_delete_then_a_new_producer_starts_a_new_history(gateway, client, topic):
    client.create_producer(topic, schema=AvroSchema(Reading)).close()

    # Pulsar's deleteSchema appends a deletion marker: it takes version 1.
    status, body = admin("DELETE", f"{base(gateway, topic)}/schema")
    assert (status, body) == (200, {"version": 1})
    assert admin("GET", f"{base(gateway, topic)}/schema") == (404, {"reason": "Schema not found"})
    assert admin("GET", f"{base(gateway, topic)}/schema/0")[0] == 404
    assert admin("GET", f"{base(gateway, topic)}/schemas") == (200, {"getSchemaResponses": []})
    assert get_schema(gateway, topic).error_code == pb.TopicNotFound
    assert get_schema(gateway, topic, 0).error_code == pb.TopicNotFound

    # Nothing to be compatible with: another type is accepted, after the marker.
    consumer = client.subscribe(topic, "s", schema=StringSchema())
    producer = client.create_producer(topic, schema=StringSchema())
    producer.send("after")
    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    assert msg.value() == "after" and schema_version_number(msg.schema_version()) == 2
    status, got = admin("GET", f"{base(gateway, topic)}/schema")
    assert (status, got["version"], got["type"]) == (200, 2, "STRING")
    assert schema_version_number(get_schema(gateway, topic).schema_version) == 2

    # force erases the history: the answer is the last version, numbering starts again.
    producer.close()
    consumer.close()
    status, body = admin("DELETE", f"{base(gateway, topic)}/schema?force=true")
    assert (status, body) == (200, {"version": 2})
    assert admin("GET", f"{base(gateway, topic)}/schemas") == (200, {"getSchemaResponses": []})
    status, body = admin("POST", f"{base(gateway, topic)}/schema", payload(Reading))
    assert (status, body) == (200, {"version": {"version": 0}})
    status, body = admin("DELETE", f"{base(gateway, f'{topic}-none')}/schema?force=true")
    assert (status, body) == (200, {"version": -1})


def test_bad_input_is_a_4xx_with_a_reason(gateway, topic):
    url = f"{base(gateway, topic)}/schema"
    cases: list[tuple[Any, str | None, int]] = [
        (None, "{not json", 400),
        ([1, 2], None, 400),
        ({"type": "NOPE", "schema": ""}, None, 422),
        ({"type": 4, "schema": ""}, None, 422),
        ({"type": "AVRO", "schema": "not a definition"}, None, 422),
        ({"type": "KEY_VALUE", "schema": "{}"}, None, 422),
        ({"type": "STRING", "schema": 5}, None, 400),
        ({"type": "STRING", "schema": "", "properties": {"a": 1}}, None, 400),
    ]
    for body, raw, expected in cases:
        for path in (
            url,
            f"{base(gateway, topic)}/compatibility",
            f"{base(gateway, topic)}/version",
        ):
            status, text = admin_text("POST", path, body, raw)
            assert status == expected, (path, body, raw, status, text)
            assert isinstance(json.loads(text)["reason"], str)
    status, body = admin("GET", f"{base(gateway, topic, 'public/nowhere')}/schema")
    assert status == 404 and "nowhere" in body["reason"]
    status, body = admin("GET", f"{base(gateway, topic, 'public/de*f')}/schema")
    assert status == 412 and body["reason"] == "Topic name is not valid"
    # nothing was registered by any of it
    assert admin("GET", f"{base(gateway, topic)}/schemas") == (200, {"getSchemaResponses": []})


# -- KEY_VALUE --------------------------------------------------------------------------------


def key_value_data(key: bytes, value: bytes) -> bytes:
    """``KeyValue.encode`` of two schema definitions: what KEY_VALUE producers send."""
    return struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value


class KeyValueBytes(Schema):
    """A KEY_VALUE schema as the Java client's ``Schema.KeyValue(Schema.STRING,
    Schema.JSON(Reading))`` defines it. The Python client has no KeyValueSchema: its
    SchemaInfo carries the type and the binary definition but no properties, so its
    producers attach and cannot send (the C++ library wants ``kv.encoding.type``)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(bytes, _pulsar.SchemaType.KEY_VALUE, None, "KeyValue")
        self._schema_info = _pulsar.SchemaInfo(_pulsar.SchemaType.KEY_VALUE, "KeyValue", data)

    def encode(self, obj: bytes) -> bytes:
        return obj

    def decode(self, data: bytes) -> bytes:
        return data


def test_key_value_upload_is_the_binary_form_producers_send(gateway, client, topic):
    value = json.loads(definition(Reading))
    compact = json.dumps(value, separators=(",", ":")).encode()
    properties = {
        "key.schema.name": "String",
        "key.schema.type": "STRING",
        "key.schema.properties": "{}",
        "value.schema.name": "Reading",
        "value.schema.type": "JSON",
        "value.schema.properties": "{}",
        "kv.encoding.type": "INLINE",
    }
    body = {
        "type": "KEY_VALUE",
        "schema": json.dumps({"key": "", "value": value}, indent=2),
        "properties": properties,
    }
    status, answer = admin("POST", f"{base(gateway, topic)}/schema", body)
    assert (status, answer) == (200, {"version": {"version": 0}})

    # read back as Pulsar's SchemaUtils writes it: {"key", "value"}, a primitive side ""
    status, got = admin("GET", f"{base(gateway, topic)}/schema")
    assert status == 200
    assert (got["version"], got["type"], got["properties"]) == (0, "KEY_VALUE", properties)
    assert got["data"] == json.dumps({"key": "", "value": value}, separators=(",", ":"))
    # stored as the binary form: what GET_SCHEMA hands producers and consumers
    binary = get_schema(gateway, topic)
    assert binary.schema.type == pb.Schema.KeyValue
    assert binary.schema.schema_data == key_value_data(b"", compact)

    # a producer sending that very schema (with the Java client's properties) gets version 0
    with RawConnection(gateway) as conn:
        conn.handshake()
        rid = conn.request_id()
        cmd = command(T.PRODUCER, topic=f"persistent://public/default/{topic}", producer_id=1)
        cmd.producer.request_id = rid
        cmd.producer.schema.name = "KeyValue"
        cmd.producer.schema.type = pb.Schema.KeyValue
        cmd.producer.schema.schema_data = key_value_data(b"", compact)
        for key, text in properties.items():
            cmd.producer.schema.properties.add(key=key, value=text)
        conn.send(cmd)
        reply = conn.expect(T.PRODUCER_SUCCESS, lambda c: c.producer_success.request_id == rid)
        assert schema_version_number(reply.producer_success.schema_version) == 0

    # the official client's consumer and producer with that schema attach to version 0
    schema = KeyValueBytes(key_value_data(b"", compact))
    client.subscribe(topic, "s", schema=schema).close()
    client.create_producer(topic, schema=schema).close()
    status, listed = admin("GET", f"{base(gateway, topic)}/schemas")
    assert status == 200 and [s["version"] for s in listed["getSchemaResponses"]] == [0]
    # the version lookup finds it from the same payload
    assert admin("POST", f"{base(gateway, topic)}/version", body) == (200, {"version": 0})


def test_key_value_sides_without_types_read_back_empty(gateway, topic):
    """As Pulsar's decodeSubSchemaInfo: a side whose type property is missing reads as
    BYTES, a primitive, written ""."""
    value = json.loads(definition(Reading))
    body = {"type": "KEY_VALUE", "schema": json.dumps({"key": value, "value": value})}
    assert admin("POST", f"{base(gateway, topic)}/schema", body)[0] == 200
    status, got = admin("GET", f"{base(gateway, topic)}/schema")
    assert (status, got["data"]) == (200, '{"key":"","value":""}')
    binary = get_schema(gateway, topic)
    compact = json.dumps(value, separators=(",", ":")).encode()
    assert binary.schema.schema_data == key_value_data(compact, compact)


# -- schema policies -------------------------------------------------------------------------


def test_compatibility_strategy_namespace_and_topic_levels(gateway, client, topic):
    assert admin("GET", ns_url(gateway, "schemaCompatibilityStrategy")) == (200, "UNDEFINED")
    assert admin("GET", topic_url(gateway, topic, "schemaCompatibilityStrategy")) == (200, None)
    client.create_producer(topic, schema=AvroSchema(Reading))

    assert (
        admin("PUT", ns_url(gateway, "schemaCompatibilityStrategy"), "ALWAYS_INCOMPATIBLE")[0]
        == 204
    )
    assert admin("GET", ns_url(gateway, "schemaCompatibilityStrategy")) == (
        200,
        "ALWAYS_INCOMPATIBLE",
    )
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(ReadingV2))
    client.create_producer(topic, schema=AvroSchema(Reading))  # an existing version is found
    verdict = admin("POST", f"{base(gateway, topic)}/compatibility", payload(ReadingV2))[1]
    assert (verdict["compatibility"], verdict["schemaCompatibilityStrategy"]) == (
        False,
        "ALWAYS_INCOMPATIBLE",
    )
    assert admin("POST", f"{base(gateway, topic)}/schema", payload(ReadingV2))[0] == 409

    # The topic's own strategy wins over the namespace's, even for a change of type.
    url = topic_url(gateway, topic, "schemaCompatibilityStrategy")
    assert admin("PUT", url, "ALWAYS_COMPATIBLE")[0] == 204
    assert admin("GET", url) == (200, "ALWAYS_COMPATIBLE")
    producer = client.create_producer(topic, schema=StringSchema())
    producer.send("typed otherwise")
    status, got = admin("GET", f"{base(gateway, topic)}/schema")
    assert (got["version"], got["type"]) == (1, "STRING")

    assert admin("DELETE", url)[0] == 204
    assert admin("GET", url) == (200, None)
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(ReadingV2))
    client.create_producer(topic, schema=AvroSchema(Reading))  # version 0 is still known

    for where in (url, ns_url(gateway, "schemaCompatibilityStrategy")):
        for bad in ("SOMETIMES", 3, None):
            status, body = admin("PUT", where, bad, None if bad is not None else "null")
            assert status == 412 and "schemaCompatibilityStrategy" in body["reason"], (where, bad)
    # Pulsar's namespace level has no DELETE (nor POST) for it.
    assert admin("DELETE", ns_url(gateway, "schemaCompatibilityStrategy"))[0] == 405
    assert admin("POST", ns_url(gateway, "schemaCompatibilityStrategy"), "FULL")[0] == 405


def test_transitive_strategy_checks_every_version(gateway, client, topic):
    class Step1(Record):
        a = Integer()

    class Step2(Record):
        a = Integer()
        b = Integer(default=0, required_default=True)

    class Step3(Record):
        b = Integer(default=0, required_default=True)

    Step2.__name__ = Step3.__name__ = "Step1"
    url = f"{base(gateway, topic)}/schema"
    assert admin("POST", url, payload(Step1))[0] == 200
    assert admin("POST", url, payload(Step2))[0] == 200
    # Step3 drops "a" (no default): BACKWARD against the latest only is fine...
    admin("PUT", topic_url(gateway, topic, "schemaCompatibilityStrategy"), "BACKWARD")
    verdict = admin("POST", f"{base(gateway, topic)}/compatibility", payload(Step3))[1]
    assert (verdict["compatibility"], verdict["schemaCompatibilityStrategy"]) == (True, "BACKWARD")
    # ...FORWARD_TRANSITIVE needs version 0 (which has no default for "a") to read it too.
    admin("PUT", topic_url(gateway, topic, "schemaCompatibilityStrategy"), "FORWARD_TRANSITIVE")
    assert admin("POST", url, payload(Step3))[0] == 409
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(Step3))
    admin("PUT", topic_url(gateway, topic, "schemaCompatibilityStrategy"), "BACKWARD_TRANSITIVE")
    assert admin("POST", url, payload(Step3)) == (200, {"version": {"version": 2}})


def test_deprecated_auto_update_strategy_stands_in_when_undefined(gateway, topic):
    url = ns_url(gateway, "schemaAutoUpdateCompatibilityStrategy")
    assert admin("GET", url) == (200, None)
    assert admin("PUT", url, "AutoUpdateDisabled")[0] == 204
    assert admin("GET", url) == (200, "AutoUpdateDisabled")
    compat = f"{base(gateway, topic)}/compatibility"
    admin("POST", f"{base(gateway, topic)}/schema", payload(Reading))
    assert admin("POST", compat, payload(ReadingV2))[1]["schemaCompatibilityStrategy"] == (
        "ALWAYS_INCOMPATIBLE"
    )
    admin("PUT", url, "BackwardTransitive")
    assert admin("POST", compat, payload(ReadingV2))[1]["schemaCompatibilityStrategy"] == (
        "BACKWARD_TRANSITIVE"
    )
    # a defined schemaCompatibilityStrategy wins
    admin("PUT", ns_url(gateway, "schemaCompatibilityStrategy"), "FORWARD")
    assert admin("POST", compat, payload(ReadingV2))[1]["schemaCompatibilityStrategy"] == "FORWARD"
    status, body = admin("PUT", url, "BACKWARD")  # the strategy's name, not the old enum's
    assert status == 412 and "schemaAutoUpdateCompatibilityStrategy" in body["reason"]


def test_is_allow_auto_update_schema(gateway, client, topic):
    url = ns_url(gateway, "isAllowAutoUpdateSchema")
    assert admin("GET", url) == (200, True)
    client.create_producer(topic, schema=AvroSchema(Reading))
    assert admin("POST", url, False)[0] == 204
    assert admin("GET", url) == (200, False)

    client.create_producer(topic, schema=AvroSchema(Reading))  # known: still fine
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(ReadingV2))
    # The admin API still uploads (Pulsar's postSchema does not look at the flag)...
    assert admin("POST", f"{base(gateway, topic)}/schema", payload(ReadingV2)) == (
        200,
        {"version": {"version": 1}},
    )
    # ...and then producers with that schema get its version.
    producer = client.create_producer(topic, schema=AvroSchema(ReadingV2))
    consumer = client.subscribe(topic, "s", schema=AvroSchema(ReadingV2))
    producer.send(ReadingV2(sensor="c", value=3, unit="F"))
    assert schema_version_number(consumer.receive(timeout_millis=RECEIVE_MS).schema_version()) == 1

    assert admin("POST", url, "yes")[0] == 412
    assert admin("DELETE", url)[0] == 405


def test_schema_validation_enforced(gateway, client, topic):
    other = f"{topic}-plain"
    ns = ns_url(gateway, "schemaValidationEnforced")
    at_topic = topic_url(gateway, topic, "schemaValidationEnforced")
    assert admin("GET", ns) == (200, False)
    assert admin("GET", at_topic) == (200, None)
    client.create_producer(topic, schema=StringSchema())
    client.create_producer(topic).close()  # no schema (BytesSchema): allowed by default

    assert admin("POST", ns, True)[0] == 204
    assert admin("GET", ns) == (200, True)
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic)
    client.create_producer(other).send(b"a topic without a schema takes anything")
    client.create_producer(topic, schema=StringSchema()).send("with its schema")

    # the topic's value wins, and removing it brings the namespace's back
    assert admin("POST", at_topic, False)[0] == 204
    assert admin("GET", at_topic) == (200, False)
    client.create_producer(topic).close()
    assert admin("DELETE", at_topic)[0] == 204
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic)

    # after a deletion the topic has no schema: nothing to enforce
    admin("DELETE", f"{base(gateway, topic)}/schema")
    client.create_producer(topic).send(b"raw")
    for where in (ns, at_topic):
        status, body = admin("POST", where, "true")
        assert status == 412 and "schemaValidationEnforced" in body["reason"]
