"""Subscriptions, consumers and the dispatchers that feed them."""

from __future__ import annotations

from pulsar_gateway.core.consuming.consumer import (
    ConsumerHandle,
    ConsumerSink,
    LastMessageId,
    redeliver_unacknowledged,
)
from pulsar_gateway.core.consuming.non_persistent import NonPersistentSubscriptions
from pulsar_gateway.core.consuming.subscription_service import SubscriptionService

__all__ = [
    "ConsumerHandle",
    "ConsumerSink",
    "LastMessageId",
    "NonPersistentSubscriptions",
    "SubscriptionService",
    "redeliver_unacknowledged",
]
