"""Spark writes (``df.write`` / ``writeStream`` ``.format("pulsar")``) against real gateways.

What a Spark job writes must look to everyone else exactly as if a producer had sent it:
the official client (pulsar-client 3.13) sees the payloads, keys, properties and event
times; the WebSocket API sees the messages; the topic gets the schema the value column
implies (and a topic with another schema refuses the write); keyed rows of a partitioned
topic land on the partition the Java client would pick. Retried tasks and replayed
micro-batches publish nothing twice when the namespace has the ``deduplication`` policy.

One local Spark session serves the module (``spark_fixtures.spark``: starting one costs
seconds); the test of task retries needs ``local[N,F]`` (a local master allows no task retry
otherwise), so it runs a small driver script in a subprocess with its own session.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import struct
import subprocess
import sys
import textwrap
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pulsar
import pytest
import redis
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.utils import CapturedException

from pulsar_gateway.core import java_string_hash
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread, stream_key
from tests.integration.spark.spark_fixtures import env_for_subprocess, spark
from tests.rawclient import RawConnection
from tests.wsclient import connect, consumer_url, unb64

__all__ = ["spark"]  # the module-scoped session fixture, imported for pytest

RECEIVE_MS = int(TIMEOUT * 1000)
NAMESPACE_URL = "/admin/v2/namespaces/public/default"
#: A Spark job or query should be done by then, even on a busy two-core machine.
SPARK_TIMEOUT = 12 * TIMEOUT

Client = Callable[..., Any]
SparkErrors = (PySparkException, CapturedException)


# -- helpers -------------------------------------------------------------------------------


def writer(df: DataFrame, gateway: GatewayThread, **options: str) -> DataFrameWriter:
    """``df.write.format("pulsar")`` at ``gateway`` in append mode, with ``options`` (a
    ``topic`` among them, usually)."""
    out = df.write.format("pulsar").option("service.url", gateway.url).mode("append")
    for key, value in options.items():
        out = out.option(key, value)
    return out


def read(spark: SparkSession, gateway: GatewayThread, topic: str) -> DataFrame:
    return (
        spark.read.format("pulsar")
        .option("service.url", gateway.url)
        .option("admin.url", gateway.http_url)
        .option("topic", topic)
        .load()
    )


def consume(client: Any, topic: str, count: int, sub: str = "check") -> list[Any]:
    """``count`` messages from the start of ``topic``, then check nothing more comes."""
    consumer = client.subscribe(topic, sub, initial_position=pulsar.InitialPosition.Earliest)
    messages = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(count)]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=500)
    for message in messages:
        consumer.acknowledge(message)
    consumer.close()
    return messages


def topic_schema(gateway: GatewayThread, topic: str) -> Any:
    """GET_SCHEMA's answer for ``topic`` (``error_code`` TopicNotFound: no schema)."""
    with RawConnection(gateway) as conn:
        conn.handshake()
        return conn.request(
            pb.BaseCommand.Type.GET_SCHEMA,
            pb.BaseCommand.Type.GET_SCHEMA_RESPONSE,
            topic=f"persistent://public/default/{topic}",
        ).getSchemaResponse


def schema_type(gateway: GatewayThread, topic: str) -> str | None:
    answer = topic_schema(gateway, topic)
    if answer.HasField("error_code"):
        assert answer.error_code == pb.TopicNotFound, answer
        return None
    return str(pb.Schema.Type.Name(answer.schema.type)).upper()


def enable_deduplication(gateway: GatewayThread) -> None:
    assert admin("POST", f"{gateway.http_url}{NAMESPACE_URL}/deduplication", True)[0] == 204


def ms(value: dt.datetime) -> int:
    return int(value.timestamp() * 1000)


# -- batch writes: what the official client sees -------------------------------------------

EVENT = dt.datetime(2024, 5, 17, 9, 30, 15, 123000, tzinfo=dt.UTC)


