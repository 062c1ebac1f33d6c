"""The Spark data source when the gateways' Redis is a real Redis Cluster (3 masters, 3
replicas, :mod:`tests.redis_cluster`).

The driver learns the Redis URL from the gateway (one cluster node), sees ``cluster_enabled``
and reads through redis-py's cluster client; each executor reads every topic partition from
the master of its slot. A partitioned topic whose partitions live on different masters must
come out of Spark exactly as the official client (pulsar-client) sees it, in a batch read and
in a streaming query that plans its micro-batches with the Lua scripts; a Spark write through
a gateway on the cluster must land what the official client reads back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest
from redis.cluster import RedisCluster as ClusterClient

from pulsar_gateway.core.storage.keys import KeySchema
from tests.adminhttp import admin_as
from tests.conftest import TIMEOUT, GatewayThread, make_config
from tests.integration.spark.spark_fixtures import (
    Collected,
    read,
    read_stream,
    run_available_now,
    spark,
)
from tests.integration.spark.test_spark_read import (
    actual_rows,
    by_id,
    expected_row,
    received,
    send_all,
)
from tests.redis_cluster import RedisCluster, cluster

__all__ = ["cluster", "spark"]  # module-scoped fixtures, imported for pytest

NS = "persistent://public/default"
PARTITIONS = 3
RECEIVE_MS = int(TIMEOUT * 1000)


@pytest.fixture(scope="module")
def cluster_gateway(cluster: RedisCluster) -> Iterator[GatewayThread]:
    """One gateway on the cluster for the module (each test uses its own topics)."""
    gw = GatewayThread(make_config(cluster.url)).start()
    try:
        yield gw
    finally:
        gw.stop()


def create_partitioned(gw: GatewayThread, name: str) -> str:
    url = f"{gw.http_url}/admin/v2/persistent/public/default/{name}/partitions"
    assert admin_as(None, "PUT", url, PARTITIONS)[0] == 204
    return f"{NS}/{name}"


def partition_masters(cluster: RedisCluster, topic: str) -> dict[str, str]:
    """The master (``host:port``) holding each partition's stream, by partition name."""
    keys = KeySchema()
    client = ClusterClient.from_url(cluster.url)
    try:
        return {
            f"{topic}-partition-{i}": client.get_node_from_key(
                keys.topic(f"{topic}-partition-{i}").stream
            ).name
            for i in range(PARTITIONS)
        }
    finally:
        client.close()


def produce(client: Any, topic: str) -> list[bytes]:
    """60 keyed messages in batches and 30 keyless ones one per entry; their payloads."""
    batched = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
    payloads = [f"batched-{i}".encode() for i in range(60)]
    ids = send_all(batched, payloads[:30], partition_key="a")
    ids += send_all(batched, payloads[30:], partition_key="b")
    single = client.create_producer(
        topic,
        batching_enabled=False,
        message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
    )
    for i in range(30):
        payload = f"single-{i}".encode()
        ids.append(single.send(payload))
        payloads.append(payload)
    assert {m.partition() for m in ids} == set(range(PARTITIONS))
    return payloads


def test_batch_read_of_partitions_on_several_masters(
    spark: Any,
    cluster: RedisCluster,
    cluster_gateway: GatewayThread,
    client_factory: Callable[..., Any],
) -> None:
    topic = create_partitioned(cluster_gateway, "spark-cluster-read")
    masters = partition_masters(cluster, topic)
    assert len(set(masters.values())) > 1, masters  # the reads cross masters
    client = client_factory(cluster_gateway.url)
    payloads = produce(client, topic)

    rows = actual_rows(read(spark, cluster_gateway, topic=topic).load())
    assert Counter(row["value"] for row in rows) == Counter(payloads)  # each exactly once
    expected = by_id([expected_row(topic, m) for m in received(client, topic, len(payloads))])
    assert by_id(rows) == expected
    assert {row["__topic"] for row in rows} == set(masters)
    # a pattern lists the namespace's topics and partitioned topics (keys of other slots)
    pattern = read(spark, cluster_gateway, topicsPattern=f"{NS}/spark-cluster-r.*").load()
    assert Counter(r.value for r in pattern.select("value").collect()) == Counter(payloads)


def test_streaming_micro_batches_on_several_masters(
    spark: Any,
    cluster: RedisCluster,
    cluster_gateway: GatewayThread,
    client_factory: Callable[..., Any],
    tmp_path: Path,
) -> None:
    """Admission control plans each micro-batch with a Lua script per partition, and every
    micro-batch after the first checks for removed entries with another: both per master."""
    topic = create_partitioned(cluster_gateway, "spark-cluster-stream")
    assert len(set(partition_masters(cluster, topic).values())) > 1
    client = client_factory(cluster_gateway.url)
    producer = client.create_producer(topic, batching_enabled=False)
    payloads = [f"s-{i}".encode() for i in range(40)]
    for i, payload in enumerate(payloads):
        producer.send(payload, partition_key=f"k{i}")

    sink = Collected()
    frame = read_stream(
        spark, cluster_gateway, topic=topic, startingOffsets="earliest", maxEntriesPerTrigger="9"
    ).load()
    run_available_now(frame, tmp_path / "checkpoint", sink)
    assert Counter(row.value for row in sink.rows) == Counter(payloads)
    assert len(sink.batches) >= 5  # 40 entries, at most 9 per micro-batch


def test_batch_write_lands_for_the_official_client(
    spark: Any,
    cluster: RedisCluster,
    cluster_gateway: GatewayThread,
    client_factory: Callable[..., Any],
) -> None:
    topic = create_partitioned(cluster_gateway, "spark-cluster-write")
    masters = partition_masters(cluster, topic)
    assert len(set(masters.values())) > 1, masters
    rows = [(f"row-{i}", f"key-{i % 11}", {"i": str(i)}) for i in range(200)]
    df = spark.createDataFrame(
        rows, "value string, __key string, __messageProperties map<string,string>"
    ).repartition(2)
    (
        df.write.format("pulsar")
        .option("service.url", cluster_gateway.url)
        .option("topic", topic)
        .mode("append")
        .save()
    )

    client = client_factory(cluster_gateway.url)
    consumer = client.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
    messages = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(len(rows))]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=500)
    got = Counter((m.data(), m.partition_key(), m.properties()["i"]) for m in messages)
    assert got == Counter((v.encode(), k, p["i"]) for v, k, p in rows)  # each exactly once
    # keyed rows go where the Java client routes them: one key, one partition; all used
    partition_of_key: dict[str, str] = {}
    for m in messages:
        assert partition_of_key.setdefault(m.partition_key(), m.topic_name()) == m.topic_name()
    assert {m.topic_name() for m in messages} == set(masters)
