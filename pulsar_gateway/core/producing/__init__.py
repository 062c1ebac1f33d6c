"""Producers: appends to topics and the fleet-wide producer registry."""

from __future__ import annotations

from pulsar_gateway.core.producing.producer import ProducerHandle
from pulsar_gateway.core.producing.producer_registry import ProducerRegistry
from pulsar_gateway.core.producing.producer_service import ProducerService
from pulsar_gateway.core.producing.publish_buffer import PublishBuffer

__all__ = ["ProducerHandle", "ProducerRegistry", "ProducerService", "PublishBuffer"]
