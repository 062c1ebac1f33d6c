"""Gateways on a real Redis Cluster (3 masters, 3 replicas): commands routed by slot.

The failover test comes last: it leaves the module's cluster one node short.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pulsar
import pytest
from redis.cluster import RedisCluster as ClusterClient

from pulsar_gateway.core.storage.cluster_lane import HOLD_RETRY, MAX_REDIRECTS
from pulsar_gateway.core.storage.keys import KeySchema
from tests.adminhttp import admin_as
from tests.conftest import GatewayThread, make_config, wait_for
from tests.redis_cluster import RedisCluster, cluster, wait_for_promotion

__all__ = ["cluster"]  # the module-scoped fixture, imported for pytest


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
    cluster: RedisCluster, cluster_gateway: GatewayThread, client_factory: Callable[..., Any]
) -> None:
    topic = "persistent://public/default/parts"
    url = f"{cluster_gateway.http_url}/admin/v2/persistent/public/default/parts/partitions"
    assert admin_as(None, "PUT", url, 6)[0] == 204
    client = client_factory(cluster_gateway.url)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    # every partition's hints are subscribed (SSUBSCRIBE takes one slot's channels at a time)
    notify = {KeySchema().topic(f"{topic}-partition-{i}").notify_channel for i in range(6)}

    def subscribed() -> set[str]:
        found: set[str] = set()
        for node in cluster.masters():
            found.update(c.decode() for c in node.client().execute_command("PUBSUB SHARDCHANNELS"))
        return found

    wait_for(lambda: notify <= subscribed())
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


def move_slot(cluster: RedisCluster, slot: int, source_port: int, target_port: int) -> None:
    """Migrate ``slot`` and its keys between masters, as ``redis-cli --cluster reshard``
    does: IMPORTING/MIGRATING, MIGRATE the keys, then SETSLOT NODE on every master."""
    source = next(n for n in cluster.nodes if n.port == source_port).client()
    target = next(n for n in cluster.nodes if n.port == target_port).client()
    target_id = target.execute_command("CLUSTER MYID").decode()
    source_id = source.execute_command("CLUSTER MYID").decode()
    target.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
    source.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)
    while keys := source.execute_command("CLUSTER GETKEYSINSLOT", slot, 100):
        source.execute_command("MIGRATE", "127.0.0.1", target_port, "", 0, 5000, "KEYS", *keys)
    for node in cluster.masters():
        node.client().execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)


def test_commands_follow_a_slot_moved_to_another_master(
    cluster: RedisCluster, cluster_gateway: GatewayThread, client_factory: Callable[..., Any]
) -> None:
    topic = "persistent://public/default/resharded"
    stream = KeySchema().topic(topic).stream
    client = client_factory(cluster_gateway.url)
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"before")
    assert consumer.receive(10_000).data() == b"before"
    seen = ClusterClient.from_url(cluster.url)
    try:
        slot = seen.keyslot(stream)
        source = seen.get_node_from_key(stream).port
    finally:
        seen.close()
    target = next(n.port for n in cluster.masters() if n.port != source)
    move_slot(cluster, slot, source, target)
    # the gateway still routes the slot to its old master: MOVED, re-sent to the new one
    for i in range(5):
        producer.send(f"after-{i}".encode())
    got = [consumer.receive(10_000).data() for _ in range(5)]
    assert got == [f"after-{i}".encode() for i in range(5)]
    with ClusterClient.from_url(cluster.url) as fresh:
        assert fresh.get_node_from_key(stream).port == target
        assert fresh.xlen(stream) == 6  # the entry from before moved with the slot


def wake_latencies(producer: Any, consumer: Any, count: int = 10) -> list[float]:
    """Seconds from each send to its receipt by a consumer (on another gateway)."""
    latencies = []
    for i in range(count):
        start = time.monotonic()
        producer.send(f"wake-{i}".encode())
        msg = consumer.receive(10_000)
        latencies.append(time.monotonic() - start)
        consumer.acknowledge(msg)
        assert msg.data() == f"wake-{i}".encode()
    return latencies


def woken_at_once(latencies: list[float]) -> bool:
    """Woken by notifications, not by the dispatchers' 1 s fallback poll."""
    return sorted(latencies)[len(latencies) // 2] < 0.25


def command_calls(cluster: RedisCluster, command: str) -> dict[int, int]:
    """``INFO commandstats`` calls of ``command`` on each master, by port."""
    counts = {}
    for node in cluster.masters():
        stats = node.client().info("commandstats").get(f"cmdstat_{command}", {})
        counts[node.port] = int(stats.get("calls", 0))
    return counts


def test_notifications_are_sharded_and_wake_consumers_on_other_gateways(
    cluster: RedisCluster, cluster_gateway: GatewayThread, client_factory: Callable[..., Any]
) -> None:
    for node in cluster.masters():
        node.client().config_resetstat()
    other = GatewayThread(make_config(cluster.url)).start()
    try:
        topic = "persistent://public/default/sharded-wake"
        stream = KeySchema().topic(topic).stream
        consumer = client_factory(other.url).subscribe(topic, "sub")
        producer = client_factory(cluster_gateway.url).create_producer(
            topic, batching_enabled=False
        )
        assert woken_at_once(wake_latencies(producer, consumer))
        with ClusterClient.from_url(cluster.url) as seen:
            home = seen.get_node_from_key(stream).port
        spublish = command_calls(cluster, "spublish")
        # the topic's hints went to its own master only, as SPUBLISH
        assert spublish[home] >= 10
        assert all(count == 0 for port, count in spublish.items() if port != home)
        # and its non-persistent sibling's messages too
        np_topic = "non-persistent://public/default/sharded-np"
        np_consumer = client_factory(other.url).subscribe(np_topic, "sub")
        np_producer = client_factory(cluster_gateway.url).create_producer(np_topic)
        np_producer.send(b"np")
        assert np_consumer.receive(10_000).data() == b"np"
    finally:
        other.stop()
    assert sum(command_calls(cluster, "spublish").values()) > sum(spublish.values())


def test_redirections_while_a_slot_migrates_and_wake_ups_after(
    cluster: RedisCluster,
    cluster_gateway: GatewayThread,
    client_factory: Callable[..., Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = "persistent://public/default/migrating"
    stream = KeySchema().topic(topic).stream
    other = GatewayThread(make_config(cluster.url)).start()
    try:
        consumer = client_factory(other.url).subscribe(topic, "sub")
        producer = client_factory(cluster_gateway.url).create_producer(
            topic, batching_enabled=False
        )
        assert woken_at_once(wake_latencies(producer, consumer, 3))
        with ClusterClient.from_url(cluster.url) as seen:
            slot = seen.keyslot(stream)
            source_port = seen.get_node_from_key(stream).port
        target_port = next(n.port for n in cluster.masters() if n.port != source_port)
        source = next(n for n in cluster.nodes if n.port == source_port).client()
        target = next(n for n in cluster.nodes if n.port == target_port).client()
        target.config_resetstat()
        source_id = source.execute_command("CLUSTER MYID").decode()
        target_id = target.execute_command("CLUSTER MYID").decode()
        # Mid-migration: the keys are on the target, the slot still the source's. The
        # source answers ASK for them, and the gateway asks the target (ASKING); the target
        # answers TRYAGAIN to scripts naming keys it lacks, and the gateway holds the slot's
        # commands, in order, until the migration ends.
        target.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
        source.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)
        while keys := source.execute_command("CLUSTER GETKEYSINSLOT", slot, 100):
            source.execute_command("MIGRATE", "127.0.0.1", target_port, "", 0, 5000, "KEYS", *keys)
        results: list[Any] = []
        for i in range(3):
            producer.send_async(f"migrating-{i}".encode(), lambda r, _: results.append(r))
        wait_for(
            lambda: int(target.info("commandstats").get("cmdstat_asking", {}).get("calls", 0)) >= 3
        )
        # long enough for more rounds of ASK, TRYAGAIN and hold than MAX_REDIRECTS
        time.sleep(0.3 + (MAX_REDIRECTS + 1) * HOLD_RETRY * 2)
        for node in cluster.masters():
            node.client().execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
        got = [consumer.receive(10_000).data() for _ in range(3)]
        assert got == [f"migrating-{i}".encode() for i in range(3)]
        wait_for(lambda: len(results) == 3)
        assert results == [pulsar.Result.Ok] * 3
        # held, never failed (a failed append closes the producer, which sends it again)
        assert "append failed" not in caplog.text
        # the hold was needed: the target refused some scripts with TRYAGAIN
        assert int(target.info("errorstats").get("errorstat_TRYAGAIN", {}).get("count", 0)) > 0
        # the source dropped the slot's sharded subscribers; they moved to the target
        assert woken_at_once(wake_latencies(producer, consumer))
        with ClusterClient.from_url(cluster.url) as fresh:
            assert fresh.get_node_from_key(stream).port == target_port
    finally:
        other.stop()


@pytest.mark.timeout(120)
def test_the_gateway_follows_a_failover_of_a_topics_master(
    cluster: RedisCluster, cluster_gateway: GatewayThread, client_factory: Callable[..., Any]
) -> None:
    keys = KeySchema()
    seen = ClusterClient.from_url(cluster.url)
    seed_port = cluster.nodes[0].port
    try:
        # a topic whose master is not the node the gateway was given (its pub/sub is there)
        topic = next(
            t
            for t in (f"persistent://public/default/failover-{i}" for i in range(100))
            if seen.get_node_from_key(keys.topic(t).stream).port != seed_port
        )
        port = seen.get_node_from_key(keys.topic(topic).stream).port
    finally:
        seen.close()
    client = client_factory(cluster_gateway.url, operation_timeout_seconds=5)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=3000)
    for i in range(5):
        producer.send(f"before-{i}".encode())
    victim = next(node for node in cluster.nodes if node.port == port)
    victim.kill()
    wait_for_promotion(cluster)
    sent_after = []
    deadline = time.monotonic() + 30
    while len(sent_after) < 5 and time.monotonic() < deadline:
        try:
            producer.send(f"after-{len(sent_after)}".encode())
            sent_after.append(len(sent_after))
        except pulsar.PulsarException:
            time.sleep(0.5)  # the gateway is finding the promoted replica
    assert len(sent_after) == 5
    received = []
    while True:
        try:
            msg = consumer.receive(5_000)
        except pulsar.Timeout:
            break
        received.append(msg.data().decode())
        consumer.acknowledge(msg)
    # the writes after the failover all arrive; the ones before may be lost (replication is
    # asynchronous: without replica acks, what the master had not passed on is gone)
    assert [r for r in received if r.startswith("after-")] == [f"after-{i}" for i in range(5)]
    # the sharded subscription moved to the promoted replica
    assert woken_at_once(wake_latencies(producer, consumer))


@pytest.mark.timeout(120)
def test_wake_ups_survive_the_loss_of_the_node_the_gateway_was_given(
    cluster: RedisCluster, client_factory: Callable[..., Any]
) -> None:
    # its own cluster: this kills the seed node
    own = RedisCluster().start()
    gw = GatewayThread(make_config(own.url)).start()
    try:
        keys = KeySchema()
        seen = ClusterClient.from_url(own.nodes[1].url)
        seed = own.nodes[0]
        try:
            topic = next(
                t
                for t in (f"persistent://public/default/wake-{i}" for i in range(100))
                if seen.get_node_from_key(keys.topic(t).stream).port != seed.port
            )
        finally:
            seen.close()
        client = client_factory(gw.url)
        consumer = client.subscribe(topic, "sub")
        producer = client.create_producer(topic, batching_enabled=False)
        seed.kill()
        wait_for_promotion(own)
        time.sleep(1.0)  # the notifier notices and moves to another node
        latencies = wake_latencies(producer, consumer)
        assert woken_at_once(latencies), latencies
    finally:
        gw.stop()
        own.stop()
