"""Topic and subscription metrics for ``/metrics``, with Pulsar's names and labels, from the
fleet's view (:mod:`pulsar_gateway.core.fleet.topic_stats`), each topic exported by one gateway.

Pulsar's brokers export, per topic they own, gauges such as ``pulsar_rate_in`` and
``pulsar_msg_backlog`` and, per subscription, ``pulsar_subscription_back_log`` and friends, labelled
``cluster``, ``namespace``, ``topic`` (and ``subscription``); a dashboard sums them over brokers.
Here every gateway could report every topic, so each topic is exported by the one scrape
target (a gateway, or the workers of one host sharing its ports) that
:meth:`pulsar_gateway.core.fleet.membership.Fleet.metrics_share` names: summing over the
fleet's scrapes counts each topic once, and the figures (backlog, delayed, unacked, and the
rates summed over every gateway's report) are the fleet's, not one gateway's.

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

from prometheus_client.utils import floatToGoString

from pulsar_gateway.core.errors import GatewayError
from pulsar_gateway.core.fleet.membership import Fleet
from pulsar_gateway.core.fleet.topic_stats import (
    SUBSCRIPTION_FIGURES,
    TOPIC_FIGURES,
    Figures,
    TopicStats,
)
from pulsar_gateway.core.model.topic_name import parse_topic_name

__all__ = ["TopicMetrics", "exposition"]

log = logging.getLogger(__name__)

#: (metric, help) of each topic figure (:data:`TOPIC_FIGURES`, same order): gauges, then
#: counters (exported with ``_total``)
_TOPIC_GAUGES = (
    ("pulsar_subscriptions_count", "Subscriptions of the topic"),
    ("pulsar_producers_count", "Connected producers"),
    ("pulsar_consumers_count", "Connected consumers"),
    ("pulsar_rate_in", "Messages published per second"),
    ("pulsar_rate_out", "Messages dispatched per second"),
    ("pulsar_throughput_in", "Bytes published per second"),
    ("pulsar_throughput_out", "Bytes dispatched per second"),
    ("pulsar_storage_size", "Bytes the topic's stream takes in Redis"),
    ("pulsar_storage_backlog_size", "Estimated bytes of the largest backlog"),
    ("pulsar_msg_backlog", "Entries in the backlogs of the topic's subscriptions"),
)
_TOPIC_COUNTERS = (
    ("pulsar_in_messages", "Messages published (live gateways, since start)"),
    ("pulsar_in_bytes", "Bytes published (live gateways, since start)"),
    ("pulsar_out_messages", "Messages dispatched (live gateways, since start)"),
    ("pulsar_out_bytes", "Bytes dispatched (live gateways, since start)"),
)
#: (metric, help) of each subscription figure (:data:`SUBSCRIPTION_FIGURES`, same order)
_SUB_GAUGES = (
    ("pulsar_subscription_back_log", "Entries in the subscription's backlog"),
    (
        "pulsar_subscription_back_log_no_delayed",
        "Backlog entries not held for delayed delivery",
    ),
    ("pulsar_subscription_delayed", "Messages scheduled for later delivery"),
    (
        "pulsar_subscription_unacked_messages",
        "Entries delivered to consumers and not acknowledged",
    ),
    ("pulsar_subscription_msg_rate_out", "Messages dispatched per second"),
    ("pulsar_subscription_msg_throughput_out", "Bytes dispatched per second"),
    ("pulsar_subscription_msg_rate_redeliver", "Messages redelivered per second"),
)
assert len(_TOPIC_GAUGES) + len(_TOPIC_COUNTERS) == len(TOPIC_FIGURES)
assert len(_SUB_GAUGES) == len(SUBSCRIPTION_FIGURES)


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


def exposition(cluster: str, topics: dict[str, Figures]) -> str:
    """The Prometheus text of ``topics`` (full name -> :func:`figures`): per metric, one
    sample per topic (or subscription), topics in name order, labels in name order."""
    # the same few values recur across topics (0.0 above all): each formatted once
    numbers: dict[float, str] = {}

    def text_of(value: float) -> str:
        text = numbers.get(value)
        if text is None:
            text = numbers[value] = _number(value)
        return text

    rows = []
    for name, (values, subs) in sorted(topics.items()):
        namespace = parse_topic_name(name).namespace
        labels = f'cluster="{_label(cluster)}",namespace="{_label(namespace)}"'
        texts = [text_of(value) for value in values]
        rows.append((labels, f'topic="{_label(name)}"', texts, subs))
    out: list[str] = []
    families = [(metric, text, "gauge") for metric, text in _TOPIC_GAUGES]
    families += [(f"{metric}_total", text, "counter") for metric, text in _TOPIC_COUNTERS]
    for i, (metric, help_text, kind) in enumerate(families):
        _family(out, metric, help_text, kind)
        out.extend(f"{metric}{{{labels},{topic}}} {texts[i]}\n" for labels, topic, texts, _ in rows)
    subscriptions = [
        (f'{labels},subscription="{_label(sub_name)}",{topic}', [text_of(v) for v in values])
        for labels, topic, _, subs in rows
        for sub_name, values in subs
    ]
    for i, (metric, help_text) in enumerate(_SUB_GAUGES):
        _family(out, metric, help_text, "gauge")
        out.extend(f"{metric}{{{labels}}} {texts[i]}\n" for labels, texts in subscriptions)
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
            exports = await self._fleet.metrics_share()
            names = [t for t in await self._all_topics() if exports(t)]
            read = await self._stats.read_many(names)
        except GatewayError as exc:
            log.warning("topic metrics not refreshed: %s", exc)
            return self.text
        stats = {name: self._stats.figures_of(data) for name, data in read.items()}
        self.text = exposition(self._cluster, stats).encode()
        return self.text
