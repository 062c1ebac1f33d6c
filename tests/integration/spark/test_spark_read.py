"""Reading topics with Spark (``format("pulsar")``, batch and streaming) against real gateways.

The other side is always the official client (pulsar-client 3.13): what it produced must come
out of Spark with the columns it would see itself (payloads, keys, properties, publish and
event times, and ``__messageId`` equal to ``MessageId.serialize()``), whatever the batching,
compression, schema or partitioning. Streaming queries must deliver every message once across
triggers, restarts and a killed driver; lost data and bad options must fail with a message
naming the cause.
"""

from __future__ import annotations

import json
import os
import random
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulsar
import pytest
import redis
from pulsar.schema import AvroSchema, Double, Float, Integer, JsonSchema, Record, String
from pulsar.schema import Boolean as BooleanField
from pyspark.errors import PySparkException
from pyspark.sql.utils import CapturedException

import pyspark_pulsar
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from pyspark_pulsar.producer import OutgoingRow, PulsarConnection
from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread, free_port, stream_key, wait_for
from tests.integration.spark.spark_fixtures import (
    Collected,
    env_for_subprocess,
    read,
    read_stream,
    run_available_now,
    run_until,
    spark,
)

__all__ = ["spark"]  # the module-scoped session fixture, imported for pytest

RECEIVE_MS = int(TIMEOUT * 1000)
NS = "persistent://public/default"
META = ["__key", "__topic", "__messageId", "__publishTime", "__eventTime", "__messageProperties"]
#: The reference connector's encodings of MessageId.earliest / MessageId.latest.
EARLIEST_BYTES = [8, *[-1] * 9, 1, 16, *[-1] * 9, 1]
LATEST_BYTES = [8, *[-1] * 8, 127, 16, *[-1] * 8, 127]

SparkErrors = (PySparkException, CapturedException)


def full(name: str) -> str:
    return f"{NS}/{name}"


def admin_base(gw: GatewayThread) -> str:
    return f"{gw.http_url}/admin/v2/persistent/public/default"


def create_partitioned(gw: GatewayThread, topic: str, count: int) -> None:
    assert admin("PUT", f"{admin_base(gw)}/{topic}/partitions", count) == (204, None)


def signed(raw: bytes) -> list[int]:
    """Bytes as the reference connector's JSON holds them (Java's signed bytes)."""
    return [b - 256 if b > 127 else b for b in raw]


def received(client: Any, topic: str, count: int) -> list[Any]:
    """The first ``count`` messages of ``topic`` as the official client's reader sees them."""
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    try:
        return [reader.read_next(RECEIVE_MS) for _ in range(count)]
    finally:
        reader.close()


def expected_row(topic: str, msg: Any) -> dict[str, Any]:
    """The columns the official client's view of ``msg`` says Spark must give."""
    return {
        "value": msg.data(),
        "__key": msg.partition_key().encode() if msg.partition_key() else None,
        "__topic": msg.topic_name() if "-partition-" in msg.topic_name() else topic,
        "__messageId": msg.message_id().serialize(),
        "publish_ms": msg.publish_timestamp(),
        "event_ms": msg.event_timestamp() or None,
        "__messageProperties": msg.properties(),
    }


def actual_rows(frame: Any) -> list[dict[str, Any]]:
    """Rows of a ``pulsar`` frame with binary value, times as ms (no time zone involved)."""
    rows = frame.selectExpr(
        "value",
        "__key",
        "__topic",
        "__messageId",
        "unix_millis(__publishTime) AS publish_ms",
        "unix_millis(__eventTime) AS event_ms",
        "__messageProperties",
    ).collect()
    return [row.asDict() for row in rows]


def by_id(rows: list[dict[str, Any]]) -> dict[bytes, dict[str, Any]]:
    out = {row["__messageId"]: row for row in rows}
    assert len(out) == len(rows), "a message id appears twice"
    return out


def send_all(producer: Any, payloads: list[bytes], **kwargs: Any) -> list[Any]:
    """``send_async`` every payload with ``kwargs``, flush, and return the ids in order."""
    return send_each(producer, [(payload, kwargs) for payload in payloads])


def send_each(producer: Any, messages: list[tuple[bytes, dict[str, Any]]]) -> list[Any]:
    """``send_async`` every (payload, send arguments), flush, and return the ids in order."""
    ids: list[Any] = [None] * len(messages)

    def sent(index: int) -> Callable[[Any, Any], None]:
        def callback(result: Any, message_id: Any) -> None:
            assert result == pulsar.Result.Ok, result
            ids[index] = message_id

        return callback

    for index, (payload, kwargs) in enumerate(messages):
        producer.send_async(payload, sent(index), **kwargs)
    producer.flush()
    wait_for(lambda: all(i is not None for i in ids))
    return ids


