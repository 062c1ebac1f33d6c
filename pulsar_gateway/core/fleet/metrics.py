"""Prometheus metrics of one gateway, in a registry of its own.

Gateway-level counters (connections, commands, HTTP requests, errors, this gateway's
messages) are prefixed ``pulsar_gateway_``; Pulsar's own topic-level names
(``pulsar_rate_in``, ``pulsar_msg_backlog``, ``pulsar_subscription_back_log``, ...) are the
fleet's figures, written by :mod:`pulsar_gateway.core.fleet.topic_metrics` after these in the
same scrape.
One registry per gateway (built by the composition root), so several gateways can live in one
process (tests, the bench) without clashing.

Counters touched for every message or command are plain integers read by a collector at
scrape time: ``prometheus_client``'s ``Counter.inc`` takes a lock, which cost a tenth of the
gateway's CPU per SEND in the bench profile.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["GatewayMetrics"]


class GatewayMetrics:
    """The counters and gauges adapters and the core update."""

    def __init__(self, cluster: str = "standalone") -> None:
        self.cluster = cluster
        self.registry = CollectorRegistry()
        r = self.registry
        self.connections = Gauge(
            "pulsar_gateway_connections", "Open client connections", ["protocol"], registry=r
        )
        self.connections_opened = Counter(
            "pulsar_gateway_connections_opened",
            "Client connections accepted",
            ["protocol"],
            registry=r,
        )
        self.connections_refused = Counter(
            "pulsar_gateway_connections_refused",
            "Client connections refused at accept, by limit (brokerMaxConnections, "
            "brokerMaxConnectionsPerIp)",
            ["protocol", "reason"],
            registry=r,
        )
        self.throttled_connections = Gauge(
            "pulsar_gateway_throttled_connections",
            "Client connections not read now, by reason: pending_publishes, "
            "pending_requests, publish_buffer, outbound_buffer_full, storage_backlog",
            ["protocol", "reason"],
            registry=r,
        )
        self.publish_buffer_bytes = Gauge(
            "pulsar_gateway_publish_buffer_bytes",
            "Bytes of published messages waiting for Redis (maxMessagePublishBufferSizeInMB)",
            registry=r,
        )
        self.storage_queue = Gauge(
            "pulsar_gateway_storage_queue",
            "Redis commands queued and not yet written (Redis is behind when this grows)",
            registry=r,
        )
        self.errors = Counter(
            "pulsar_gateway_errors",
            "Errors returned to clients, by Pulsar error name",
            ["protocol", "error"],
            registry=r,
        )
        self.storage_errors = Counter(
            "pulsar_gateway_storage_errors",
            "Redis commands failed by Redis trouble: unavailable (no connection, or lost "
            "with the command in flight) or unconfirmed (replicas did not confirm in time)",
            ["kind"],
            registry=r,
        )
        # PIP-26 promises delivery at or after the deliver-at time; how long after is what an
        # operator watches (the fleet's DelayedMessagesLate alert, docs/fleet.md)
        self.delayed_lateness = Histogram(
            "pulsar_gateway_delayed_delivery_lateness_seconds",
            "How long after its deliver-at time a scheduled message was taken for delivery "
            "(Redis's clock)",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=r,
        )
        self.http_requests = Counter(
            "pulsar_gateway_http_requests",
            "HTTP requests answered (admin, REST, WebSocket upgrades, metrics), by route",
            ["method", "route", "status"],
            registry=r,
        )
        # hot-path tallies, exported by _HotCounters
        self.in_messages = 0
        self.in_bytes = 0
        self.out_messages = 0
        self.commands: Tally[tuple[str, str]] = Tally()
        # delayed delivery policy enforcement (PIP-437), by (namespace, topic)
        self.delayed_rejected: Tally[tuple[str, str]] = Tally()
        self.fixed_delay_overridden: Tally[tuple[str, str]] = Tally()
        r.register(_HotCounters(self))

    def open_connections(self) -> int:
        """This gateway's open client connections, binary and WebSocket (the
        ``pulsar_gateway_connections`` gauge summed over protocols)."""
        return int(
            sum(
                sample.value
                for family in self.connections.collect()
                for sample in family.samples
                if sample.name == "pulsar_gateway_connections"
            )
        )

    def count_storage_errors(self, kind: str, count: int) -> None:
        """Count commands the storage lane failed (``Lane.on_error``)."""
        self.storage_errors.labels(kind).inc(count)

    def observe_delayed_lateness(self, lateness_ms: list[int]) -> None:
        """Record scheduled messages taken for delivery ``lateness_ms`` after their time."""
        for ms in lateness_ms:
            self.delayed_lateness.observe(ms / 1000)

    def count_command(self, protocol: str, command: str) -> None:
        """Count one received command."""
        self.commands[protocol, command] += 1

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)


class _HotCounters(Collector):
    def __init__(self, metrics: GatewayMetrics) -> None:
        self._m = metrics

    def collect(self) -> Iterator[Metric]:
        m = self._m
        yield CounterMetricFamily(
            "pulsar_gateway_in_messages", "Messages published through this gateway", m.in_messages
        )
        yield CounterMetricFamily(
            "pulsar_gateway_in_bytes", "Bytes published through this gateway", m.in_bytes
        )
        yield CounterMetricFamily(
            "pulsar_gateway_out_messages",
            "Messages delivered through this gateway",
            m.out_messages,
        )
        commands = CounterMetricFamily(
            "pulsar_gateway_commands", "Commands received", labels=["protocol", "command"]
        )
        for (protocol, command), count in sorted(m.commands.items()):
            commands.add_metric([protocol, command], count)
        yield commands
        # PIP-437's counters, with Pulsar's topic labels
        for name, help_text, tally in (
            (
                "pulsar_broker_topic_messages_delayed_rejected",
                "Messages refused because their delivery delay exceeded the maximum",
                m.delayed_rejected,
            ),
            (
                "pulsar_broker_topic_messages_fixed_delay_overridden",
                "Messages whose requested delivery time the fixed delay replaced",
                m.fixed_delay_overridden,
            ),
        ):
            family = CounterMetricFamily(name, help_text, labels=["cluster", "namespace", "topic"])
            for (namespace, topic), count in sorted(tally.items()):
                family.add_metric([m.cluster, namespace, topic], count)
            yield family