@pytest.mark.parametrize("event_type", ["timestamp", "bigint"])
def test_rows_arrive_with_keys_properties_and_event_times(
    spark: SparkSession,
    gateway: GatewayThread,
    client_factory: Client,
    redis_clean: redis.Redis,
    topic: str,
    event_type: str,
) -> None:
    events = [EVENT + dt.timedelta(seconds=i) for i in range(20)]
    rows = [
        (
            f"order-{i}",
            f"customer-{i % 4}" if i % 5 else None,
            {"i": str(i), "source": "spark"},
            events[i] if event_type == "timestamp" else ms(events[i]),
        )
        for i in range(20)
    ]
    df = spark.createDataFrame(
        rows,
        "value string, __key string, __messageProperties map<string,string>, "
        f"__eventTime {event_type}",
    ).coalesce(1)  # one task: the messages keep the rows' order
    writer(df, gateway, topic=topic).save()

    messages = consume(client_factory(gateway.url), topic, 20)
    assert [m.data() for m in messages] == [r[0].encode() for r in rows]
    assert [m.value() for m in messages] == [r[0].encode() for r in rows]
    assert [m.partition_key() or None for m in messages] == [r[1] for r in rows]
    assert [m.properties() for m in messages] == [r[2] for r in rows]
    assert [m.event_timestamp() for m in messages] == [ms(e) for e in events]
    # one task's rows are one batch entry, as the official client's batching producer makes
    ids = [m.message_id() for m in messages]
    assert [i.batch_index() for i in ids] == list(range(20))
    assert redis_clean.xlen(stream_key(topic)) == 1
    assert schema_type(gateway, topic) == "STRING"


def test_binary_values_are_written_as_is_without_a_schema(
    spark: SparkSession, gateway: GatewayThread, client_factory: Client, topic: str
) -> None:
    payloads = [bytes([i, 0xFF, 0x00, 0x80]) * (i + 1) for i in range(10)] + [b""]
    df = spark.createDataFrame([(p,) for p in payloads], "value binary").coalesce(1)
    writer(df, gateway, topic=topic).save()

    assert [m.data() for m in consume(client_factory(gateway.url), topic, 11)] == payloads
    assert schema_type(gateway, topic) is None
    back = read(spark, gateway, topic).select("value").collect()
    assert sorted(bytes(r.value) for r in back) == sorted(payloads)


@pytest.mark.parametrize(
    ("spark_type", "pulsar_type", "values", "layout"),
    [
        ("int", "INT32", [0, 1, -7, 2**31 - 1], ">i"),
        ("bigint", "INT64", [0, -1, 2**40, -(2**63)], ">q"),
        ("double", "DOUBLE", [0.5, -1.25, 1e300, 3.0], ">d"),
        ("boolean", "BOOL", [True, False, True, True], "?"),
    ],
)
def test_a_typed_value_gets_its_schema_and_reads_back_typed(
    spark: SparkSession,
    gateway: GatewayThread,
    client_factory: Client,
    topic: str,
    spark_type: str,
    pulsar_type: str,
    values: list[Any],
    layout: str,
) -> None:
    df = spark.createDataFrame([(v,) for v in values], f"value {spark_type}").coalesce(1)
    writer(df, gateway, topic=topic).save()

    assert schema_type(gateway, topic) == pulsar_type
    # on the wire: Pulsar's encoding of the primitive (big-endian, one byte per boolean)
    raw = [m.data() for m in consume(client_factory(gateway.url), topic, len(values))]
    assert [struct.unpack(layout, r)[0] for r in raw] == values
    back = read(spark, gateway, topic)
    assert back.schema["value"].dataType.simpleString() == spark_type
    assert [r.value for r in back.select("value").collect()] == values


