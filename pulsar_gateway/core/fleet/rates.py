"""Message rates of this gateway's producers and consumers, and their report to the fleet.

Pulsar computes ``msgRateIn``/``msgRateOut`` and their throughputs on the broker that owns a topic,
every ``statsUpdateFrequencyInSecs``. Here no gateway owns a topic: each one counts what its own
producers and consumers move (:class:`Meter`, plain integers bumped on the hot path) and, every
:data:`REPORT_INTERVAL` seconds, turns the counts into rates and writes one report per topic it
serves into the topic's ``gateway-stats`` hash (field = gateway id, value = JSON), which expires
unless renewed. Topic stats and ``/metrics`` sum the fresh reports of every gateway
(:mod:`pulsar_gateway.core.fleet.topic_stats`), so whichever gateway is asked gives the fleet's
figures.

Counters (``msgInCounter``, ``msgOutCounter``, ...) are kept per topic and subscription on
each gateway from its start; a report carries them, so the fleet's counters are the sum
over live gateways (a gateway that stops takes its share with it, as a restarted Pulsar
broker does).

Each producer and consumer in a report names the gateway its client is connected to
(``"gateway"``: its broker id, ``host:httpPort``), which Pulsar's stats need not say (there
the topic's owner is the one broker its clients connect to). With the per-topic reports a
gateway also writes a summary of itself into the fleet's ``gateways:stats`` hash (client
connections, producers, consumers, topics served, rates and throughputs summed over its
topics), which the admin API's fleet overview lists by gateway, as Pulsar's
``LoadManagerReport`` tells a broker's own figures (``LocalBrokerData``: ``numProducers``,
``numConsumers``, ``msgRateIn``, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from pulsar_gateway.core.errors import GatewayError
from pulsar_gateway.core.model import date_formatter
from pulsar_gateway.core.model.access_mode import ProducerAccessMode
from pulsar_gateway.core.periodic import Periodic
from pulsar_gateway.core.storage import fleet_store
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.lane import Lane

__all__ = [
    "REPORT_INTERVAL",
    "ClientInfo",
    "GatewayMeters",
    "Meter",
    "RateReporter",
    "ReportedConsumer",
    "ReportedProducer",
    "TopicMeters",
    "fresh_reports",
]

log = logging.getLogger(__name__)

#: Seconds between two reports of a gateway (Pulsar's statsUpdateFrequencyInSecs is 60;
#: shorter here so an operator sees a new producer's rate within seconds).
REPORT_INTERVAL = 5.0
#: A report older than this many intervals belongs to a gateway that stopped.
STALE_INTERVALS = 3
#: Reports in a row a topic may go without clients or traffic on this gateway before its
#: meters are dropped (its counters start again from zero should clients come back), as a
#: Pulsar broker drops the stats of a topic it unloads. Without this a gateway would keep
#: meters for every topic a client ever named.
IDLE_REPORTS = 60


@dataclass(slots=True)
class ClientInfo:
    """What the adapter knows of a client connection (Pulsar's ``address``,
    ``clientVersion`` and ``connectedSince`` stats fields)."""

    address: str = ""
    version: str = ""
    connected_since: str = field(default_factory=date_formatter.now)
    #: whether the client reconnects by itself when the gateway closes its producer or
    #: consumer (a binary-protocol client does; a WebSocket session does not, and in Pulsar
    #: it is the proxy's own client that reconnects, unseen), which an unload relies on
    reconnects: bool = False


@dataclass(slots=True)
class Meter:
    """Messages and bytes counted since start, and the rate over the last interval."""

    messages: int = 0
    bytes: int = 0
    redelivered: int = 0
    _last: tuple[int, int, int] = (0, 0, 0)
    rate: float = 0.0
    throughput: float = 0.0
    redeliver_rate: float = 0.0

    def add(self, messages: int, size: int) -> None:
        self.messages += messages
        self.bytes += size

    def roll(self, seconds: float) -> None:
        """Turn the counts since the last roll into per-second rates."""
        messages, size, redelivered = self._last
        if seconds > 0:
            self.rate = (self.messages - messages) / seconds
            self.throughput = (self.bytes - size) / seconds
            self.redeliver_rate = (self.redelivered - redelivered) / seconds
        self._last = (self.messages, self.bytes, self.redelivered)

    @property
    def idle(self) -> bool:
        return self.rate == 0 and self.throughput == 0 and self.redeliver_rate == 0


@dataclass(slots=True)
class TopicMeters:
    """One topic's counters on this gateway: in, and out by subscription."""

    rate_in: Meter = field(default_factory=Meter)
    rate_out: dict[str, Meter] = field(default_factory=dict)
    #: reports in a row without clients or traffic (see :data:`IDLE_REPORTS`)
    idle_reports: int = 0

    def out(self, subscription: str) -> Meter:
        meter = self.rate_out.get(subscription)
        if meter is None:
            meter = self.rate_out[subscription] = Meter()
        return meter


