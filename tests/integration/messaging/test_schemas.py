"""Schemas (docs/producers.md "Schemas"): a registry per topic in Redis, versions on the wire as
8-byte big-endian int64, GET_SCHEMA and GET_OR_CREATE_SCHEMA, typed records through the
official client's JsonSchema and AvroSchema.
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

import pulsar
import pulsar.asyncio
import pytest
from pulsar.schema import AvroSchema, JsonSchema, Record, StringSchema

from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.conftest import TIMEOUT
from tests.frames import command
from tests.helpers import Reading, ReadingBroken, ReadingV2, schema_version_number
from tests.rawclient import RawConnection

T = pb.BaseCommand.Type
RECEIVE_MS = int(TIMEOUT * 1000)


def full(topic: str) -> str:
    return f"persistent://public/default/{topic}"


def avro_definition(record: type[Record]) -> bytes:
    return AvroSchema(record).schema_info().schema().encode()


def get_schema(conn: RawConnection, topic: str, schema_version: bytes | None = None) -> Any:
    fields: dict[str, Any] = {"topic": full(topic)}
    if schema_version is not None:
        fields["schema_version"] = schema_version
    return conn.request(T.GET_SCHEMA, T.GET_SCHEMA_RESPONSE, **fields).getSchemaResponse


def get_or_create(conn: RawConnection, topic: str, type_: int, data: bytes) -> Any:
    rid = conn.request_id()
    cmd = command(T.GET_OR_CREATE_SCHEMA, request_id=rid, topic=full(topic))
    cmd.getOrCreateSchema.schema.name = "s"
    cmd.getOrCreateSchema.schema.schema_data = data
    cmd.getOrCreateSchema.schema.type = type_
    conn.send(cmd)
    return conn.expect(
        T.GET_OR_CREATE_SCHEMA_RESPONSE,
        lambda c: c.getOrCreateSchemaResponse.request_id == rid,
    ).getOrCreateSchemaResponse


# -- typed records through the official client ---------------------------------------------


@pytest.mark.parametrize("schema_class", [JsonSchema, AvroSchema])
def test_typed_records_round_trip(client, topic, schema_class):
    consumer = client.subscribe(topic, "s", schema=schema_class(Reading))
    producer = client.create_producer(topic, schema=schema_class(Reading))
    for i in range(3):
        producer.send(Reading(sensor=f"s{i}", value=i * 10))
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(3)]
    assert [(m.value().sensor, m.value().value) for m in got] == [("s0", 0), ("s1", 10), ("s2", 20)]
    assert all(isinstance(m.value(), Reading) for m in got)


def test_avro_consumer_decodes_with_the_writer_schema(client, topic):
    """Messages written with version 0 and 1; the consumer fetches each writer schema with
    GET_SCHEMA (by the message's version) and resolves it to its own."""
    old = client.create_producer(topic, schema=AvroSchema(Reading))
    new = client.create_producer(topic, schema=AvroSchema(ReadingV2))
    # The consumer's schema is version 1 already (a consumer on an idle topic without a
    # schema would register its own first, as Pulsar does).
    consumer = client.subscribe(topic, "s", schema=AvroSchema(ReadingV2))
    old.send(Reading(sensor="old", value=1))
    new.send(ReadingV2(sensor="new", value=2, unit="K"))
    first = consumer.receive(timeout_millis=RECEIVE_MS)
    second = consumer.receive(timeout_millis=RECEIVE_MS)
    assert (first.value().sensor, first.value().value, first.value().unit) == ("old", 1, "C")
    assert (second.value().sensor, second.value().unit) == ("new", "K")
    assert schema_version_number(first.schema_version()) == 0
    assert schema_version_number(second.schema_version()) == 1


def test_same_schema_same_version_and_compatible_change_new_version(gateway, topic):
    with RawConnection(gateway) as conn:
        conn.handshake()
        avro = pb.Schema.Avro
        v0 = get_or_create(conn, topic, avro, avro_definition(Reading))
        again = get_or_create(conn, topic, avro, avro_definition(Reading))
        v1 = get_or_create(conn, topic, avro, avro_definition(ReadingV2))
        assert [schema_version_number(r.schema_version) for r in (v0, again, v1)] == [0, 0, 1]
        assert not v0.HasField("error_code")
        # Registering an old version again finds it.
        assert (
            schema_version_number(
                get_or_create(conn, topic, avro, avro_definition(Reading)).schema_version
            )
            == 0
        )
        conn.assert_open()


def test_producer_success_carries_the_schema_version(gateway, topic):
    with RawConnection(gateway) as conn:
        conn.handshake()
        for pid, record, expected in ((1, Reading, 0), (2, ReadingV2, 1), (3, Reading, 0)):
            rid = conn.request_id()
            cmd = command(T.PRODUCER, topic=full(topic), producer_id=pid, request_id=rid)
            cmd.producer.schema.name = "Reading"
            cmd.producer.schema.schema_data = avro_definition(record)
            cmd.producer.schema.type = pb.Schema.Avro
            conn.send(cmd)
            r = conn.expect(
                T.PRODUCER_SUCCESS, lambda c, rid=rid: c.producer_success.request_id == rid
            )
            assert schema_version_number(r.producer_success.schema_version) == expected
        # No schema: no version (Python's default BytesSchema).
        rid = conn.request_id()
        conn.send(command(T.PRODUCER, topic=full(topic), producer_id=4, request_id=rid))
        r = conn.expect(T.PRODUCER_SUCCESS, lambda c: c.producer_success.request_id == rid)
        assert not r.producer_success.HasField("schema_version")


def test_incompatible_schemas_are_refused(client, topic):
    producer = client.create_producer(topic, schema=AvroSchema(Reading))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=StringSchema())  # another type
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=JsonSchema(Reading))  # JSON is another type too
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(ReadingBroken))  # not BACKWARD
    producer.send(Reading(sensor="still", value=1))


