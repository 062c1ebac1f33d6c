"""The topic metrics' Prometheus text (``topic_metrics.exposition``) is what
``prometheus_client`` writes for the same families, byte for byte, and parses back to the
figures of Pulsar's TopicStats JSON."""

from __future__ import annotations

import math
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from pulsar_gateway.core.fleet.topic_metrics import (
    _SUB_GAUGES,
    _TOPIC_COUNTERS,
    _TOPIC_GAUGES,
    _value,
    exposition,
)
from pulsar_gateway.core.fleet.topic_stats import compose
from pulsar_gateway.core.model.topic_name import parse_topic_name

TOPIC_LABELS = ["cluster", "namespace", "topic"]


def stats_json(backlog: int, delayed: int, consumers: int, rate: float) -> dict[str, Any]:
    data = {
        "length": 10 + backlog,
        "added": 100 + backlog,
        "size": 123_456_789_012,
        "producers": ["p-1"],
        "persistent": True,
        "subs": [
            {
                "name": name,
                "type": 1,
                "backlog": backlog,
                "delayed": delayed,
                "consumers": [
                    {"uid": f"u{i}", "name": f"c{i}", "priority": 0, "unacked": i}
                    for i in range(consumers)
                ],
            }
            for name in ('sub "quoted"', "sub\\back\nslash", "plain")
        ],
    }
    report = {
        "msgRateIn": rate,
        "msgThroughputIn": rate * 100,
        "msgInCounter": 10**15,
        "subscriptions": {"plain": {"msgRateOut": rate / 3, "msgOutCounter": 7}},
    }
    return compose(data, [report])


TOPICS = {
    "persistent://public/default/a": stats_json(0, 0, 0, 0.0),
    'persistent://te-nant/ns/b"c\\d\ne': stats_json(5, 2, 3, 1234.5678),
    "persistent://public/default/big-partition-3": stats_json(10**12, 10**6, 1, 1e-7),
    "persistent://public/default/nan": stats_json(1, 0, 0, math.inf),
}


def library_families(cluster: str, topics: dict[str, dict[str, Any]]) -> list[Metric]:
    """The same figures built as prometheus_client families (the reference)."""
    out: list[Metric] = []
    rows = [
        ([cluster, parse_topic_name(name).namespace, name], stats)
        for name, stats in sorted(topics.items())
    ]
    for metric, help_text, source in _TOPIC_GAUGES:
        gauge = GaugeMetricFamily(metric, help_text, labels=TOPIC_LABELS)
        for labels, stats in rows:
            gauge.add_metric(labels, _value(stats, source))
        out.append(gauge)
    for metric, help_text, source in _TOPIC_COUNTERS:
        counter = CounterMetricFamily(metric, help_text, labels=TOPIC_LABELS)
        for labels, stats in rows:
            counter.add_metric(labels, _value(stats, source))
        out.append(counter)
    for metric, help_text, source in _SUB_GAUGES:
        gauge = GaugeMetricFamily(metric, help_text, labels=[*TOPIC_LABELS, "subscription"])
        for labels, stats in rows:
            for sub_name, sub in sorted(stats["subscriptions"].items()):
                gauge.add_metric([*labels, sub_name], _value(sub, source))
        out.append(gauge)
    return out


def test_the_text_is_what_prometheus_client_writes() -> None:
    registry = CollectorRegistry()

    class Reference:
        def collect(self) -> list[Metric]:
            return library_families('clu"ster', TOPICS)

    registry.register(Reference())  # type: ignore[arg-type]
    assert exposition('clu"ster', TOPICS) == generate_latest(registry).decode()


def test_the_text_parses_back_to_the_figures() -> None:
    parsed = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(exposition("standalone", TOPICS))
        for sample in family.samples
    }
    b = 'persistent://te-nant/ns/b"c\\d\ne'
    labels = (("cluster", "standalone"), ("namespace", "te-nant/ns"), ("topic", b))
    assert parsed["pulsar_msg_backlog", labels] == 15
    assert parsed["pulsar_consumers_count", labels] == 9
    assert parsed["pulsar_rate_in", labels] == 1234.5678
    assert parsed["pulsar_in_messages_total", labels] == 10**15
    quoted = tuple(sorted((*labels, ("subscription", 'sub "quoted"'))))
    assert parsed["pulsar_subscription_back_log_no_delayed", quoted] == 3
    assert parsed["pulsar_subscription_unacked_messages", quoted] == 3
    # 4 topics x 14 topic series + 12 subscriptions x 7
    assert len(parsed) == 4 * 14 + 12 * 7
    assert exposition("standalone", {}).count("# TYPE") == 21
