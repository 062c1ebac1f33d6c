"""Topic and subscription metrics for ``/metrics``, with Pulsar's names and labels, from the
fleet's view (:mod:`pulsar_gateway.core.fleet.topic_stats`), each topic exported by one gateway.

Pulsar's brokers export, per topic they own, gauges such as ``pulsar_rate_in`` and
``pulsar_msg_backlog`` and, per subscription, ``pulsar_subscription_back_log`` and friends, labelled
``cluster``, ``namespace``, ``topic`` (and ``subscription``); a dashboard sums them over brokers.
Here every gateway could report every topic, so each topic is exported by the one gateway
:meth:`pulsar_gateway.core.fleet.membership.Fleet.owns` names: summing over the fleet's scrapes
counts each topic once, and the figures (backlog, delayed, unacked, and the rates summed over every
gateway's report) are the fleet's, not one gateway's.

There are thousands of these series on a busy gateway (21 per topic with one subscription),
so they are written as Prometheus text directly (format 0.0.4, byte for byte what
``prometheus_client`` writes for the same families, tested), not built as metric families
and encoded by the library: that cost about 0.2 ms of gateway CPU per topic per scrape.
:meth:`TopicMetrics.refresh` reads Redis and writes the text before each scrape; the HTTP
handler appends it to the gateway's own metrics.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client.utils import floatToGoString

from pulsar_gateway.core.errors import GatewayError
from pulsar_gateway.core.fleet.membership import Fleet
from pulsar_gateway.core.fleet.topic_stats import TopicStats
from pulsar_gateway.core.model.topic_name import parse_topic_name

__all__ = ["TopicMetrics", "exposition"]

log = logging.getLogger(__name__)

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


def _number(value: float) -> str:
    # prometheus_client's floatToGoString, with the common cases first
    if value == 0.0:
        return "0.0"
    text = repr(value)
    if text.find(".") > 6 or not math.isfinite(value):
        return str(floatToGoString(value))  # type: ignore[no-untyped-call]
    return text


def _label(value: str) -> str:
    # the text format's label-value escapes
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _family(out: list[str], name: str, help_text: str, kind: str) -> None:
    escaped = help_text.replace("\\", "\\\\").replace("\n", "\\n")
    out.append(f"# HELP {name} {escaped}\n# TYPE {name} {kind}\n")


def exposition(cluster: str, topics: dict[str, dict[str, Any]]) -> str:
    """The Prometheus text of ``topics`` (full name -> TopicStats JSON): per metric, one
    sample per topic (or subscription), topics in name order, labels in name order."""
    rows = []
    for name, stats in sorted(topics.items()):
        namespace = parse_topic_name(name).namespace
        labels = f'cluster="{_label(cluster)}",namespace="{_label(namespace)}"'
        rows.append((labels, f'topic="{_label(name)}"', stats))
    out: list[str] = []
    for metric, help_text, source in _TOPIC_GAUGES:
        _family(out, metric, help_text, "gauge")
        out.extend(
            f"{metric}{{{labels},{topic}}} {_number(_value(stats, source))}\n"
            for labels, topic, stats in rows
        )
    for metric, help_text, source in _TOPIC_COUNTERS:
        total = f"{metric}_total"
        _family(out, total, help_text, "counter")
        out.extend(
            f"{total}{{{labels},{topic}}} {_number(_value(stats, source))}\n"
            for labels, topic, stats in rows
        )
    subscriptions = [
        (f'{labels},subscription="{_label(sub_name)}",{topic}', sub)
        for labels, topic, stats in rows
        for sub_name, sub in sorted(stats["subscriptions"].items())
    ]
    for metric, help_text, source in _SUB_GAUGES:
        _family(out, metric, help_text, "gauge")
        out.extend(
            f"{metric}{{{labels}}} {_number(_value(sub, source))}\n"
            for labels, sub in subscriptions
        )
    return "".join(out)


class TopicMetrics:
    """The topic-level part of ``/metrics``, read from Redis before each scrape.

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
        #: the text of the last refresh (kept when Redis cannot be read)
        self.text = b""

    async def refresh(self) -> bytes:
        """Read the stats of every topic this gateway exports; their Prometheus text."""
        try:
            await self._fleet.heartbeat()
            names = [t for t in await self._all_topics() if self._fleet.owns(t)]
            read = await self._stats.read_many(names)
        except GatewayError as exc:
            log.warning("topic metrics not refreshed: %s", exc)
            return self.text
        stats = {name: self._stats.of(data) for name, data in read.items()}
        self.text = exposition(self._cluster, stats).encode()
        return self.text