def test_get_or_create_schema_refuses_incompatible_in_its_response(gateway, topic):
    with RawConnection(gateway) as conn:
        conn.handshake()
        get_or_create(conn, topic, pb.Schema.Avro, avro_definition(Reading))
        r = get_or_create(conn, topic, pb.Schema.String, b"")
        assert r.error_code == pb.IncompatibleSchema
        assert not r.HasField("schema_version")
        conn.assert_open()


def test_get_schema_latest_by_version_and_missing(gateway, topic):
    with RawConnection(gateway) as conn:
        conn.handshake()
        none = get_schema(conn, topic)
        assert none.error_code == pb.TopicNotFound  # "no schema", as the client expects
        get_or_create(conn, topic, pb.Schema.Json, avro_definition(Reading))
        get_or_create(conn, topic, pb.Schema.Json, avro_definition(ReadingV2))
        latest = get_schema(conn, topic)
        assert schema_version_number(latest.schema_version) == 1
        assert latest.schema.type == pb.Schema.Json
        assert json.loads(latest.schema.schema_data) == json.loads(avro_definition(ReadingV2))
        first = get_schema(conn, topic, struct.pack(">q", 0))
        assert schema_version_number(first.schema_version) == 0
        assert json.loads(first.schema.schema_data) == json.loads(avro_definition(Reading))
        missing = get_schema(conn, topic, struct.pack(">q", 7))
        assert missing.error_code == pb.TopicNotFound
        bad = get_schema(conn, topic, b"\x01")
        assert bad.error_code == pb.TopicNotFound
        conn.assert_open()


def test_partitions_share_the_base_topics_schema(gateway, topic):
    with RawConnection(gateway) as conn:
        conn.handshake()
        r = get_or_create(conn, f"{topic}-partition-0", pb.Schema.Avro, avro_definition(Reading))
        assert schema_version_number(r.schema_version) == 0
        for name in (topic, f"{topic}-partition-3"):
            got = get_schema(conn, name)
            assert schema_version_number(got.schema_version) == 0
            assert got.schema.type == pb.Schema.Avro


def test_schema_registered_on_one_gateway_is_seen_on_another(
    gateway_factory, client_factory, topic
):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client_factory(gw_a.url).create_producer(topic, schema=AvroSchema(Reading))
    with pytest.raises(pulsar.IncompatibleSchema):
        client_factory(gw_b.url).create_producer(topic, schema=StringSchema())
    producer = client_factory(gw_b.url).create_producer(topic, schema=AvroSchema(ReadingV2))
    producer.send(ReadingV2(sensor="b", value=3, unit="F"))


def test_schemas_with_the_asyncio_client(gateway, topic):
    async def run() -> None:
        client = pulsar.asyncio.Client(gateway.url, operation_timeout_seconds=10)
        try:
            consumer = await client.subscribe(topic, "s", schema=JsonSchema(Reading))
            producer = await client.create_producer(
                topic, schema=JsonSchema(Reading), batching_enabled=False
            )
            await producer.send(Reading(sensor="async", value=5))
            msg = await asyncio.wait_for(consumer.receive(), TIMEOUT)
            assert (msg.value().sensor, msg.value().value) == ("async", 5)
            with pytest.raises(pulsar.asyncio.PulsarException) as refused:
                await client.create_producer(topic, schema=StringSchema())
            assert refused.value.error() == pulsar.Result.IncompatibleSchema
        finally:
            await client.close()

    asyncio.run(run())


def test_consumer_schema_is_registered_or_refused(gateway, client, topic):
    # A typed consumer on a topic with no schema registers its own (version 0)...
    consumer = client.subscribe(topic, "typed", schema=AvroSchema(Reading))
    conn = RawConnection(gateway)
    conn.handshake()
    reply = get_schema(conn, topic)
    assert not reply.HasField("error_code")
    assert reply.schema.type == pb.Schema.Avro
    assert schema_version_number(reply.schema_version) == 0
    conn.close()
    # ...and a consumer whose schema cannot read the topic's is refused.
    with pytest.raises(pulsar.IncompatibleSchema):
        client.subscribe(topic, "other", schema=StringSchema())
    producer = client.create_producer(topic, schema=AvroSchema(Reading))
    producer.send(Reading(sensor="s", value=3))
    assert consumer.receive(int(TIMEOUT * 1000)).value().value == 3
