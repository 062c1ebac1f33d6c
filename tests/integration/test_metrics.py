"""``/metrics``: Pulsar's topic and subscription metric names with the fleet's figures
(from Redis and every gateway's rate report), each topic exported by one gateway so a sum
over the fleet's scrapes counts it once; gateway-level request counters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import aiohttp
import pulsar
from prometheus_client.parser import text_string_to_metric_families

from tests.adminhttp import admin
from tests.conftest import GatewayThread, wait_for

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
