"""The fleet of gateways: membership, message rates and their reports, topic stats and
Prometheus metrics."""

from __future__ import annotations

from pulsar_gateway.core.fleet.membership import Fleet
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.rates import ClientInfo, GatewayMeters, RateReporter
from pulsar_gateway.core.fleet.topic_metrics import TopicMetrics
from pulsar_gateway.core.fleet.topic_stats import TopicStats

__all__ = [
    "ClientInfo",
    "Fleet",
    "GatewayMeters",
    "GatewayMetrics",
    "RateReporter",
    "TopicMetrics",
    "TopicStats",
]