def test_several_columns_are_an_avro_record_read_back_flattened(
    spark: SparkSession, gateway: GatewayThread, client_factory: Client, topic: str
) -> None:
    schema = (
        "id int, name string, amount double, paid boolean, at timestamp, day date, "
        "tags array<string>, attrs map<string,string>, "
        "address struct<city:string,zip:int>, note string, "
        # records nested at two places under one field name, and records in an array
        "billing struct<address:struct<city:string,zip:int>>, "
        "lines array<struct<sku:string,qty:int>>"
    )
    rows = [
        (
            i,
            f"name-{i}",
            i * 1.5,
            i % 2 == 0,
            dt.datetime(2024, 1, 1, 12, 0, i),
            dt.date(2024, 1, 1 + i),
            [f"t{j}" for j in range(i)],
            {"k": str(i)},
            (f"city-{i}", 10000 + i),
            None if i % 3 == 0 else f"note {i}",
            ((f"bill-{i}", i),),
            [(f"sku-{j}", j) for j in range(i % 3)],
        )
        for i in range(6)
    ]
    df = spark.createDataFrame(rows, schema)
    writer(df, gateway, topic=topic).save()

    answer = topic_schema(gateway, topic)
    assert str(pb.Schema.Type.Name(answer.schema.type)).upper() == "AVRO"
    definition = json.loads(answer.schema.schema_data)
    assert definition["name"] == "topLevelRecord"
    assert [f["name"] for f in definition["fields"]] == [f.split()[0] for f in schema.split(", ")]
    # what an Avro consumer decodes with the registered schema
    parsed = fastavro.parse_schema(definition)
    raw = consume(client_factory(gateway.url), topic, 6)
    decoded = sorted(
        (fastavro.schemaless_reader(io.BytesIO(m.data()), parsed) for m in raw),
        key=lambda r: r["id"],
    )
    assert [(r["id"], r["name"], r["tags"], r["address"]) for r in decoded] == [
        (i, f"name-{i}", [f"t{j}" for j in range(i)], {"city": f"city-{i}", "zip": 10000 + i})
        for i in range(6)
    ]
    # read back: the record's fields as columns, equal to what was written
    back = read(spark, gateway, topic)
    assert back.columns[:12] == df.columns
    assert back.schema.fields[:12] == df.schema.fields
    assert sorted(back.select(*df.columns).collect()) == sorted(df.collect())


def test_a_struct_column_is_the_record(
    spark: SparkSession, gateway: GatewayThread, topic: str
) -> None:
    df = spark.createDataFrame(
        [((i, f"n{i}"), f"k{i}") for i in range(4)], "value struct<a:int,b:string>, __key string"
    )
    writer(df, gateway, topic=topic).save()
    assert schema_type(gateway, topic) == "AVRO"
    back = read(spark, gateway, topic).selectExpr("a", "b", "CAST(__key AS STRING) AS k")
    assert sorted(tuple(r) for r in back.collect()) == [(i, f"n{i}", f"k{i}") for i in range(4)]


def test_a_topic_read_is_copied_to_another_topic_as_is(
    spark: SparkSession, gateway: GatewayThread, client_factory: Client, topic: str
) -> None:
    """A DataFrame read with format("pulsar") can be written back unchanged: its
    ``__messageId``/``__publishTime`` are ignored, its binary ``__key`` is the key."""
    client = client_factory(gateway.url)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(
            f"m{i}".encode(),
            partition_key=f"k{i}",
            properties={"p": str(i)},
            event_timestamp=1_000 + i,
        )
    producer.close()

    copy = f"{topic}-copy"
    source = read(spark, gateway, topic)
    writer(source, gateway, topic=copy).save()
    messages = sorted(consume(client, copy, 5), key=lambda m: m.data())
    assert [
        (m.data(), m.partition_key(), m.properties(), m.event_timestamp()) for m in messages
    ] == [(f"m{i}".encode(), f"k{i}", {"p": str(i)}, 1_000 + i) for i in range(5)]


