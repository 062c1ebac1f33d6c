"""The gateway's per-topic meters (:mod:`pulsar_gateway.core.fleet.rates`): a topic without
clients or traffic is dropped after a while, as a Pulsar broker drops an unloaded topic's
stats (a fuzzer naming thousands of topics grew a gateway's memory without end)."""

from __future__ import annotations

from typing import Any, cast

from pulsar_gateway.core.fleet.rates import (
    IDLE_REPORTS,
    ClientInfo,
    GatewayMeters,
    Meter,
    RateReporter,
)
from pulsar_gateway.core.storage.keys import KeySchema


class _Consumer:
    topic_name = "persistent://public/default/kept"
    subscription_name = "s"
    name = "c"
    uid = "g-1"
    permits = 10
    blocked_on_unacked = False
    subscription_blocked_on_unacked = False

    def __init__(self) -> None:
        self.meter = Meter()
        self.client = ClientInfo()


def test_idle_topics_are_dropped_and_topics_with_clients_kept() -> None:
    meters = GatewayMeters()
    consumers: list[Any] = []
    reporter = RateReporter(
        cast(Any, None),
        KeySchema(),
        gateway_id="g",
        meters=meters,
        producers=list,
        consumers=lambda: consumers,
    )
    meters.topic("persistent://public/default/once").rate_in.add(1, 10)
    meters.topic(_Consumer.topic_name).out("s")
    consumer = _Consumer()
    consumers.append(consumer)
    reporter._roll()
    reports = reporter.reports()
    assert set(reports) == {"persistent://public/default/once", _Consumer.topic_name}
    assert reports["persistent://public/default/once"]["msgInCounter"] == 1
    for _ in range(IDLE_REPORTS - 1):
        reporter._roll()
        reporter.reports()
    # idle but within the grace: its counters stay, should clients come back
    assert "persistent://public/default/once" in meters.topics
    reporter._roll()
    reporter.reports()
    assert set(meters.topics) == {_Consumer.topic_name}


def test_reports_name_the_gateway_and_the_summary_sums_every_topic() -> None:
    meters = GatewayMeters()
    consumer = _Consumer()
    reporter = RateReporter(
        cast(Any, None),
        KeySchema(),
        gateway_id="g",
        meters=meters,
        producers=list,
        consumers=lambda: [consumer],
        connections=lambda: 3,
        broker_id=lambda: "10.0.0.5:8080",
    )
    meters.topic("persistent://public/default/a").rate_in.add(10, 1000)
    meters.topic(_Consumer.topic_name).out("s").add(4, 400)
    meters.topic(_Consumer.topic_name).out("t").add(6, 600)
    reporter._roll()
    reports = reporter.reports()
    [entry] = reports[_Consumer.topic_name]["subscriptions"]["s"]["consumers"]
    assert entry["gateway"] == "10.0.0.5:8080"
    summary = reporter.summary(reports)
    assert summary["connections"] == 3
    assert (summary["producers"], summary["consumers"], summary["topics"]) == (0, 1, 2)
    # rates over the roll's interval: positive, in and out, and in proportion to the bytes
    assert summary["msgRateIn"] > 0 and summary["msgRateOut"] > 0
    assert abs(summary["msgThroughputIn"] / summary["msgRateIn"] - 100) < 1
    assert abs(summary["msgThroughputOut"] / summary["msgRateOut"] - 100) < 1
