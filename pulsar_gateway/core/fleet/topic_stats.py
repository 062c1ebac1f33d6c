"""Topic statistics (Pulsar ``TopicStats``, ``SubscriptionStats``, ``PublisherStats``,
``ConsumerStats``) as the whole fleet sees them.

Two sources, read in one script (``topic_stats.lua``): what Redis holds (stream length and memory,
each subscription's cursor, backlog, unacked and delayed counts, the live producers and consumers)
and the rate reports every gateway writes for the topics it serves
(:mod:`pulsar_gateway.core.fleet.rates`). :func:`compose` merges them into Pulsar's JSON, a pure
function of the script's answer, so any gateway asked gives the same figures.

What differs from Pulsar, by construction: ``msgBacklog`` counts entries (as Pulsar's
does: a client batch is one entry); ``unackedMessages`` counts entries held by consumers;
``backlogSize`` is estimated as the stream's memory times the share of its entries in the
backlog; counters are the sum over live gateways since they started. Beyond Pulsar, each
publisher and consumer names the gateway its client is connected to (``"gateway"``, a broker
id ``host:httpPort``, null until that gateway has reported it): in a fleet a topic's clients
may be spread over every gateway.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, TypeVar

from pulsar_gateway.core.errors import TopicNotFound
from pulsar_gateway.core.fleet.rates import REPORT_INTERVAL, fresh_reports
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.model.topic_name import PARTITION_SUFFIX
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import stats
from pulsar_gateway.core.topics.partitioned_topics import PartitionedTopics
from pulsar_gateway.core.topics.topic import Topics

__all__ = ["SUBSCRIPTION_FIGURES", "TOPIC_FIGURES", "Figures", "TopicStats", "compose", "figures"]

_RATE_FIELDS = ("msgRateOut", "msgThroughputOut", "msgRateRedeliver")
_COUNTER_FIELDS = ("msgOutCounter", "bytesOutCounter")


def _list(value: Any) -> list[Any]:
    # cjson encodes an empty Lua table as {}
    return value if isinstance(value, list) else []


def _consumer(redis_side: dict[str, Any], report: dict[str, Any] | None) -> dict[str, Any]:
    report = report or {}
    return {
        "consumerName": redis_side["name"],
        "msgRateOut": report.get("msgRateOut", 0.0),
        "msgThroughputOut": report.get("msgThroughputOut", 0.0),
        "msgRateRedeliver": report.get("msgRateRedeliver", 0.0),
        "msgOutCounter": report.get("msgOutCounter", 0),
        "bytesOutCounter": report.get("bytesOutCounter", 0),
        "availablePermits": report.get("availablePermits", 0),
        "unackedMessages": redis_side["unacked"],
        "priorityLevel": redis_side["priority"],
        "blockedConsumerOnUnackedMsgs": report.get("blockedConsumerOnUnackedMsgs", False),
        "address": report.get("address", ""),
        "clientVersion": report.get("clientVersion", ""),
        "connectedSince": report.get("connectedSince", ""),
        "metadata": {},
        # beyond Pulsar: the broker id of the gateway the consumer is connected to (None
        # until that gateway reports it)
        "gateway": report.get("gateway"),
    }


_IN_FIELDS = ("msgRateIn", "msgThroughputIn", "msgInCounter", "bytesInCounter")


@dataclass(slots=True)
class _Reports:
    """The fresh gateway reports of one topic, summed (rates and counters of every
    gateway), with the registered producers no gateway has reported yet."""

    #: the topic's in-figures and its subscriptions' out-figures, over every subscription
    totals: dict[str, float]
    #: out-figures by subscription name
    by_subscription: dict[str, dict[str, float]]
    publishers: list[dict[str, Any]]
    #: the consumers the reports list, by subscription name, in report order
    consumers: dict[str, list[dict[str, Any]]]


def _sum_reports(data: dict[str, Any], reports: list[dict[str, Any]]) -> _Reports:
    out_fields = (*_RATE_FIELDS, *_COUNTER_FIELDS)
    summed = _Reports(dict.fromkeys((*_IN_FIELDS, *out_fields), 0.0), {}, [], defaultdict(list))
    totals = summed.totals
    for report in reports:
        for field in _IN_FIELDS:
            totals[field] += report.get(field, 0)
        summed.publishers.extend(report.get("publishers") or [])
        for name, sub in (report.get("subscriptions") or {}).items():
            sub_totals = summed.by_subscription.setdefault(name, dict.fromkeys(out_fields, 0.0))
            for field in out_fields:
                value = sub.get(field, 0)
                sub_totals[field] += value
                totals[field] += value
            summed.consumers[name].extend(sub.get("consumers") or [])
    reported = {p.get("producerName") for p in summed.publishers}
    for name in _list(data.get("producers")):
        if name not in reported:  # registered, its gateway has not reported yet
            summed.publishers.append(
                {"producerName": name, "msgRateIn": 0.0, "msgThroughputIn": 0.0, "gateway": None}
            )
    return summed


def compose(data: dict[str, Any], reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Pulsar's ``TopicStats`` JSON from ``topic_stats.lua``'s answer and the fresh
    gateway reports of the topic."""
    length, size = int(data["length"]), int(data["size"])

    def backlog_size(entries: int) -> int:
        return size * entries // length if length else 0

    summed = _sum_reports(data, reports)
    totals = summed.totals
    consumer_reports = {c.get("uid", ""): c for listed in summed.consumers.values() for c in listed}
    subscriptions = {}
    for s in _list(data.get("subs")):
        name = s["name"]
        consumers = [_consumer(c, consumer_reports.get(c["uid"])) for c in _list(s["consumers"])]
        if not data.get("persistent", True):
            # a non-persistent subscription's consumers are known from the reports only
            consumers = [
                _consumer({"name": c.get("consumerName", ""), "unacked": 0, "priority": 0}, c)
                for c in summed.consumers.get(name, ())
            ]
        rates = summed.by_subscription.get(name, {})
        backlog = int(s["backlog"])
        reported = [consumer_reports.get(c["uid"]) or {} for c in _list(s["consumers"])]
        blocked = any(r.get("blockedSubscriptionOnUnackedMsgs") for r in reported)
        subscriptions[name] = {
            **{field: rates.get(field, 0.0) for field in _RATE_FIELDS},
            **{field: int(rates.get(field, 0)) for field in _COUNTER_FIELDS},
            "msgBacklog": backlog,
            "msgBacklogNoDelayed": backlog - int(s["delayed"]),
            "backlogSize": backlog_size(backlog),
            "msgDelayed": int(s["delayed"]),
            "unackedMessages": sum(c["unackedMessages"] for c in consumers),
            "type": SubscriptionType(int(s["type"])).pulsar_name,
            "msgRateExpired": 0.0,
            "isDurable": True,
            "isReplicated": False,
            "blockedSubscriptionOnUnackedMsgs": blocked,
            "consumers": consumers,
        }
    msg_rate_in = totals["msgRateIn"]
    return {
        "msgRateIn": msg_rate_in,
        "msgThroughputIn": totals["msgThroughputIn"],
        "msgRateOut": totals["msgRateOut"],
        "msgThroughputOut": totals["msgThroughputOut"],
        "msgInCounter": int(totals["msgInCounter"]),
        "bytesInCounter": int(totals["bytesInCounter"]),
        "msgOutCounter": int(totals["msgOutCounter"]),
        "bytesOutCounter": int(totals["bytesOutCounter"]),
        "averageMsgSize": totals["msgThroughputIn"] / msg_rate_in if msg_rate_in else 0.0,
        "storageSize": size,
        "backlogSize": max((sub["backlogSize"] for sub in subscriptions.values()), default=0),
        "entriesAddedCounter": int(data["added"]),
        "waitingPublishers": 0,
        "publishers": summed.publishers,
        "subscriptions": subscriptions,
        "replication": {},
    }


