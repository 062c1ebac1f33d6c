"""Prometheus metrics of one gateway, in a registry of its own.

Names follow Pulsar's where one exists (``pulsar_in_messages_total``,
``pulsar_out_messages_total``); gateway-level counters are prefixed ``pulsar_gateway_``.
One registry per :class:`~gateway.broker.Broker`, so several gateways can live in one
process (tests, the bench) without clashing.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

__all__ = ["GatewayMetrics"]


class GatewayMetrics:
    """The counters and gauges adapters and the core update."""

    def __init__(self) -> None:
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
        self.commands = Counter(
            "pulsar_gateway_commands", "Commands received", ["protocol", "command"], registry=r
        )
        self.errors = Counter(
            "pulsar_gateway_errors",
            "Errors returned to clients, by Pulsar error name",
            ["protocol", "error"],
            registry=r,
        )
        self.in_messages = Counter(
            "pulsar_in_messages", "Messages published through this gateway", registry=r
        )
        self.in_bytes = Counter(
            "pulsar_in_bytes", "Bytes published through this gateway", registry=r
        )
        self.out_messages = Counter(
            "pulsar_out_messages", "Messages delivered through this gateway", registry=r
        )

        self._command_children: dict[tuple[str, str], Any] = {}

    def count_command(self, protocol: str, command: str) -> None:
        """Count one received command (children cached: this runs per SEND and ACK)."""
        key = (protocol, command)
        child = self._command_children.get(key)
        if child is None:
            child = self._command_children[key] = self.commands.labels(protocol, command)
        child.inc()

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
