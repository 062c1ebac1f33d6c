"""The topic metrics of ``/metrics``: :func:`figures` gives the numbers of Pulsar's
TopicStats JSON (``compose``) for the same inputs, and ``exposition`` writes them as
``prometheus_client`` writes the same families, byte for byte."""

from __future__ import annotations

import math
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from pulsar_gateway.core.fleet.topic_metrics import (
    _SUB_GAUGES,
    _TOPIC_COUNTERS,
    _TOPIC_GAUGES,
    exposition,
)
from pulsar_gateway.core.fleet.topic_stats import (
    SUBSCRIPTION_FIGURES,
    TOPIC_FIGURES,
    Figures,
    compose,
    figures,
)
from pulsar_gateway.core.model.topic_name import parse_topic_name

TOPIC_LABELS = ["cluster", "namespace", "topic"]


def script_answer(backlog: int, delayed: int, consumers: int, *, persistent: bool = True) -> Any:
    """An answer of topic_stats.lua: three subscriptions with awkward names."""
    return {
        "length": 10 + backlog,
        "added": 100 + backlog,
        "size": 123_456_789_012,
        "producers": ["p-1", "p-2"],
        "persistent": persistent,
        "subs": [
            {
                "name": name,
                "type": 1,
                "backlog": backlog + i,
                "delayed": delayed,
                "consumers": [
                    {"uid": f"u{i}{j}", "name": f"c{j}", "priority": 0, "unacked": j}
                    for j in range(consumers)
                ],
            }
            for i, name in enumerate(("plain", 'sub "quoted"', "sub\\back\nslash"))
        ],
    }


def rate_report(rate: float) -> dict[str, Any]:
    """A gateway's report: a publisher, rates on one known and one unknown subscription."""
    return {
        "msgRateIn": rate,
        "msgThroughputIn": rate * 100,
        "msgInCounter": 10**15,
        "bytesInCounter": 7,
        "publishers": [{"producerName": "p-1", "msgRateIn": rate}],
        "subscriptions": {
            "plain": {
                "msgRateOut": rate / 3,
                "msgThroughputOut": rate,
                "msgRateRedeliver": 1.5,
                "msgOutCounter": 7,
                "bytesOutCounter": 700,
                "consumers": [{"uid": "u00", "consumerName": "c0"}],
            },
            "gone": {"msgRateOut": 2.0, "msgOutCounter": 1},
        },
    }


CASES = {
    "idle": (script_answer(0, 0, 0), []),
    "busy": (script_answer(5, 2, 3), [rate_report(1234.5678), rate_report(0.25)]),
    "huge": (script_answer(10**12, 10**6, 1), [rate_report(1e-7)]),
    "infinite": (script_answer(1, 0, 0), [rate_report(math.inf)]),
    "non-persistent": (script_answer(0, 0, 2, persistent=False), [rate_report(3.0)]),
    "empty stream": ({**script_answer(0, 0, 0), "length": 0, "size": 0}, []),
}


def from_compose(stats: dict[str, Any]) -> Figures:
    """The figures read off compose's JSON, as TOPIC_FIGURES names them."""
    subs = stats["subscriptions"]

    def topic_value(spec: str) -> float:
        kind, _, field = spec.partition(":")
        if kind == "len":
            return float(len(stats[field]))
        if kind == "sum":
            total = sum(len(s[field]) if field == "consumers" else s[field] for s in subs.values())
            return float(total)
        return float(stats[spec])

    return (
        [topic_value(spec) for spec in TOPIC_FIGURES],
        [
            (name, [float(sub[field]) for field in SUBSCRIPTION_FIGURES])
            for name, sub in sorted(subs.items())
        ],
    )


@pytest.mark.parametrize("case", CASES)
def test_figures_are_those_of_the_topic_stats_json(case: str) -> None:
    data, reports = CASES[case]
    assert figures(data, reports) == from_compose(compose(data, reports))


TOPICS = {
    "persistent://public/default/a": figures(*CASES["idle"]),
    'persistent://te-nant/ns/b"c\\d\ne': figures(*CASES["busy"]),
    "persistent://public/default/big-partition-3": figures(*CASES["huge"]),
    "persistent://public/default/inf": figures(*CASES["infinite"]),
    "non-persistent://public/default/np": figures(*CASES["non-persistent"]),
}


def library_families(cluster: str, topics: dict[str, Figures]) -> list[Metric]:
    """The same figures built as prometheus_client families (the reference)."""
    out: list[Metric] = []
    rows = [
        ([cluster, parse_topic_name(name).namespace, name], figs)
        for name, figs in sorted(topics.items())
    ]
    for i, (metric, help_text) in enumerate(_TOPIC_GAUGES):
        gauge = GaugeMetricFamily(metric, help_text, labels=TOPIC_LABELS)
        for labels, (values, _) in rows:
            gauge.add_metric(labels, values[i])
        out.append(gauge)
    for i, (metric, help_text) in enumerate(_TOPIC_COUNTERS, start=len(_TOPIC_GAUGES)):
        counter = CounterMetricFamily(metric, help_text, labels=TOPIC_LABELS)
        for labels, (values, _) in rows:
            counter.add_metric(labels, values[i])
        out.append(counter)
    for i, (metric, help_text) in enumerate(_SUB_GAUGES):
        gauge = GaugeMetricFamily(metric, help_text, labels=[*TOPIC_LABELS, "subscription"])
        for labels, (_, subs) in rows:
            for sub_name, values in subs:
                gauge.add_metric([*labels, sub_name], values[i])
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
    assert parsed["pulsar_msg_backlog", labels] == 5 + 6 + 7
    assert parsed["pulsar_consumers_count", labels] == 9
    assert parsed["pulsar_producers_count", labels] == 3  # p-1 twice reported, p-2 registered
    assert parsed["pulsar_rate_in", labels] == 1234.5678 + 0.25
    assert parsed["pulsar_rate_out", labels] == (1234.5678 + 0.25) / 3 + 4.0
    assert parsed["pulsar_in_messages_total", labels] == 2 * 10**15
    quoted = tuple(sorted((*labels, ("subscription", 'sub "quoted"'))))
    assert parsed["pulsar_subscription_back_log_no_delayed", quoted] == 4
    assert parsed["pulsar_subscription_unacked_messages", quoted] == 3
    # 5 topics x 14 topic series + 15 subscriptions x 7
    assert len(parsed) == 5 * 14 + 15 * 7
    assert exposition("standalone", {}).count("# TYPE") == 21
