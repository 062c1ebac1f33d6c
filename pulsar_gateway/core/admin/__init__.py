"""Admin operations on topics and subscriptions: cursors, scheduled messages, compaction,
retention and TTL rounds, inactive topic and subscription expiry sweeps, internal stats,
tenant and namespace deletion, unloads."""

from __future__ import annotations

from pulsar_gateway.core.admin.compaction import CompactionService
from pulsar_gateway.core.admin.inactive_topics import InactiveTopicPolicies, InactiveTopics
from pulsar_gateway.core.admin.internal_stats import InternalStats
from pulsar_gateway.core.admin.namespace_admin import NamespaceAdmin
from pulsar_gateway.core.admin.scheduled_messages import ScheduledMessages
from pulsar_gateway.core.admin.subscription_admin import SubscriptionAdmin
from pulsar_gateway.core.admin.topic_maintenance import TopicMaintenance
from pulsar_gateway.core.admin.unload import UnloadService

__all__ = [
    "CompactionService",
    "InactiveTopicPolicies",
    "InactiveTopics",
    "InternalStats",
    "NamespaceAdmin",
    "ScheduledMessages",
    "SubscriptionAdmin",
    "TopicMaintenance",
    "UnloadService",
]
