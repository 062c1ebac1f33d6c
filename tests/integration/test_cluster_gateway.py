"""Gateways on a real Redis Cluster (3 masters, 3 replicas): commands routed by slot."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pulsar
import pytest
from redis.cluster import RedisCluster as ClusterClient

from pulsar_gateway.core.storage.keys import KeySchema
from tests.adminhttp import admin_as
from tests.conftest import GatewayThread, make_config
from tests.redis_cluster import RedisCluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    started = RedisCluster().start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def cluster_gateway(cluster: RedisCluster) -> Iterator[GatewayThread]:
    cluster.flush()
    gw = GatewayThread(make_config(cluster.url)).start()
    try:
        yield gw
    finally:
        gw.stop()


def test_topics_on_every_master_produce_and_consume(
    cluster: RedisCluster, cluster_gateway: GatewayThread, client_factory: Callable[..., Any]
) -> None:
    client = client_factory(cluster_gateway.url)
    topics = [f"persistent://public/default/spread-{i}" for i in range(12)]
    keys = KeySchema()
    seen = ClusterClient.from_url(cluster.url)
    try:
        masters = {seen.get_node_from_key(keys.topic(t).stream).name for t in topics}
    finally:
        seen.close()
    assert len(masters) == 3  # the topics below live on all three masters
    consumers = [
        client.subscribe(t, "sub", consumer_type=pulsar.ConsumerType.Shared) for t in topics
    ]
    for topic in topics:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(5):
            producer.send(f"{topic}:{i}".encode(), partition_key=f"k{i}")
        producer.close()
    for topic, consumer in zip(topics, consumers, strict=True):
        got = []
        for _ in range(5):
            msg = consumer.receive(10_000)
            got.append(msg.data().decode())
            consumer.acknowledge(msg)
        assert got == [f"{topic}:{i}" for i in range(5)]


def test_a_partitioned_topic_spreads_over_masters_and_reads_back(
    cluster_gateway: GatewayThread, client_factory: Callable[..., Any]
) -> None:
    topic = "persistent://public/default/parts"
    url = f"{cluster_gateway.http_url}/admin/v2/persistent/public/default/parts/partitions"
    assert admin_as(None, "PUT", url, 6)[0] == 204
    client = client_factory(cluster_gateway.url)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(30):
        producer.send(str(i).encode(), partition_key=f"key-{i}")
    received = set()
    for _ in range(30):
        msg = consumer.receive(10_000)
        received.add(int(msg.data()))
        consumer.acknowledge(msg)
    assert received == set(range(30))
    stats = admin_as(None, "GET", url.replace("/partitions", "/partitioned-stats"))
    assert stats[0] == 200
    assert "sub" in stats[1]["subscriptions"]  # the fleet's stats read every master