def test_rows_go_to_the_topic_of_their_topic_column(
    spark: SparkSession, gateway: GatewayThread, client_factory: Client, topic: str
) -> None:
    targets = [f"{topic}-a", f"persistent://public/default/{topic}-b"]
    rows = [(f"v{i}", targets[i % 2]) for i in range(10)]
    df = spark.createDataFrame(rows, "value string, __topic string").coalesce(1)
    writer(df, gateway).save()

    client = client_factory(gateway.url)
    assert [m.data() for m in consume(client, targets[0], 5)] == [
        f"v{i}".encode() for i in range(0, 10, 2)
    ]
    assert [m.data() for m in consume(client, targets[1], 5)] == [
        f"v{i}".encode() for i in range(1, 10, 2)
    ]


def test_keyed_rows_of_a_partitioned_topic_go_where_the_java_client_puts_them(
    spark: SparkSession, gateway: GatewayThread, client_factory: Client, topic: str
) -> None:
    url = f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/partitions"
    assert admin("PUT", url, 3) == (204, None)
    keys = [f"customer-{k}" for k in range(12)]
    rows = [(f"{key}:{n}", key) for n in range(10) for key in keys]
    df = spark.createDataFrame(rows, "value string, __key string").repartition(2)
    writer(df, gateway, topic=topic).save()

    messages = consume(client_factory(gateway.url), topic, len(rows))
    partitions: dict[str, set[str]] = defaultdict(set)
    sequence: dict[str, list[int]] = defaultdict(list)
    for message in messages:
        key = message.partition_key()
        partitions[key].add(message.topic_name())
        sequence[key].append(int(message.data().decode().rsplit(":", 1)[1]))
    assert sorted(partitions) == sorted(keys)
    full = f"persistent://public/default/{topic}-partition-"
    for key in keys:
        # each key on one partition: the one JavaStringHash picks (the Java client's default)
        assert partitions[key] == {f"{full}{java_string_hash(key) % 3}"}, key
    assert len({p for ps in partitions.values() for p in ps}) == 3  # spread over all three
    # nothing lost or doubled per key (order across the two tasks is Spark's own)
    assert all(sorted(ns) == list(range(10)) for ns in sequence.values())


async def test_a_websocket_consumer_sees_what_spark_writes(
    spark: SparkSession, gateway: GatewayThread, topic: str
) -> None:
    def write() -> None:
        # Built in the writing thread: Spark looks a Python data source up in the JVM
        # thread's active session, which createDataFrame sets (a DataFrame made in another
        # thread would fail here with DATA_SOURCE_NOT_FOUND).
        df = spark.createDataFrame(
            [("from spark", "k1", {"origin": "spark"}, 1_700_000_000_000)],
            "value string, __key string, __messageProperties map<string,string>, "
            "__eventTime bigint",
        )
        writer(df, gateway, topic=topic).save()

    async with connect(consumer_url(gateway, topic, "ws-sub")) as ws:
        # the write blocks: off the loop, so the WebSocket session stays served
        await asyncio.to_thread(write)
        message = await ws.receive()
        assert unb64(message["payload"]) == b"from spark"
        assert message["key"] == "k1"
        assert message["properties"] == {"origin": "spark"}
        assert message["eventTime"] == "2023-11-14T22:13:20Z"
        await ws.ack(message)
        assert await ws.nothing_within(0.3)


# -- refusals ------------------------------------------------------------------------------


def test_int_values_to_a_string_topic_fail_naming_both_schemas(
    spark: SparkSession, gateway: GatewayThread, client_factory: Client, topic: str
) -> None:
    client = client_factory(gateway.url)
    producer = client.create_producer(topic, schema=pulsar.schema.StringSchema())
    producer.send("first")
    producer.close()

    df = spark.createDataFrame([(1,), (2,)], "count int")
    with pytest.raises(SparkErrors, match="IncompatibleSchema") as failure:
        writer(df, gateway, topic=topic).save()
    message = str(failure.value)
    assert f"cannot write to persistent://public/default/{topic}" in message
    assert "the topic has schema STRING" in message
    assert "column 'count' (int) as INT32" in message
    assert [m.data() for m in consume(client, topic, 1)] == [b"first"]  # nothing written
    assert schema_type(gateway, topic) == "STRING"