def error_text(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    return str(excinfo.value)


# -- format registration -------------------------------------------------------------------


def test_format_is_found_without_register(
    spark: Any, gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    """The installed package is discovered by PySpark as ``pyspark_pulsar.DefaultSource``:
    this is the module's first use of the session and nothing registered the format."""
    producer = client_factory(gateway.url).create_producer(topic, batching_enabled=False)
    producer.send(b"found")
    assert pyspark_pulsar.DefaultSource.name() == "pulsar"
    rows = read(spark, gateway, topic=topic).load().select("value").collect()
    assert [row.value for row in rows] == [b"found"]


def test_register_makes_the_format_available(
    spark: Any, gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    producer = client_factory(gateway.url).create_producer(topic, batching_enabled=False)
    producer.send(b"registered")
    pyspark_pulsar.register(spark)
    rows = read(spark, gateway, topic=topic).load().select("value").collect()
    assert [row.value for row in rows] == [b"registered"]


# -- batch reads: every column as the official client sees it ------------------------------


def test_batch_read_of_single_and_batched_messages(
    spark: Any, gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    client = client_factory(gateway.url)
    single = client.create_producer(topic, batching_enabled=False)
    sent_ids = []
    for i in range(5):
        sent_ids.append(
            single.send(
                f"single-{i}".encode(),
                partition_key=f"key-{i}" if i != 2 else None,
                properties={"i": str(i), "kind": "single"} if i != 3 else {},
                event_timestamp=1_700_000_000_000 + i if i % 2 else None,
            )
        )
    batched = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=4,
        batching_max_publish_delay_ms=10_000,
    )
    payloads = [f"batched-{i}".encode() for i in range(8)]
    batch_ids = send_each(
        batched,
        [
            (
                payload,
                {
                    "partition_key": f"bk-{i}",
                    "properties": {"batch": str(i - i % 4)},
                    "event_timestamp": 1_600_000_000_000 + i,
                },
            )
            for i, payload in enumerate(payloads)
        ],
    )
    # two entries of four messages each
    assert [m.batch_index() for m in batch_ids] == [0, 1, 2, 3] * 2
    assert len({(m.ledger_id(), m.entry_id()) for m in batch_ids}) == 2

    expected = [expected_row(full(topic), m) for m in received(client, topic, 13)]
    rows = actual_rows(read(spark, gateway, topic=topic).load())

    assert rows == expected  # every column, in publish order
    assert [row["__messageId"] for row in rows] == [m.serialize() for m in sent_ids + batch_ids]
    assert [row["value"] for row in rows] == [f"single-{i}".encode() for i in range(5)] + payloads
    assert rows[2]["__key"] is None and rows[0]["__key"] == b"key-0"
    assert [row["event_ms"] for row in rows[:5]] == [
        None,
        1_700_000_000_001,
        None,
        1_700_000_000_003,
        None,
    ]
    assert rows[3]["__messageProperties"] == {}
    assert rows[12]["__messageProperties"] == {"batch": "4"}
    assert all(row["__topic"] == full(topic) for row in rows)
    now = int(time.time() * 1000)
    assert all(now - 60_000 < row["publish_ms"] <= now for row in rows)


@pytest.mark.parametrize(
    "compression", [pulsar.CompressionType.LZ4, pulsar.CompressionType.ZSTD], ids=str
)
def test_compressed_batches(
    spark: Any,
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    topic: str,
    compression: Any,
) -> None:
    client = client_factory(gateway.url)
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=10,
        batching_max_publish_delay_ms=10_000,
        compression_type=compression,
    )
    # compressible payloads, so the entries really are compressed
    payloads = [(f"{i:03d}-" + "abc" * 200).encode() for i in range(20)]
    ids = send_all(producer, payloads, properties={"c": "1"})
    rows = actual_rows(read(spark, gateway, topic=topic).load())
    assert [row["value"] for row in rows] == payloads
    assert [row["__messageId"] for row in rows] == [m.serialize() for m in ids]
    assert rows == [expected_row(full(topic), m) for m in received(client, topic, 20)]


def test_chunked_messages_are_read_whole(
    spark: Any,
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
    tmp_path: Path,
) -> None:
    """A payload over the gateway's max_message_size is stored as one entry per chunk; the
    reader gives it back whole, once, with the official client's id for it, also when a
    micro-batch ends between its chunks."""
    gw = gateway_factory(max_message_size=2000)
    client = client_factory(gw.url)
    producers = [
        client.create_producer(
            topic,
            chunking_enabled=True,
            batching_enabled=False,
            compression_type=compression,
        )
        for compression in (pulsar.CompressionType.NONE, pulsar.CompressionType.LZ4)
    ]
    payloads = [random.Random(i).randbytes(2500 + 1500 * i) for i in range(4)]
    for i, payload in enumerate(payloads):  # chunks of the two producers interleave
        producers[i % 2].send_async(payload, None, partition_key=f"k{i}", properties={"i": str(i)})
    producers[0].send_async(b"small", None)
    for producer in producers:
        producer.flush()
    expected = [expected_row(full(topic), m) for m in received(client, topic, 5)]
    assert sorted(row["value"] for row in expected) == sorted([*payloads, b"small"])

    assert by_id(actual_rows(read(spark, gw, topic=topic).load())) == by_id(expected)

    sink = Collected()
    frame = read_stream(
        spark, gw, topic=topic, startingOffsets="earliest", maxEntriesPerTrigger="4"
    ).load()
    run_until(frame, tmp_path / "checkpoint", sink, lambda: sink.count() >= 5)
    assert sorted(r.value for r in sink.rows) == sorted([*payloads, b"small"])
    assert {r["__messageId"] for r in sink.rows} == set(by_id(expected))


# -- schemas -------------------------------------------------------------------------------


class Order(Record):  # type: ignore[misc]
    id = Integer()
    name = String()
    price = Double()
    paid = BooleanField()
    weight = Float()


ORDERS = [
    Order(id=1, name="apple", price=1.25, paid=True, weight=0.5),
    Order(id=2, name="pear", price=2.5, paid=False, weight=1.5),
    Order(id=3, name=None, price=None, paid=None, weight=None),
]


def send_schema(client: Any, topic: str, schema: Any, values: list[Any]) -> list[Any]:
    producer = client.create_producer(topic, schema=schema, batching_enabled=False)
    ids = [producer.send(value) for value in values]
    producer.close()
    return ids


def send_raw_schema(
    gw: GatewayThread, topic: str, schema_type: int, name: str, payloads: list[bytes]
) -> None:
    """Publish with a schema type the official Python client cannot announce (BOOLEAN,
    TIME), through the connector's own binary producer."""
    schema = pb.Schema(name=name, schema_data=b"", type=schema_type)  # type: ignore[arg-type]
    with PulsarConnection(gw.url) as connection:
        producer = connection.create_producer(topic, f"raw-{topic}", schema=schema)
        for sequence, payload in enumerate(payloads):
            producer.send_batch([OutgoingRow(payload)], first_sequence_id=sequence)
        producer.flush()


def value_column(frame: Any) -> tuple[str, list[Any]]:
    field = frame.schema["value"]
    return field.dataType.simpleString(), [row.value for row in frame.select("value").collect()]


def test_primitive_schemas_type_the_value_column(
    spark: Any, gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    client = client_factory(gateway.url)
    send_schema(client, f"{topic}-string", pulsar.schema.StringSchema(), ["héllo", "", "w"])
    # The Python client announces no schema for its primitive types but STRING (its C++
    # core sends None), so these are published with the connector's own producer.
    primitives = {
        "int64": (pb.Schema.Int64, ">q", [0, -1, 2**62]),
        "int32": (pb.Schema.Int32, ">i", [7, -(2**31)]),
        "double": (pb.Schema.Double, ">d", [1.5, -0.25, 1e300]),
        "bool": (pb.Schema.Bool, ">?", [True, False]),
    }
    for name, (schema_type, fmt, values) in primitives.items():
        payloads = [struct.pack(fmt, v) for v in values]
        send_raw_schema(gateway, f"{topic}-{name}", schema_type, name.upper(), payloads)

    def load(name: str) -> Any:
        return read(spark, gateway, topic=f"{topic}-{name}").load()

    assert value_column(load("string")) == ("string", ["héllo", "", "w"])
    assert value_column(load("int64")) == ("bigint", [0, -1, 2**62])
    assert value_column(load("int32")) == ("int", [7, -(2**31)])
    assert value_column(load("double")) == ("double", [1.5, -0.25, 1e300])
    assert value_column(load("bool")) == ("boolean", [True, False])
    frame = load("string")
    assert frame.columns == ["value", *META]
    assert frame.schema["value"].nullable is False


@pytest.mark.parametrize("kind", ["json", "avro"])
def test_record_schemas_are_flattened_into_columns(
    spark: Any,
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    topic: str,
    kind: str,
) -> None:
    schema = JsonSchema(Order) if kind == "json" else AvroSchema(Order)
    ids = send_schema(client_factory(gateway.url), topic, schema, ORDERS)
    frame = read(spark, gateway, topic=topic).load()
    assert frame.columns == ["id", "name", "price", "paid", "weight", *META]
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    assert [types[c] for c in ("id", "name", "price", "paid", "weight")] == [
        "int",
        "string",
        "double",
        "boolean",
        "float",
    ]
    rows = frame.collect()
    assert [(r.id, r.name, r.price, r.paid, r.weight) for r in rows] == [
        (1, "apple", 1.25, True, 0.5),
        (2, "pear", 2.5, False, 1.5),
        # the client's Boolean field turns None into its default, False
        (3, None, None, False, None),
    ]
    assert [r["__messageId"] for r in rows] == [m.serialize() for m in ids]
    # the frame works like any other: a filter on a flattened field
    assert [r.name for r in frame.where("price > 2").select("name").collect()] == ["pear"]


def test_a_schema_without_a_column_form_is_refused_at_load(
    spark: Any, gateway: GatewayThread, topic: str
) -> None:
    # Pulsar's TIME (ms of the day as int64): the reference connector refuses it too
    send_raw_schema(gateway, topic, pb.Schema.Time, "TIME", [struct.pack(">q", 1000)])
    with pytest.raises(SparkErrors) as excinfo:
        read(spark, gateway, topic=topic).load()
    assert "We do not support Time schemas currently" in error_text(excinfo)


def test_topics_with_different_schemas(
    spark: Any, gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    client = client_factory(gateway.url)
    send_schema(client, f"{topic}-a", pulsar.schema.StringSchema(), ["text"])
    send_raw_schema(gateway, f"{topic}-b", pb.Schema.Int64, "INT64", [struct.pack(">q", 258)])
    topics = f"{topic}-a,{topic}-b"
    with pytest.raises(SparkErrors) as excinfo:
        read(spark, gateway, topics=topics).load()
    assert "allowDifferentTopicSchemas" in error_text(excinfo)

    frame = read(spark, gateway, topics=topics, allowDifferentTopicSchemas="true").load()
    assert frame.schema["value"].dataType.simpleString() == "binary"
    rows = {r["__topic"]: r.value for r in frame.collect()}
    assert rows == {full(f"{topic}-a"): b"text", full(f"{topic}-b"): struct.pack(">q", 258)}


# -- partitioned topics, topic lists, patterns ---------------------------------------------


def test_partitioned_topic_every_message_once(
    spark: Any, gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    topic = topic.replace("-partition", "-part")
    create_partitioned(gateway, topic, 3)
    client = client_factory(gateway.url)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
    payloads = [f"m-{i}".encode() for i in range(60)]
    ids: list[Any] = []
    for i, payload in enumerate(payloads):
        ids += send_all(producer, [payload], partition_key=f"key-{i % 7}")
    assert {m.partition() for m in ids} == {0, 1, 2}

    rows = actual_rows(read(spark, gateway, topic=topic).load())
    expected = by_id([expected_row(full(topic), m) for m in received(client, topic, 60)])
    assert by_id(rows) == expected
    assert sorted(row["value"] for row in rows) == sorted(payloads)
    assert {row["__topic"] for row in rows} == {f"{full(topic)}-partition-{i}" for i in range(3)}
    assert set(by_id(rows)) == {m.serialize() for m in ids}
    # one key, one partition
    partition_of_key: dict[bytes, str] = {}
    for row in rows:
        assert partition_of_key.setdefault(row["__key"], row["__topic"]) == row["__topic"]


def test_topics_option_and_topics_pattern(
    spark: Any, gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    client = client_factory(gateway.url)
    create_partitioned(gateway, f"{topic}-p", 2)
    for name in ("a", "b", "p"):
        producer = client.create_producer(f"{topic}-{name}", batching_enabled=False)
        for i in range(4):
            producer.send(f"{name}{i}".encode(), partition_key=str(i))
    client.create_producer(f"other-{topic}").send(b"not matched")

    def values(frame: Any) -> list[bytes]:
        return sorted(row.value for row in frame.select("value").collect())

    listed = read(spark, gateway, topics=f"{topic}-a, {full(topic)}-b").load()
    assert values(listed) == [f"{n}{i}".encode() for n in "ab" for i in range(4)]

    everything = [f"{n}{i}".encode() for n in "abp" for i in range(4)]
    pattern = read(spark, gateway, topicsPattern=f"{full(topic)}-.*").load()
    assert values(pattern) == everything
    assert {r["__topic"] for r in pattern.select("__topic").collect()} == {
        full(f"{topic}-a"),
        full(f"{topic}-b"),
        full(f"{topic}-p-partition-0"),
        full(f"{topic}-p-partition-1"),
    }
    # the short form (the default namespace) and the tenant/namespace form
    assert values(read(spark, gateway, topicsPattern=f"public/default/{topic}-[ab]").load()) == [
        f"{n}{i}".encode() for n in "ab" for i in range(4)
    ]


# -- starting and ending offsets, times ----------------------------------------------------


def test_offsets_json_in_the_reference_form(
    spark: Any, gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    client = client_factory(gateway.url)
    single = client.create_producer(topic, batching_enabled=False)
    ids = [single.send(f"s{i}".encode()) for i in range(6)]
    batched = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=4, batching_max_publish_delay_ms=10_000
    )
    ids += send_all(batched, [f"b{i}".encode() for i in range(4)])
    ids += [single.send(f"t{i}".encode()) for i in range(2)]
    values = [f"s{i}" for i in range(6)] + [f"b{i}" for i in range(4)] + ["t0", "t1"]

    def window(start: Any, end: Any, name: str = full(topic)) -> list[str]:
        options = {}
        if start is not None:
            options["startingOffsets"] = json.dumps({name: start})
        if end is not None:
            options["endingOffsets"] = json.dumps({name: end})
        frame = read(spark, gateway, topic=topic, **options).load()
        return [row.value.decode() for row in frame.select("value").collect()]

    def offset(index: int) -> list[int]:
        return signed(ids[index].serialize())

    # a starting id is inclusive, an ending id inclusive of its whole entry
    assert window(offset(2), offset(4)) == values[2:5]
    # the reference's encodings of MessageId.earliest and MessageId.latest
    assert window(EARLIEST_BYTES, LATEST_BYTES) == values
    assert window(offset(9), None) == values[9:]
    assert window(None, offset(0)) == values[:1]
    # ids inside a batch: the start from that message on, the end through the entry
    assert window(offset(7), offset(7)) == values[7:10]
    assert window(offset(1), offset(6)) == values[1:10]
    # the topic named in the JSON by its short name, and "earliest"/"latest" strings
    assert window(offset(10), "latest", topic) == values[10:]
    # an end before the start: nothing
    assert window(offset(5), offset(1)) == []
    # one option JSON for several topics: each its own start
    other = client.create_producer(f"{topic}-other", batching_enabled=False)
    other_ids = [other.send(f"o{i}".encode()) for i in range(3)]
    starts = {full(topic): offset(10), full(f"{topic}-other"): signed(other_ids[1].serialize())}
    frame = read(
        spark, gateway, topics=f"{topic},{topic}-other", startingOffsets=json.dumps(starts)
    ).load()
    assert sorted(row.value for row in frame.select("value").collect()) == [
        b"o1",
        b"o2",
        b"t0",
        b"t1",
    ]


def test_starting_and_ending_time(
    spark: Any, gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    producer = client_factory(gateway.url).create_producer(topic, batching_enabled=False)
    marks = []
    for i in range(3):
        producer.send(f"m{2 * i}".encode())
        producer.send(f"m{2 * i + 1}".encode())
        time.sleep(0.05)
        marks.append(int(time.time() * 1000))
        time.sleep(0.05)

    def values(**options: str) -> list[str]:
        frame = read(spark, gateway, topic=topic, **options).load()
        return [row.value.decode() for row in frame.select("value").collect()]

    assert values(startingTime=str(marks[0])) == ["m2", "m3", "m4", "m5"]
    assert values(startingTime=json.dumps({full(topic): marks[1]})) == ["m4", "m5"]
    assert values(startingTime=str(marks[2])) == []
    assert values(startingTime=str(marks[0]), endingTime=str(marks[1])) == ["m2", "m3"]
    assert values(startingTime=json.dumps({topic: -1}), endingTime=str(marks[0])) == ["m0", "m1"]


def test_batch_query_refuses_latest_start(
    spark: Any, gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    client_factory(gateway.url).create_producer(topic).send(b"x")
    with pytest.raises(SparkErrors) as excinfo:
        read(spark, gateway, topic=topic, startingOffsets="latest").load().collect()
    assert "'startingOffsets': 'latest' is not allowed for a batch query" in error_text(excinfo)
    with pytest.raises(SparkErrors) as excinfo:
        read(spark, gateway, topic=topic, endingOffsets="earliest").load()
    assert "'endingOffsets': 'earliest' is not allowed" in error_text(excinfo)


# -- bad input: refused at load(), the option or the cause named ---------------------------


def test_bad_options_fail_at_load_naming_the_option(
    spark: Any, gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    client_factory(gateway.url).create_producer(topic).send(b"x")

    def refused(frame: Any) -> str:
        with pytest.raises(SparkErrors) as excinfo:
            frame.load()
        return error_text(excinfo)

    no_url = spark.read.format("pulsar").option("topic", topic)
    assert "option 'service.url' is required" in refused(no_url)
    both = refused(read(spark, gateway, topic=topic, topics=f"{topic},{topic}-2"))
    assert "exactly one of the options 'topic', 'topics' or 'topicsPattern'" in both
    assert "(got topic, topics)" in both
    assert "unknown option 'colour'" in refused(read(spark, gateway, topic=topic, colour="red"))
    assert "'pulsar.client.foo': foo not supported by pulsar" in refused(
        read(spark, gateway, topic=topic, **{"pulsar.client.foo": "1"})
    )
    bad_json = refused(read(spark, gateway, topic=topic, startingOffsets="{not json"))
    assert "option 'startingOffsets'" in bad_json and "{not json" in bad_json
    assert f"Topic {full(topic)}-missing does not exist" in refused(
        read(spark, gateway, topic=f"{topic}-missing")
    )
    # keys are case-insensitive; values are checked whatever the key's case
    zero = refused(read(spark, gateway, topic=topic, MAXENTRIESPERTRIGGER="0"))
    assert "option 'maxEntriesPerTrigger': expected a positive integer, got '0'" in zero
    # offsets for a topic the query does not read (a misspelt name)
    elsewhere = json.dumps({f"{topic}-typo": EARLIEST_BYTES})
    assert f"option 'startingOffsets' names {full(topic)}-typo, which is not among" in refused(
        read(spark, gateway, topic=topic, startingOffsets=elsewhere)
    )


def test_redis_down_names_redis_and_the_option(
    spark: Any, gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    client_factory(gateway.url).create_producer(topic).send(b"x")
    closed = f"redis://127.0.0.1:{free_port()}"
    with pytest.raises(SparkErrors) as excinfo:
        read(spark, gateway, topic=topic, **{"redis.url": closed}).load()
    text = error_text(excinfo)
    assert f"cannot reach Redis at {closed}" in text and "'redis.url'" in text
    # the gateway's own answer is where the executors read by default
    assert [r.value for r in read(spark, gateway, topic=topic).load().collect()] == [b"x"]


# -- streaming -----------------------------------------------------------------------------


def entry_of(message_id: bytes) -> tuple[int, int, int]:
    """(partition, ledger, entry) of a ``__messageId``: which stored entry a row came from."""
    parsed = pulsar.MessageId.deserialize(message_id)
    return parsed.partition(), parsed.ledger_id(), parsed.entry_id()


def test_stream_available_now_reads_everything_then_only_new_messages(
    spark: Any,
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    topic: str,
    tmp_path: Path,
) -> None:
    client = client_factory(gateway.url)
    single = client.create_producer(topic, batching_enabled=False)
    batched = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=5, batching_max_publish_delay_ms=10_000
    )
    first = [single.send(f"a{i}".encode(), partition_key=f"k{i}") for i in range(5)]
    first += send_all(batched, [f"b{i}".encode() for i in range(5)])
    checkpoint = tmp_path / "checkpoint"

    def run() -> list[Any]:
        sink = Collected()
        frame = read_stream(spark, gateway, topic=topic, startingOffsets="earliest").load()
        run_available_now(frame, checkpoint, sink)
        return sink.rows

    rows = run()
    assert [r.value for r in rows] == [f"a{i}".encode() for i in range(5)] + [
        f"b{i}".encode() for i in range(5)
    ]
    assert [r["__messageId"] for r in rows] == [m.serialize() for m in first]
    assert [r["__key"] for r in rows[:5]] == [f"k{i}".encode() for i in range(5)]

    later = [single.send(f"c{i}".encode()) for i in range(3)]
    later += send_all(batched, [f"d{i}".encode() for i in range(2)])
    rows = run()
    assert [r.value for r in rows] == [b"c0", b"c1", b"c2", b"d0", b"d1"]
    assert [r["__messageId"] for r in rows] == [m.serialize() for m in later]
    assert run() == []  # nothing new: nothing again


def test_stream_discovers_new_topics_and_partitions(
    spark: Any,
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    topic: str,
    tmp_path: Path,
) -> None:
    client = client_factory(gateway.url)
    create_partitioned(gateway, f"{topic}-p", 2)
    client.create_producer(f"{topic}-a").send(b"a0")
    partitioned = client.create_producer(
        f"{topic}-p", batching_enabled=False, message_router=lambda msg, n: int(msg.data()[1:]) % n
    )
    for i in range(4):
        partitioned.send(f"p{i}".encode())
    checkpoint = tmp_path / "checkpoint"

    def run() -> list[Any]:
        sink = Collected()
        frame = read_stream(
            spark, gateway, topicsPattern=f"{full(topic)}-.*", startingOffsets="earliest"
        ).load()
        run_available_now(frame, checkpoint, sink)
        return sorted((r["__topic"], r.value) for r in sink.rows)

    assert run() == [
        (full(f"{topic}-a"), b"a0"),
        (full(f"{topic}-p-partition-0"), b"p0"),
        (full(f"{topic}-p-partition-0"), b"p2"),
        (full(f"{topic}-p-partition-1"), b"p1"),
        (full(f"{topic}-p-partition-1"), b"p3"),
    ]
    # a new matching topic, and a third partition, between two runs of the query
    client.create_producer(f"{topic}-b").send(b"b0")
    assert admin("POST", f"{admin_base(gateway)}/{topic}-p/partitions", 3) == (204, None)
    grown = client.create_producer(
        f"{topic}-p", batching_enabled=False, message_router=lambda msg, n: int(msg.data()[1:]) % n
    )
    for i in range(4, 7):
        grown.send(f"p{i}".encode())
    client.create_producer(f"{topic}-a").send(b"a1")
    client.create_producer(f"other-{topic}").send(b"not matched")
    assert run() == [
        (full(f"{topic}-a"), b"a1"),
        (full(f"{topic}-b"), b"b0"),
        (full(f"{topic}-p-partition-0"), b"p6"),
        (full(f"{topic}-p-partition-1"), b"p4"),
        (full(f"{topic}-p-partition-2"), b"p5"),
    ]


def test_max_entries_per_trigger_bounds_each_micro_batch(
    spark: Any,
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    topic: str,
    tmp_path: Path,
) -> None:
    topic = topic.replace("-partition", "-part")
    create_partitioned(gateway, topic, 2)
    client = client_factory(gateway.url)
    single = client.create_producer(
        topic, batching_enabled=False, message_router=lambda msg, n: int(msg.data()[1:]) % n
    )
    for i in range(10):
        single.send(f"s{i}".encode())
    batched = client.create_producer(
        f"{topic}-partition-1",
        batching_enabled=True,
        batching_max_messages=3,
        batching_max_publish_delay_ms=10_000,
    )
    send_all(batched, [b"b0", b"b1", b"b2"])
    expected = sorted([f"s{i}".encode() for i in range(10)] + [b"b0", b"b1", b"b2"])

    sink = Collected()
    frame = read_stream(
        spark, gateway, topic=topic, startingOffsets="earliest", maxEntriesPerTrigger="2"
    ).load()
    run_until(frame, tmp_path / "checkpoint", sink, lambda: sink.count() >= len(expected))

    assert sorted(r.value for r in sink.rows) == expected  # all of it, once
    batches = [rows for rows in sink.batches.values() if rows]
    assert len(batches) >= 6  # 11 entries, at most 2 a batch
    for rows in batches:
        entries = {entry_of(r["__messageId"]) for r in rows}
        assert len(entries) <= 2, rows
        # shared by the partitions with new entries: at most one each here
        assert len({r["__topic"] for r in rows}) == len(entries)


JOB = Path(__file__).with_name("spark_stream_job.py")


class StreamJob:
    """``spark_stream_job.py`` in its own process group, so a SIGKILL takes its JVM and
    Python workers down with it, as a crashed driver host would."""

    def __init__(self, gw: GatewayThread, topic: str, output: Path, checkpoint: Path) -> None:
        self.log_path = checkpoint.parent / "job.log"
        args = [gw.url, gw.http_url, topic, str(output), str(checkpoint), "10"]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(JOB), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env_for_subprocess(),
                start_new_session=True,
            )

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the job exited:\n{self.log_path.read_text()[-3000:]}")
        return True

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(TIMEOUT)


def committed(checkpoint: Path) -> int:
    """How many micro-batches the job has committed (``commits/<n>`` files)."""
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


@pytest.mark.timeout(240)
def test_exactly_once_across_killed_drivers(
    spark: Any,
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    topic: str,
    tmp_path: Path,
) -> None:
    total = 300
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    output, checkpoint = tmp_path / "output", tmp_path / "checkpoint"
    producer = client_factory(gateway.url).create_producer(
        topic, batching_enabled=True, batching_max_messages=4, batching_max_publish_delay_ms=5
    )
    ids: list[Any] = [None] * total
    sending = threading.Thread(target=produce_slowly, args=(producer, ids), daemon=True)
    sending.start()

    def count() -> int:
        if not (output / "_spark_metadata").exists():
            return 0
        return int(spark.read.parquet(str(output)).count())

    jobs = []
    try:
        for _ in range(2):  # killed twice at a random moment after a commit
            job = StreamJob(gateway, topic, output, checkpoint)
            jobs.append(job)
            before = committed(checkpoint)
            wait_for(lambda j=job, b=before: j.alive() and committed(checkpoint) > b, 9 * TIMEOUT)
            time.sleep(rng.uniform(0, 1.5))
            job.kill()
        sending.join(6 * TIMEOUT)
        assert all(i is not None for i in ids)
        job = StreamJob(gateway, topic, output, checkpoint)
        jobs.append(job)
        wait_for(lambda: job.alive() and count() >= total, 9 * TIMEOUT, interval=1)
    finally:
        for job in jobs:
            job.kill()

    rows = spark.read.parquet(str(output)).collect()
    values = sorted(int(r.value) for r in rows)
    assert values == list(range(total)), f"seed {seed}: gaps or duplicates"
    assert sorted(r.id for r in rows) == sorted(i.serialize() for i in ids)
    assert committed(checkpoint) >= 3


def produce_slowly(producer: Any, ids: list[Any]) -> None:
    """Send ``len(ids)`` numbered messages, ten every 0.3 s, recording their ids."""
    for index in range(len(ids)):

        def sent(result: Any, message_id: Any, index: int = index) -> None:
            ids[index] = message_id

        producer.send_async(str(index).encode(), sent)
        if index % 10 == 9:
            time.sleep(0.3)  # ~9 s in all: the first job starts and dies meanwhile
    producer.flush()


# -- lost data -----------------------------------------------------------------------------


def stream_id_of(message_id: Any) -> str:
    """The Redis stream id of a message's entry (ledger-entry, the gateway's mapping)."""
    return f"{message_id.ledger_id()}-{message_id.entry_id()}"


def test_trimmed_data_fails_the_stream_unless_fail_on_data_loss_is_false(
    spark: Any,
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    redis_clean: redis.Redis,
    topic: str,
    tmp_path: Path,
) -> None:
    producer = client_factory(gateway.url).create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(5)]
    checkpoint = tmp_path / "checkpoint"

    def run(**options: str) -> list[bytes]:
        sink = Collected()
        frame = read_stream(
            spark, gateway, topic=topic, startingOffsets="earliest", **options
        ).load()
        run_available_now(frame, checkpoint, sink)
        return [r.value for r in sink.rows]

    assert run() == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    # retention removing what the query has read, its last entry included, is no loss
    ids += [producer.send(f"m{i}".encode()) for i in range(5, 10)]
    assert redis_clean.xtrim(stream_key(topic), minid=stream_id_of(ids[5]), approximate=False) == 5
    assert run() == [b"m5", b"m6", b"m7", b"m8", b"m9"]
    # even when all of it went and new entries came after
    assert redis_clean.xtrim(stream_key(topic), maxlen=0, approximate=False) == 5
    ids += [producer.send(f"m{i}".encode()) for i in range(10, 12)]
    assert run() == [b"m10", b"m11"]

    # entries it has not read yet: the query fails, naming the option
    ids += [producer.send(f"m{i}".encode()) for i in range(12, 17)]
    assert redis_clean.xtrim(stream_key(topic), minid=stream_id_of(ids[14]), approximate=False) == 4
    with pytest.raises(SparkErrors) as excinfo:
        run()
    text = error_text(excinfo)
    assert "failOnDataLoss" in text and full(topic) in text
    # and with failOnDataLoss=false it goes on with what remains
    assert run(failOnDataLoss="false") == [b"m14", b"m15", b"m16"]


def test_a_topic_deleted_under_a_running_query(
    spark: Any,
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    topic: str,
    tmp_path: Path,
) -> None:
    client = client_factory(gateway.url)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"before-0")
    producer.send(b"before-1")
    checkpoint = tmp_path / "checkpoint"
    sink = Collected()
    frame = read_stream(spark, gateway, topic=topic, startingOffsets="earliest").load()
    query = (
        frame.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_for(lambda: sink.count() == 2, 3 * TIMEOUT)
        producer.close()
        assert admin("DELETE", f"{admin_base(gateway)}/{topic}?force=true") == (204, None)
        wait_for(lambda: query.exception() is not None, 3 * TIMEOUT)
        text = str(query.exception())
        assert f"{full(topic)} is gone" in text and "failOnDataLoss" in text
    finally:
        query.stop()
    assert [r.value for r in sink.rows] == [b"before-0", b"before-1"]

    # created again: a restarted query reads what the new topic holds, nothing twice
    client.create_producer(topic, batching_enabled=False).send(b"after")
    again = Collected()
    frame = read_stream(spark, gateway, topic=topic, startingOffsets="earliest").load()
    run_available_now(frame, checkpoint, again)
    assert [r.value for r in again.rows] == [b"after"]


def test_a_deleted_topic_with_fail_on_data_loss_false(
    spark: Any,
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    topic: str,
    tmp_path: Path,
) -> None:
    client = client_factory(gateway.url)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"before")
    sink = Collected()
    frame = read_stream(
        spark, gateway, topic=topic, startingOffsets="earliest", failOnDataLoss="false"
    ).load()
    query = (
        frame.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_for(lambda: sink.count() == 1, 3 * TIMEOUT)
        producer.close()
        assert admin("DELETE", f"{admin_base(gateway)}/{topic}?force=true") == (204, None)
        time.sleep(1)  # a few triggers over the deleted topic
        assert query.exception() is None and query.isActive
        client.create_producer(topic, batching_enabled=False).send(b"after")
        wait_for(lambda: query.exception() is not None or sink.count() == 2, 3 * TIMEOUT)
        assert query.exception() is None
    finally:
        query.stop()
    assert [r.value for r in sink.rows] == [b"before", b"after"]
