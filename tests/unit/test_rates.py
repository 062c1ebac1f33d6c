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