def test_overwrite_is_refused(spark: SparkSession, gateway: GatewayThread, topic: str) -> None:
    df = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(SparkErrors, match="Save mode overwrite not allowed for Pulsar"):
        writer(df, gateway, topic=topic).mode("overwrite").save()


def test_a_write_without_topic_option_or_topic_column_names_the_missing_topic(
    spark: SparkSession, gateway: GatewayThread
) -> None:
    df = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(SparkErrors, match="topic option required when no '__topic' attribute"):
        writer(df, gateway).save()


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("bogusOption", "unknown option 'bogusoption' for a Pulsar sink"),
        ("pulsar.producer.bogus", "option 'pulsar.producer.bogus': bogus not supported"),
    ],
)
def test_an_unknown_option_fails_naming_it(
    spark: SparkSession, gateway: GatewayThread, topic: str, option: str, expected: str
) -> None:
    df = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(SparkErrors, match=expected):
        writer(df, gateway, topic=topic, **{option: "1"}).save()


# -- exactly once: a retried task ----------------------------------------------------------

RETRY_DRIVER = textwrap.dedent(
    """
    import sys, time

    import redis
    from pyspark import TaskContext
    from pyspark.sql import SparkSession

    service_url, topic, redis_url, stream = sys.argv[1:5]
    spark = (
        SparkSession.builder.master("local[2,3]")  # 2 threads; a task may fail 3 times
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # small Arrow batches, so rows flow to the writer while the producing step runs
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")


    def rows(frames):
        attempt = TaskContext.get().attemptNumber()
        for frame in frames:
            for start in range(0, len(frame), 50):
                chunk = frame.iloc[start : start + 50]
                if attempt == 0 and chunk["id"].iloc[0] >= 500:
                    # the first attempt dies halfway, once some of its batches are stored
                    store = redis.Redis.from_url(redis_url)
                    deadline = time.monotonic() + 60
                    while store.xlen(stream) < 3 and time.monotonic() < deadline:
                        time.sleep(0.05)
                    store.set("test:attempt0-stored", store.xlen(stream))
                    raise RuntimeError("injected failure of attempt 0")
                yield chunk.assign(
                    # 2 kB rows: the JVM buffers 64 kB before feeding the writer
                    value="row-" + chunk["id"].astype(str) + "|" + "x" * 2000,
                    __key="k" + (chunk["id"] % 7).astype(str),
                )[["value", "__key"]]


    df = spark.range(1000).repartition(1).mapInPandas(rows, "value string, __key string")
    (
        df.write.format("pulsar")
        .option("service.url", service_url)
        .option("topic", topic)
        .option("pulsar.producer.batchingMaxMessages", "100")
        .mode("append")
        .save()
    )
    spark.stop()
    print("written")
    """
)