class GatewayMeters:
    """The meters of every topic with traffic through this gateway, by full name."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicMeters] = {}

    def topic(self, full_name: str) -> TopicMeters:
        """The meters of a topic (created on first use)."""
        meters = self.topics.get(full_name)
        if meters is None:
            meters = self.topics[full_name] = TopicMeters()
        return meters


class ReportedProducer(Protocol):
    """What a rate report tells of a producer (Pulsar ``PublisherStats``)."""

    name: str
    topic_name: str
    producer_id: int
    access_mode: ProducerAccessMode
    meter: Meter
    client: ClientInfo


class ReportedConsumer(Protocol):
    """What a rate report tells of a consumer (Pulsar ``ConsumerStats``)."""

    name: str
    uid: str
    topic_name: str
    subscription_name: str
    permits: int
    meter: Meter
    client: ClientInfo
    #: over its unacked limit, and its subscription over its own (Pulsar
    #: ``blockedConsumerOnUnackedMsgs``, ``blockedSubscriptionOnUnackedMsgs``)
    blocked_on_unacked: bool

    @property
    def subscription_blocked_on_unacked(self) -> bool: ...


def _round(value: float) -> float:
    return round(value, 3)


def _producer_report(producer: ReportedProducer, gateway: str | None) -> dict[str, Any]:
    meter = producer.meter
    return {
        "producerName": producer.name,
        "producerId": producer.producer_id,
        "accessMode": producer.access_mode.name.title().replace("_", ""),
        "msgRateIn": _round(meter.rate),
        "msgThroughputIn": _round(meter.throughput),
        "averageMsgSize": _round(meter.throughput / meter.rate) if meter.rate else 0.0,
        "address": producer.client.address,
        "clientVersion": producer.client.version,
        "connectedSince": producer.client.connected_since,
        "gateway": gateway,
    }


def _consumer_report(consumer: ReportedConsumer, gateway: str | None) -> dict[str, Any]:
    meter = consumer.meter
    return {
        "consumerName": consumer.name,
        "uid": consumer.uid,
        "msgRateOut": _round(meter.rate),
        "msgThroughputOut": _round(meter.throughput),
        "msgRateRedeliver": _round(meter.redeliver_rate),
        "msgOutCounter": meter.messages,
        "bytesOutCounter": meter.bytes,
        "availablePermits": consumer.permits,
        "blockedConsumerOnUnackedMsgs": consumer.blocked_on_unacked,
        "blockedSubscriptionOnUnackedMsgs": consumer.subscription_blocked_on_unacked,
        "address": consumer.client.address,
        "clientVersion": consumer.client.version,
        "connectedSince": consumer.client.connected_since,
        "gateway": gateway,
    }


class RateReporter:
    """Rolls this gateway's meters and writes its per-topic reports, and its summary, to
    Redis."""

    def __init__(
        self,
        lane: Lane,
        keys: KeySchema,
        *,
        gateway_id: str,
        meters: GatewayMeters,
        producers: Callable[[], Iterable[ReportedProducer]],
        consumers: Callable[[], Iterable[ReportedConsumer]],
        interval: float = REPORT_INTERVAL,
        connections: Callable[[], int] | None = None,
        broker_id: Callable[[], str | None] | None = None,
    ) -> None:
        """``producers`` and ``consumers`` list this gateway's clients at report time;
        ``connections`` counts its open client connections (binary and WebSocket) and
        ``broker_id`` names it (``host:httpPort``, None before its ports are bound)."""
        self._lane = lane
        self._keys = keys
        self._gateway_id = gateway_id
        self._meters = meters
        self._producers = producers
        self._consumers = consumers
        self._connections = connections
        self._broker_id = broker_id
        self.interval = interval
        self._last_roll = time.monotonic()
        self._reports = Periodic("rate reports", interval, self.report)

    def start(self) -> None:
        self._reports.start()

    async def stop(self) -> None:
        await self._reports.stop()

    def _roll(self) -> None:
        now = time.monotonic()
        seconds, self._last_roll = now - self._last_roll, now
        for meters in self._meters.topics.values():
            meters.rate_in.roll(seconds)
            for meter in meters.rate_out.values():
                meter.roll(seconds)
        for producer in self._producers():
            producer.meter.roll(seconds)
        for consumer in self._consumers():
            consumer.meter.roll(seconds)

    def reports(self) -> dict[str, dict[str, Any]]:
        """This gateway's report of every topic it has clients or recent traffic on."""
        out: dict[str, dict[str, Any]] = {}

        def report(topic: str) -> dict[str, Any]:
            entry = out.get(topic)
            if entry is None:
                meters = self._meters.topic(topic)
                entry = out[topic] = {
                    "msgRateIn": _round(meters.rate_in.rate),
                    "msgThroughputIn": _round(meters.rate_in.throughput),
                    "msgInCounter": meters.rate_in.messages,
                    "bytesInCounter": meters.rate_in.bytes,
                    "publishers": [],
                    "subscriptions": {
                        name: {
                            "msgRateOut": _round(m.rate),
                            "msgThroughputOut": _round(m.throughput),
                            "msgRateRedeliver": _round(m.redeliver_rate),
                            "msgOutCounter": m.messages,
                            "bytesOutCounter": m.bytes,
                            "consumers": [],
                        }
                        for name, m in meters.rate_out.items()
                    },
                }
            return entry

        gateway = self._broker_id() if self._broker_id is not None else None
        for producer in self._producers():
            entry = _producer_report(producer, gateway)
            report(producer.topic_name)["publishers"].append(entry)
        for consumer in self._consumers():
            # every consumer's subscription has a meter (made when it subscribed)
            subs = report(consumer.topic_name)["subscriptions"]
            entry = _consumer_report(consumer, gateway)
            subs[consumer.subscription_name]["consumers"].append(entry)
        for topic, meters in list(self._meters.topics.items()):
            if topic in out:
                continue
            if meters.rate_in.idle and all(m.idle for m in meters.rate_out.values()):
                # no clients and no traffic in the last interval: stop reporting it; its
                # counters stay a while, should clients come back
                meters.idle_reports += 1
                if meters.idle_reports >= IDLE_REPORTS:
                    del self._meters.topics[topic]
                continue
            report(topic)
        for topic in out:
            self._meters.topic(topic).idle_reports = 0
        return out

    def summary(self, reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """This gateway's own figures: its clients and the topics of its ``reports`` (which
        list every producer and consumer it has), and its rates and throughputs summed over
        every topic it meters (as ``LocalBrokerData.updateLocalBrokerData`` sums a broker's
        bundles)."""
        rate_in = throughput_in = rate_out = throughput_out = 0.0
        for meters in self._meters.topics.values():
            rate_in += meters.rate_in.rate
            throughput_in += meters.rate_in.throughput
            for meter in meters.rate_out.values():
                rate_out += meter.rate
                throughput_out += meter.throughput
        subscriptions = [s for r in reports.values() for s in r["subscriptions"].values()]
        return {
            "connections": self._connections() if self._connections is not None else 0,
            "producers": sum(len(r["publishers"]) for r in reports.values()),
            "consumers": sum(len(s["consumers"]) for s in subscriptions),
            "topics": len(reports),
            "msgRateIn": _round(rate_in),
            "msgRateOut": _round(rate_out),
            "msgThroughputIn": _round(throughput_in),
            "msgThroughputOut": _round(throughput_out),
        }

    async def report(self) -> None:
        """Roll the meters and write this gateway's reports and summary (pipelined)."""
        self._roll()
        ttl_ms = int(self.interval * STALE_INTERVALS * 1000)
        stamp = int(time.time() * 1000)
        calls = []
        reports = self.reports()
        for topic, entry in reports.items():
            entry["t"] = stamp
            keys = self._keys.topic(topic)
            report = json.dumps(entry)
            calls.append(fleet_store.write_rate_report(self._lane, keys, self._gateway_id, report))
            calls.append(fleet_store.expire_rate_report(self._lane, keys, ttl_ms))
        summary = json.dumps(self.summary(reports) | {"t": stamp})
        calls.append(
            fleet_store.write_gateway_summary(
                self._lane, self._keys.gateway_stats, self._gateway_id, summary
            )
        )
        await asyncio.gather(*calls)

    async def withdraw(self) -> None:
        """Remove this gateway's reports and summary (at shutdown)."""
        calls = [
            fleet_store.withdraw_rate_report(self._lane, self._keys.topic(t), self._gateway_id)
            for t in self._meters.topics
        ]
        calls.append(
            fleet_store.forget_gateways(self._lane, self._keys.gateway_stats, [self._gateway_id])
        )
        with contextlib.suppress(GatewayError):
            await asyncio.gather(*calls)


def fresh_reports(raw: list[Any], interval: float = REPORT_INTERVAL) -> list[dict[str, Any]]:
    """The reports (JSON texts, a ``gateway-stats`` hash's values) that are not stale:
    their gateway still lives."""
    horizon = time.time() * 1000 - interval * STALE_INTERVALS * 1000
    out = []
    for value in raw:
        try:
            report = orjson.loads(value)
        except ValueError:
            continue
        if isinstance(report, dict) and report.get("t", 0) >= horizon:
            out.append(report)
    return out
