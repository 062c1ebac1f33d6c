"""``/metrics``: Pulsar's topic and subscription metric names with the fleet's figures
(from Redis and every gateway's rate report), each topic exported by one gateway so a sum
over the fleet's scrapes counts it once; gateway-level request counters."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import aiohttp
import pulsar
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.adminhttp import admin
from tests.conftest import ROOT, GatewayThread, wait_for

# The cluster pass of ./dev test runs this file on a Redis Cluster too: /metrics
pytestmark = pytest.mark.cluster

INTERVAL = 0.2


def scrape(gw: GatewayThread) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the gateway's /metrics: (name, sorted labels) -> value."""

    async def get() -> str:
        async with aiohttp.ClientSession() as session, session.get(f"{gw.http_url}/metrics") as r:
            assert r.status == 200
            return await r.text()

    samples = {}
    for family in text_string_to_metric_families(asyncio.run(get())):
        for s in family.samples:
            samples[s.name, tuple(sorted(s.labels.items()))] = s.value
    return samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float | None:
    for (sample, got), v in samples.items():
        if sample == name and all(dict(got).get(k) == want for k, want in labels.items()):
            return v
    return None


def full(topic: str) -> str:
    return f"persistent://public/default/{topic}"


def test_topic_and_subscription_metrics_have_pulsar_names_and_labels(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    gw = gateway_factory(stats_interval_seconds=INTERVAL)
    client = client_factory(gw.url)
    consumer = client.subscribe(
        topic, "shared", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=1
    )
    client.subscribe(topic, "idle").close()
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(6):
        producer.send(b"m%d" % i)
    for _ in range(2):  # delivered in an hour
        producer.send(b"later", deliver_after=timedelta(hours=1))
    received = [consumer.receive(timeout_millis=5000) for _ in range(6)]
    for message in received[:5]:
        consumer.acknowledge(message)

    labels = {"cluster": "standalone", "namespace": "public/default", "topic": full(topic)}

    def settled() -> Any:
        s = scrape(gw)
        if (
            value(s, "pulsar_in_messages_total", **labels) == 8
            and value(s, "pulsar_subscription_delayed", subscription="shared", **labels) == 2
        ):
            return s
        return None

    s = wait_for(settled)
    assert value(s, "pulsar_producers_count", **labels) == 1
    assert value(s, "pulsar_consumers_count", **labels) == 1
    assert value(s, "pulsar_subscriptions_count", **labels) == 2
    assert value(s, "pulsar_storage_size", **labels) > 0
    assert value(s, "pulsar_subscription_back_log", subscription="idle", **labels) == 8
    # shared: 1 received and not acknowledged, 2 scheduled
    assert value(s, "pulsar_subscription_back_log", subscription="shared", **labels) == 3
    assert value(s, "pulsar_subscription_back_log_no_delayed", subscription="shared", **labels) == 1
    assert value(s, "pulsar_subscription_unacked_messages", subscription="shared", **labels) == 1
    assert value(s, "pulsar_msg_backlog", **labels) == 11  # 8 + 3
    for name in ("pulsar_rate_in", "pulsar_rate_out", "pulsar_throughput_in"):
        assert value(s, name, **labels) is not None
    # gateway-level counters
    assert value(s, "pulsar_gateway_in_messages_total") == 8
    assert value(s, "pulsar_gateway_connections", protocol="binary") == 1


def test_each_topic_is_exported_by_one_gateway_and_moves_when_it_leaves(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    a = gateway_factory(stats_interval_seconds=INTERVAL, gateway_id="gw-a")
    b = gateway_factory(stats_interval_seconds=INTERVAL, gateway_id="gw-b")
    client = client_factory(a.url)
    topics = [f"{topic}-{i}" for i in range(12)]
    for i, name in enumerate(topics):
        client.subscribe(name, "s").close()
        producer = client.create_producer(name)
        for _ in range(i + 1):
            producer.send(b"x")
        producer.close()

    def backlogs(gw: GatewayThread) -> dict[str, float]:
        return {
            dict(labels)["topic"]: v
            for (name, labels), v in scrape(gw).items()
            if name == "pulsar_subscription_back_log"
            and dict(labels)["topic"].startswith(full(topic))
        }

    exported_a, exported_b = backlogs(a), backlogs(b)
    assert exported_a and exported_b, "12 topics all on one gateway: ownership is not spread"
    assert not exported_a.keys() & exported_b.keys()  # never twice
    merged = exported_a | exported_b
    assert merged == {full(name): float(i + 1) for i, name in enumerate(topics)}
    # b leaves the fleet: a exports every topic
    b.stop()
    assert wait_for(lambda: len(backlogs(a)) == 12)


def test_http_requests_are_counted_by_route_and_status(gateway: GatewayThread, topic: str) -> None:
    base = f"{gateway.http_url}/admin/v2/persistent/public/default"
    assert admin("GET", f"{base}/{topic}/stats")[0] == 404
    assert admin("PUT", f"{base}/{topic}")[0] == 204
    assert admin("GET", f"{gateway.http_url}/no/such/path")[0] == 404
    s = scrape(gateway)
    stats_route = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}/stats"
    assert (
        value(
            s, "pulsar_gateway_http_requests_total", method="GET", route=stats_route, status="404"
        )
        == 1
    )
    assert value(s, "pulsar_gateway_http_requests_total", route="unmatched", status="404") == 1


def lateness(gw: GatewayThread) -> tuple[float, dict[float, float]]:
    """The lateness histogram's count and its cumulative buckets (le -> count)."""
    name = "pulsar_gateway_delayed_delivery_lateness_seconds"
    s = scrape(gw)
    buckets = {
        float(dict(labels)["le"]): v
        for (sample, labels), v in s.items()
        if sample == f"{name}_bucket"
    }
    return value(s, f"{name}_count") or 0.0, buckets


def test_delayed_delivery_lateness_is_observed_for_each_scheduled_message(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    """Each scheduled message taken for delivery is observed once, on Shared and Key_Shared:
    promptly while a consumer waits; late, by the time it waited, when none was connected."""
    gw = gateway_factory()
    client = client_factory(gw.url)
    shared = pulsar.ConsumerType.Shared
    consumers = [
        client.subscribe(topic, "s", consumer_type=shared),
        client.subscribe(topic, "k", consumer_type=pulsar.ConsumerType.KeyShared),
    ]
    away = client.subscribe(topic, "late", consumer_type=shared)
    producer = client.create_producer(topic, batching_enabled=False)
    sent = [b"d%d" % i for i in range(4)]
    for i, data in enumerate(sent):
        producer.send(data, partition_key=f"k{i}", deliver_after=timedelta(seconds=1))
    # scheduled on "late" (the stats list them), then nobody is connected when they fall due
    topic_stats = f"{gw.http_url}/admin/v2/persistent/public/default/{topic}/stats"
    wait_for(lambda: admin("GET", topic_stats)[1]["subscriptions"]["late"]["msgDelayed"] == 4)
    away.close()
    for consumer in consumers:
        assert sorted(consumer.receive(timeout_millis=5000).data() for _ in range(4)) == sent
    _, prompt = wait_for(lambda: (c := lateness(gw))[0] == 8 and c)
    assert prompt[0.25] == 8  # taken within 250 ms of their time

    time.sleep(1.5)
    late = client.subscribe(topic, "late", consumer_type=shared)
    assert sorted(late.receive(timeout_millis=5000).data() for _ in range(4)) == sent
    _, buckets = wait_for(lambda: (c := lateness(gw))[0] == 12 and c)
    # the 4 waited about 1.5 s in Redis: past the 1 s bucket, within the 10 s one
    assert buckets[1.0] == 8
    assert buckets[10.0] == 12


def test_every_metric_the_fleet_alerts_name_is_exported(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    """compose/prometheus/alerts.yml only names metrics a gateway really exports."""
    rules = yaml.safe_load((ROOT / "compose" / "prometheus" / "alerts.yml").read_text())
    named = {
        name
        for group in rules["groups"]
        for rule in group["rules"]
        for name in re.findall(r"\bpulsar_[a-z_]+", rule["expr"])
    }
    assert len(named) >= 3
    gw = gateway_factory(stats_interval_seconds=INTERVAL)
    client = client_factory(gw.url)
    client.subscribe(topic, "s").close()
    client.create_producer(topic).send(b"x")

    async def families() -> set[str]:
        async with aiohttp.ClientSession() as session, session.get(f"{gw.http_url}/metrics") as r:
            text = await r.text()
        exported = set()
        for family in text_string_to_metric_families(text):
            exported.add(family.name)
            exported.update(s.name for s in family.samples)
            # a labelled counter without children yet shows only its family; its samples
            # will be <family>_total
            if family.type == "counter":
                exported.add(f"{family.name}_total")
        return exported

    assert wait_for(lambda: named <= asyncio.run(families())), named - asyncio.run(families())