def test_a_retried_task_publishes_each_row_once(
    gateway: GatewayThread,
    client_factory: Client,
    redis_clean: redis.Redis,
    redis_url: str,
    topic: str,
    tmp_path: Path,
) -> None:
    enable_deduplication(gateway)
    script = tmp_path / "retry_driver.py"
    script.write_text(RETRY_DRIVER)
    env = env_for_subprocess()
    done = subprocess.run(
        [sys.executable, str(script), gateway.url, topic, redis_url, stream_key(topic)],
        capture_output=True,
        text=True,
        timeout=SPARK_TIMEOUT,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().endswith("written")

    # the first attempt had published part of its rows when it failed...
    stored_by_first = int(redis_clean.get("test:attempt0-stored") or 0)
    assert 3 <= stored_by_first < 10
    # ...and the retry published the rest: every row once, in order, in whole batches
    messages = consume(client_factory(gateway.url), topic, 1000)
    assert [m.data() for m in messages] == [f"row-{i}|{'x' * 2000}".encode() for i in range(1000)]
    assert [m.partition_key() for m in messages] == [f"k{i % 7}" for i in range(1000)]
    # ten batch entries of 100, or eleven when the failing attempt flushed a partial batch
    # on its way out (the retry then sends only that batch's missing rows)
    assert redis_clean.xlen(stream_key(topic)) in (10, 11)


# -- streaming writes ----------------------------------------------------------------------


def run_copy_query(
    spark: SparkSession, gateway: GatewayThread, source: str, target: str, checkpoint: Path
) -> StreamingQuery:
    """A stream from ``source`` to ``target`` (values upper-cased), run to the end of what
    ``source`` holds (availableNow), 100 entries per micro-batch."""
    stream = (
        spark.readStream.format("pulsar")
        .option("service.url", gateway.url)
        .option("admin.url", gateway.http_url)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxEntriesPerTrigger", "100")
        .load()
        .selectExpr(
            "upper(CAST(value AS STRING)) AS value",
            "CAST(__key AS STRING) AS __key",
            "__messageProperties",
            "__eventTime",
        )
    )
    query = (
        stream.writeStream.format("pulsar")
        .queryName("copy")
        .option("service.url", gateway.url)
        .option("topic", target)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(SPARK_TIMEOUT), "the query did not finish"
    finally:
        query.stop()
    return query


def test_a_stream_is_written_once_even_when_a_micro_batch_is_replayed(
    spark: SparkSession,
    gateway: GatewayThread,
    client_factory: Client,
    redis_clean: redis.Redis,
    topic: str,
    tmp_path: Path,
) -> None:
    enable_deduplication(gateway)
    client = client_factory(gateway.url)
    source, target = f"{topic}-in", f"{topic}-out"
    producer = client.create_producer(source, batching_enabled=False)
    for i in range(300):
        producer.send_async(
            f"event-{i}".encode(),
            None,
            partition_key=f"k{i % 3}",
            properties={"i": str(i)},
            event_timestamp=1_600_000_000_000 + i,
        )
    producer.flush()
    producer.close()

    checkpoint = tmp_path / "checkpoint"
    query = run_copy_query(spark, gateway, source, target, checkpoint)
    batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"]]
    assert batches == [0, 1, 2]  # 100 entries each

    def check_target(sub: str) -> None:
        messages = consume(client, target, 300, sub=sub)
        got = sorted(messages, key=lambda m: int(m.properties()["i"]))
        assert [m.data() for m in got] == [f"EVENT-{i}".encode() for i in range(300)]
        assert [m.partition_key() for m in got] == [f"k{i % 3}" for i in range(300)]
        assert [m.event_timestamp() for m in got] == [1_600_000_000_000 + i for i in range(300)]

    check_target("first")
    assert redis_clean.xlen(stream_key(target)) == 3  # one batch entry per micro-batch

    # Spark stopped after writing the last micro-batch but before committing it: the
    # restarted query runs that batch again, with the same producer names and sequence ids
    commits = checkpoint / "commits"
    for name in ("2", ".2.crc"):
        (commits / name).unlink(missing_ok=True)
    replay = run_copy_query(spark, gateway, source, target, checkpoint)
    assert [(p["batchId"], p["numInputRows"]) for p in replay.recentProgress[:1]] == [(2, 100)]
    assert (commits / "2").exists()
    check_target("after-replay")
    assert redis_clean.xlen(stream_key(target)) == 3  # the replayed batch was not stored


def test_a_streaming_write_refuses_bad_columns_when_it_starts(
    spark: SparkSession, gateway: GatewayThread, topic: str, tmp_path: Path
) -> None:
    stream = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", "1")
        .load()
        .selectExpr("CAST(value AS STRING) AS value", "value AS __key")
    )
    # a throw-away checkpoint under the session's default location
    spark.conf.set("spark.sql.streaming.checkpointLocation", str(tmp_path))
    try:
        query = (
            stream.writeStream.format("pulsar")
            .option("service.url", gateway.url)
            .option("topic", topic)
            .start()
        )
    finally:
        spark.conf.unset("spark.sql.streaming.checkpointLocation")
    try:
        with pytest.raises(SparkErrors, match="__key attribute type must be a string or binary"):
            query.awaitTermination(SPARK_TIMEOUT)
    finally:
        query.stop()
