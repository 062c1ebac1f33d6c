"""Topic and subscription metrics for ``/metrics``, with Pulsar's names and labels, from the
fleet's view (:mod:`pulsar_gateway.core.fleet.topic_stats`), each topic exported by one gateway.

Pulsar's brokers export, per topic they own, gauges such as ``pulsar_rate_in`` and
``pulsar_msg_backlog`` and, per subscription, ``pulsar_subscription_back_log`` and friends, labelled
``cluster``, ``namespace``, ``topic`` (and ``subscription``); a dashboard sums them over brokers.
Here every gateway could report every topic, so each topic is exported by the one gateway
:meth:`pulsar_gateway.core.fleet.membership.Fleet.owns` names: summing over the fleet's scrapes
counts each topic once, and the figures (backlog, delayed, unacked, and the rates summed over every
gateway's report) are the fleet's, not one gateway's.

Reading Redis is asynchronous and a Prometheus collector is not: the HTTP handler awaits
:meth:`TopicMetrics.refresh` before rendering, and :meth:`TopicMetrics.collect` yields
what it read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pulsar_gateway.core.errors import GatewayError
from pulsar_gateway.core.fleet.membership import Fleet
from pulsar_gateway.core.fleet.topic_stats import TopicStats
from pulsar_gateway.core.model.topic_name import parse_topic_name

__all__ = ["TopicMetrics"]

log = logging.getLogger(__name__)

_TOPIC_LABELS = ["cluster", "namespace", "topic"]
_SUB_LABELS = [*_TOPIC_LABELS, "subscription"]

#: (metric, help, TopicStats field or a function of the stats), gauges per topic
_TOPIC_GAUGES: tuple[tuple[str, str, Any], ...] = (
    ("pulsar_subscriptions_count", "Subscriptions of the topic", lambda s: len(s["subscriptions"])),
    ("pulsar_producers_count", "Connected producers", lambda s: len(s["publishers"])),
    (
        "pulsar_consumers_count",
        "Connected consumers",
        lambda s: sum(len(sub["consumers"]) for sub in s["subscriptions"].values()),
    ),
    ("pulsar_rate_in", "Messages published per second", "msgRateIn"),
    ("pulsar_rate_out", "Messages dispatched per second", "msgRateOut"),
    ("pulsar_throughput_in", "Bytes published per second", "msgThroughputIn"),
    ("pulsar_throughput_out", "Bytes dispatched per second", "msgThroughputOut"),
    ("pulsar_storage_size", "Bytes the topic's stream takes in Redis", "storageSize"),
    ("pulsar_storage_backlog_size", "Estimated bytes of the largest backlog", "backlogSize"),
    (
        "pulsar_msg_backlog",
        "Entries in the backlogs of the topic's subscriptions",
        lambda s: sum(sub["msgBacklog"] for sub in s["subscriptions"].values()),
    ),
)
_TOPIC_COUNTERS = (
    ("pulsar_in_messages", "Messages published (live gateways, since start)", "msgInCounter"),
    ("pulsar_in_bytes", "Bytes published (live gateways, since start)", "bytesInCounter"),
    ("pulsar_out_messages", "Messages dispatched (live gateways, since start)", "msgOutCounter"),
    ("pulsar_out_bytes", "Bytes dispatched (live gateways, since start)", "bytesOutCounter"),
)
_SUB_GAUGES = (
    ("pulsar_subscription_back_log", "Entries in the subscription's backlog", "msgBacklog"),
    (
        "pulsar_subscription_back_log_no_delayed",
        "Backlog entries not held for delayed delivery",
        "msgBacklogNoDelayed",
    ),
    ("pulsar_subscription_delayed", "Messages scheduled for later delivery", "msgDelayed"),
    (
        "pulsar_subscription_unacked_messages",
        "Entries delivered to consumers and not acknowledged",
        "unackedMessages",
    ),
    ("pulsar_subscription_msg_rate_out", "Messages dispatched per second", "msgRateOut"),
    ("pulsar_subscription_msg_throughput_out", "Bytes dispatched per second", "msgThroughputOut"),
    (
        "pulsar_subscription_msg_rate_redeliver",
        "Messages redelivered per second",
        "msgRateRedeliver",
    ),
)


def _value(stats: dict[str, Any], source: Any) -> float:
    return float(source(stats) if callable(source) else stats.get(source, 0))


def families(cluster: str, topics: dict[str, dict[str, Any]]) -> list[Metric]:
    """The metric families of ``topics`` (full name -> TopicStats JSON)."""
    out: list[Metric] = []
    labelled = []
    for name, stats in sorted(topics.items()):
        labelled.append(([cluster, parse_topic_name(name).namespace, name], stats))
    for metric, help_text, source in _TOPIC_GAUGES:
        gauge = GaugeMetricFamily(metric, help_text, labels=_TOPIC_LABELS)
        for labels, stats in labelled:
            gauge.add_metric(labels, _value(stats, source))
        out.append(gauge)
    for metric, help_text, source in _TOPIC_COUNTERS:
        counter = CounterMetricFamily(metric, help_text, labels=_TOPIC_LABELS)
        for labels, stats in labelled:
            counter.add_metric(labels, _value(stats, source))
        out.append(counter)
    for metric, help_text, source in _SUB_GAUGES:
        gauge = GaugeMetricFamily(metric, help_text, labels=_SUB_LABELS)
        for labels, stats in labelled:
            for sub_name, sub in sorted(stats["subscriptions"].items()):
                gauge.add_metric([*labels, sub_name], _value(sub, source))
        out.append(gauge)
    return out


class TopicMetrics(Collector):
    """The topic-level part of ``/metrics``, refreshed from Redis before each scrape.

    Args:
        fleet: which topics this gateway exports.
        stats: reads each topic's stats.
        all_topics: every topic of the fleet.
        cluster: the ``cluster`` label.
    """

    def __init__(
        self,
        fleet: Fleet,
        stats: TopicStats,
        all_topics: Callable[[], Awaitable[list[str]]],
        cluster: str,
    ) -> None:
        self._fleet = fleet
        self._stats = stats
        self._all_topics = all_topics
        self._cluster = cluster
        self._families: list[Metric] = []

    def describe(self) -> Iterator[Metric]:
        # Nothing to describe at registration: the families depend on the topics.
        return iter(())

    async def refresh(self) -> None:
        """Read the stats of every topic this gateway exports."""
        try:
            await self._fleet.heartbeat()
            names = [t for t in await self._all_topics() if self._fleet.owns(t)]
            read = await asyncio.gather(*(self._stats.read(t) for t in names))
        except GatewayError as exc:
            log.warning("topic metrics not refreshed: %s", exc)
            return
        stats = {
            name: self._stats.of(data)
            for name, data in zip(names, read, strict=True)
            if data is not None
        }
        self._families = families(self._cluster, stats)

    def collect(self) -> Iterator[Metric]:
        yield from self._families
