"""Topic stats over the admin API (Pulsar ``TopicStats``), fleet-wide: figures from Redis
and from every gateway's rate report, the same whichever gateway is asked."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import pulsar
import pytest

from tests.adminhttp import admin
from tests.conftest import GatewayThread, stream_key, wait_for

# The cluster pass of ./dev test runs this file on a Redis Cluster too: topic stats
# (partitioned and not, the fleet's figures from any gateway)
pytestmark = pytest.mark.cluster

INTERVAL = 0.2  # stats_interval_seconds: reports every 0.2 s


def _stats(gw: GatewayThread, topic: str, suffix: str = "stats") -> Any:
    status, body = admin(
        "GET", f"{gw.http_url}/admin/v2/persistent/public/default/{topic}/{suffix}"
    )
    assert status == 200, body
    return body


def test_backlog_unacked_publishers_and_consumers(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    gw = gateway_factory(stats_interval_seconds=INTERVAL)
    client = client_factory(gw.url)
    consumer = client.subscribe(
        topic,
        "sub",
        consumer_type=pulsar.ConsumerType.Shared,
        consumer_name="reader-1",
        receiver_queue_size=1,
    )
    idle = client.subscribe(topic, "idle", consumer_type=pulsar.ConsumerType.Exclusive)
    idle.close()
    producer = client.create_producer(topic, producer_name="writer-1", batching_enabled=False)
    for i in range(10):
        producer.send(b"m%d" % i)
    received = [consumer.receive(timeout_millis=5000) for _ in range(3)]
    consumer.acknowledge(received[0])

    def settled() -> Any:
        stats = _stats(gw, topic)
        sub = stats["subscriptions"]["sub"]
        # the client prefetches beyond what the test received: unacked = delivered - acked
        if stats["msgInCounter"] == 10 and sub["unackedMessages"] == sub["msgOutCounter"] - 1:
            return stats
        return None

    stats = wait_for(settled)
    assert stats["entriesAddedCounter"] == 10
    assert stats["bytesInCounter"] > 0 and stats["storageSize"] > 0
    assert [p["producerName"] for p in stats["publishers"]] == ["writer-1"]
    sub = stats["subscriptions"]["sub"]
    assert sub["type"] == "Shared"
    assert sub["msgBacklog"] == 9  # 10 published, 1 acknowledged
    assert sub["msgBacklogNoDelayed"] == 9 and sub["msgDelayed"] == 0
    assert sub["msgOutCounter"] >= 3
    [c] = sub["consumers"]
    assert c["consumerName"] == "reader-1" and c["unackedMessages"] == sub["unackedMessages"]
    assert c["clientVersion"].startswith("Pulsar") and c["address"]
    assert stats["publishers"][0]["clientVersion"].startswith("Pulsar")
    # no consumer connected: everything is backlog, nothing unacked
    idle_stats = stats["subscriptions"]["idle"]
    assert idle_stats["type"] == "Exclusive" and idle_stats["consumers"] == []
    assert idle_stats["msgBacklog"] == 10 and idle_stats["unackedMessages"] == 0


def test_backlog_after_a_cursor_moved_across_ledgers(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    redis_clean: Any,
    topic: str,
) -> None:
    """After a skip moves a cursor (XGROUP SETID), Redis no longer knows the group's lag:
    the backlog is counted ledger by ledger, across rollovers, without reading the entries
    (reading them took a second of Redis time on a topic with 90 subscriptions)."""
    gw = gateway_factory(
        managed_ledger_max_entries_per_ledger=4, managed_ledger_min_ledger_rollover_time_minutes=0
    )
    client = client_factory(gw.url)
    for name in ("a", "b"):
        client.subscribe(topic, name).close()
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(11):  # three ledgers: 4 + 4 + 3 entries
        producer.send(b"x" * 1000 + b"%d" % i)
    base = f"{gw.http_url}/admin/v2/persistent/public/default/{topic}/subscription"
    assert admin("POST", f"{base}/a/skip/5")[0] == 204
    ids = [entry_id for entry_id, _ in redis_clean.xrange(stream_key(topic))]
    assert len({entry_id.split(b"-")[0] for entry_id in ids}) == 3, ids
    groups = {g["name"]: g for g in redis_clean.xinfo_groups(stream_key(topic))}
    assert groups[b"a"]["lag"] is None  # what makes the script count
    stats = _stats(gw, topic)
    assert stats["subscriptions"]["a"]["msgBacklog"] == 6
    assert stats["subscriptions"]["b"]["msgBacklog"] == 11


def test_rates_and_clients_of_every_gateway_appear_on_each(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    producing = gateway_factory(stats_interval_seconds=INTERVAL)
    consuming = gateway_factory(stats_interval_seconds=INTERVAL)
    consumer = client_factory(consuming.url).subscribe(topic, "s", consumer_name="c-on-b")
    producer = client_factory(producing.url).create_producer(topic, producer_name="p-on-a")
    for _ in range(20):
        producer.send(b"x" * 100)
    for _ in range(20):
        consumer.acknowledge(consumer.receive(timeout_millis=5000))

    def both_reported(gw: GatewayThread) -> Any:
        stats = _stats(gw, topic)
        sub = stats["subscriptions"].get("s")
        if stats["msgInCounter"] == 20 and sub and sub["msgOutCounter"] == 20:
            return stats
        return None

    for gw in (producing, consuming):
        stats = wait_for(partial(both_reported, gw))
        assert [p["producerName"] for p in stats["publishers"]] == ["p-on-a"]
        assert [c["consumerName"] for c in stats["subscriptions"]["s"]["consumers"]] == ["c-on-b"]
        assert stats["subscriptions"]["s"]["msgBacklog"] == 0
    # the rates were above zero in some interval while the messages moved; once idle they
    # fall back to zero, so check the counters' byte totals instead of a timing-bound rate
    assert stats["bytesInCounter"] >= 20 * 100
    assert stats["bytesOutCounter"] >= 20 * 100


def test_each_client_names_the_gateway_it_is_connected_to(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    producing = gateway_factory(stats_interval_seconds=INTERVAL)
    consuming = gateway_factory(stats_interval_seconds=INTERVAL)
    client_factory(consuming.url).subscribe(topic, "s", consumer_name="c-on-b")
    client_factory(producing.url).create_producer(topic, producer_name="p-on-a")

    def reported(gw: GatewayThread) -> Any:
        stats = _stats(gw, topic)
        consumers = stats["subscriptions"].get("s", {}).get("consumers", [])
        publishers = stats["publishers"]
        if publishers and publishers[0].get("gateway") and consumers and consumers[0]["gateway"]:
            return stats
        return None

    for gw in (producing, consuming):
        stats = wait_for(partial(reported, gw))
        # the broker id, host:httpPort, of the gateway each client is connected to
        assert stats["publishers"][0]["gateway"] == f"127.0.0.1:{producing.gateway.http_port}"
        [consumer] = stats["subscriptions"]["s"]["consumers"]
        assert consumer["gateway"] == f"127.0.0.1:{consuming.gateway.http_port}"


def test_a_stopped_gateway_report_goes_stale(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    keeper = gateway_factory(stats_interval_seconds=INTERVAL)
    leaving = gateway_factory(stats_interval_seconds=INTERVAL)
    producer = client_factory(leaving.url).create_producer(topic, producer_name="gone")
    producer.send(b"x")
    wait_for(lambda: _stats(keeper, topic)["msgInCounter"] == 1)
    leaving.stop()
    stats = wait_for(lambda: (s := _stats(keeper, topic))["publishers"] == [] and s)
    assert stats["msgInCounter"] == 0  # counters leave with their gateway
    assert stats["entriesAddedCounter"] == 1  # what Redis holds stays


def test_partitioned_stats_sum_the_partitions(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    gw = gateway_factory(stats_interval_seconds=INTERVAL)
    base = f"{gw.http_url}/admin/v2/persistent/public/default/{topic}"
    assert admin("PUT", f"{base}/partitions", 3)[0] == 204
    client = client_factory(gw.url)
    client.subscribe(topic, "s").close()
    producer = client.create_producer(
        topic,
        batching_enabled=False,
        message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
    )
    for _ in range(9):
        producer.send(b"m")
    stats = wait_for(
        lambda: (s := _stats(gw, topic, "partitioned-stats"))["msgInCounter"] == 9 and s
    )
    assert stats["metadata"] == {"partitions": 3}
    assert sorted(stats["partitions"]) == [
        f"persistent://public/default/{topic}-partition-{i}" for i in range(3)
    ]
    assert stats["subscriptions"]["s"]["msgBacklog"] == 9
    assert sum(p["subscriptions"]["s"]["msgBacklog"] for p in stats["partitions"].values()) == 9
    assert len(stats["publishers"]) == 3  # the client's producer on each partition
    flat = _stats(gw, topic, "partitioned-stats?perPartition=false")
    assert flat["partitions"] == {} and flat["subscriptions"]["s"]["msgBacklog"] == 9
    # the stats of one partition
    one = _stats(gw, f"{topic}-partition-0")
    assert one["subscriptions"]["s"]["msgBacklog"] == 3


@pytest.mark.parametrize(
    ("suffix", "reason"),
    [("stats", "not found"), ("partitioned-stats", "Partitioned Topic not found")],
)
def test_unknown_topics_are_404(gateway: GatewayThread, suffix: str, reason: str) -> None:
    status, body = admin(
        "GET", f"{gateway.http_url}/admin/v2/persistent/public/default/nope/{suffix}"
    )
    assert status == 404 and reason in body["reason"]


def test_invalid_topic_name_is_412(gateway: GatewayThread) -> None:
    status, body = admin("GET", f"{gateway.http_url}/admin/v2/persistent/public/bad%20ns/x/stats")
    assert status == 412 and body["reason"]


def test_non_persistent_topic_stats_list_consumers_and_rates(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    gw = gateway_factory(stats_interval_seconds=INTERVAL)
    client = client_factory(gw.url)
    name = f"non-persistent://public/default/{topic}"
    consumer = client.subscribe(name, "live", consumer_name="np-c")
    producer = client.create_producer(name, producer_name="np-p")
    for _ in range(3):
        producer.send(b"x")
    for _ in range(3):
        consumer.receive(5000)
    url = f"{gw.http_url}/admin/v2/non-persistent/public/default/{topic}/stats"

    def settled() -> Any:
        status, body = admin("GET", url)
        sub = body["subscriptions"].get("live") if status == 200 else None
        return body if sub and sub["msgOutCounter"] == 3 and body["msgInCounter"] == 3 else None

    stats = wait_for(settled)
    [c] = stats["subscriptions"]["live"]["consumers"]
    assert c["consumerName"] == "np-c" and c["msgOutCounter"] == 3
    assert stats["subscriptions"]["live"]["msgBacklog"] == 0


def test_a_deleted_topic_stays_404_while_gateways_still_report_it(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    gw = gateway_factory(stats_interval_seconds=INTERVAL)
    client = client_factory(gw.url)
    producer = client.create_producer(topic)
    for _ in range(5):
        producer.send(b"x")
    wait_for(lambda: _stats(gw, topic)["msgInCounter"] == 5)
    producer.close()
    url = f"{gw.http_url}/admin/v2/persistent/public/default/{topic}"
    assert admin("DELETE", f"{url}?force=true")[0] == 204
    for _ in range(3):  # across several report intervals
        assert admin("GET", f"{url}/stats")[0] == 404
        time.sleep(INTERVAL * 2)