#: What :func:`figures` gives per topic: the topic's values (the order of
#: :data:`TOPIC_FIGURES`) and, by subscription name in name order, the subscription's (the
#: order of :data:`SUBSCRIPTION_FIGURES`).
Figures = tuple[list[float], list[tuple[str, list[float]]]]

#: The TopicStats figures :func:`figures` computes, in its order: names of ``compose``'s
#: fields, or ``len:`` / ``sum:`` of its subscriptions' lists and fields.
TOPIC_FIGURES = (
    "len:subscriptions",
    "len:publishers",
    "sum:consumers",
    "msgRateIn",
    "msgRateOut",
    "msgThroughputIn",
    "msgThroughputOut",
    "storageSize",
    "backlogSize",
    "sum:msgBacklog",
    "msgInCounter",
    "bytesInCounter",
    "msgOutCounter",
    "bytesOutCounter",
)
SUBSCRIPTION_FIGURES = (
    "msgBacklog",
    "msgBacklogNoDelayed",
    "msgDelayed",
    "unackedMessages",
    "msgRateOut",
    "msgThroughputOut",
    "msgRateRedeliver",
)


def figures(data: dict[str, Any], reports: list[dict[str, Any]]) -> Figures:
    """The numbers ``/metrics`` exports of one topic: those of :func:`compose` (the same
    inputs give the same values, tested), without building its JSON, a tenth of the
    cost on a scrape of thousands of topics."""
    length, size = int(data["length"]), int(data["size"])
    persistent = data.get("persistent", True)
    summed = _sum_reports(data, reports)
    totals = summed.totals
    subscriptions = []
    consumers = backlog_total = largest_backlog = 0
    for s in sorted(_list(data.get("subs")), key=lambda s: s["name"]):
        name = s["name"]
        backlog, delayed = int(s["backlog"]), int(s["delayed"])
        if persistent:
            held = _list(s["consumers"])
            count, unacked = len(held), sum(c["unacked"] for c in held)
        else:  # known from the reports only, holding nothing
            count, unacked = len(summed.consumers.get(name, ())), 0
        consumers += count
        backlog_total += backlog
        largest_backlog = max(largest_backlog, size * backlog // length if length else 0)
        rates = summed.by_subscription.get(name, {})
        subscriptions.append(
            (
                name,
                [
                    float(backlog),
                    float(backlog - delayed),
                    float(delayed),
                    float(unacked),
                    rates.get("msgRateOut", 0.0),
                    rates.get("msgThroughputOut", 0.0),
                    rates.get("msgRateRedeliver", 0.0),
                ],
            )
        )
    topic = [
        float(len(subscriptions)),
        float(len(summed.publishers)),
        float(consumers),
        totals["msgRateIn"],
        totals["msgRateOut"],
        totals["msgThroughputIn"],
        totals["msgThroughputOut"],
        float(size),
        float(largest_backlog),
        float(backlog_total),
        *(
            float(int(totals[field]))
            for field in ("msgInCounter", "bytesInCounter", "msgOutCounter", "bytesOutCounter")
        ),
    ]
    return topic, subscriptions


T = TypeVar("T")


async def _each(futures: list[asyncio.Future[T]]) -> list[T]:
    """The results of ``futures``, all queued already, in order. Awaited one by one: the
    lane answers them in order, so this suspends about once per pipeline, where
    ``asyncio.gather`` would add a callback and a wrapper per future (thousands in a
    scrape). The first failure is raised once all are done, so none is left unretrieved."""
    results: list[T] = []
    failure: BaseException | None = None
    for fut in futures:
        try:
            results.append(await fut)
        except Exception as exc:
            failure = failure or exc
    if failure is not None:
        raise failure
    return results


class TopicStats:
    """Reads topic stats as the fleet sees them (admin ``stats``, ``partitioned-stats``
    and ``/metrics``).

    Args:
        lane: storage; ``topics``: opens topic handles.
        partitioned_topics: tells whether a topic without data is listed.
        report_interval: the gateways' rate-report interval (older reports are stale).
    """

    def __init__(
        self,
        lane: Lane,
        topics: Topics,
        partitioned_topics: PartitionedTopics,
        report_interval: float = REPORT_INTERVAL,
    ) -> None:
        self._lane = lane
        self._topics = topics
        self._partitioned = partitioned_topics
        self.report_interval = report_interval

    async def read(self, topic: str) -> dict[str, Any] | None:
        """``topic_stats.lua``'s answer for one non-partitioned topic or partition, None
        when the topic has no data, no subscription and is not listed."""
        return (await self.read_many([topic])).get(topic)

    async def read_many(self, topics: list[str]) -> dict[str, dict[str, Any]]:
        """:meth:`read` of each of ``topics`` (those that exist): every topic's commands
        are queued before any is awaited, two rounds in all (subscription names, then the
        scripts), so a scrape of thousands of topics shares a few pipelines and creates
        no task per topic."""
        handles = [self._topics.get(topic) for topic in topics]
        names = await _each([handle.subscriptions_reply() for handle in handles])
        read = await _each(
            [
                stats.topic_stats(self._lane, handle.keys, subscriptions=subscriptions)
                for handle, subscriptions in zip(handles, names, strict=True)
            ]
        )
        out = {}
        for handle, data in zip(handles, read, strict=True):
            data["persistent"] = handle.name.persistent
            # Rate reports alone do not make a topic exist: a gateway may still report a
            # topic just deleted (its meters saw traffic in the last interval).
            if (
                not int(data["added"])
                and not _list(data.get("subs"))
                and not await self._partitioned.exists(handle.name)
            ):
                continue
            out[handle.full_name] = data
        return out

    def of(self, data: dict[str, Any]) -> dict[str, Any]:
        """:func:`compose` of ``data`` (read by :meth:`read`) with its fresh reports."""
        return compose(data, self._reports(data))

    def figures_of(self, data: dict[str, Any]) -> Figures:
        """:func:`figures` of ``data`` (read by :meth:`read`) with its fresh reports."""
        return figures(data, self._reports(data))

    def _reports(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        return fresh_reports(_list(data.get("reports")), self.report_interval)

    async def topic(self, topic: str) -> dict[str, Any]:
        """The stats of one non-partitioned topic or partition.

        Raises:
            InvalidTopicName; TopicNotFound when the topic has no data and is not listed.
        """
        data = await self.read(topic)
        if data is None:
            raise TopicNotFound(f"Topic {topic} not found")
        return self.of(data)

    async def partitioned(self, topic: str, partitions: int, per_partition: bool) -> dict[str, Any]:
        """Pulsar ``PartitionedTopicStats``: the partitions' stats summed (rates, counters,
        backlogs; publishers and consumers listed), with ``metadata.partitions`` and, when
        ``per_partition``, each partition's own stats under ``partitions``."""
        names = [f"{topic}{PARTITION_SUFFIX}{i}" for i in range(partitions)]
        parts = {name: self.of(data) for name, data in (await self.read_many(names)).items()}
        total: dict[str, Any] = {"publishers": [], "subscriptions": {}}
        for part in parts.values():
            _add(total, part)
            total["publishers"].extend(part["publishers"])
            for name, sub in part["subscriptions"].items():
                merged = total["subscriptions"].setdefault(
                    name, {"type": sub["type"], "consumers": [], "isDurable": sub["isDurable"]}
                )
                _add(merged, sub)
                merged["consumers"].extend(sub["consumers"])
        rate = total.get("msgRateIn", 0)
        total["averageMsgSize"] = total.get("msgThroughputIn", 0) / rate if rate else 0.0
        total["metadata"] = {"partitions": partitions}
        total["partitions"] = parts if per_partition else {}
        return total


def _add(total: dict[str, Any], part: dict[str, Any]) -> None:
    for field, value in part.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            total[field] = total.get(field, 0) + value
