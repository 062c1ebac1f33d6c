"""The services of one gateway, as the composition root hands them to the adapters.

The core is built in one place (:mod:`pulsar_gateway.server.wiring`), each service with
only the collaborators it uses; this is the list of what came out, for the front ends. An
adapter takes the services it calls from here: nothing in the core holds this object.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pulsar_gateway.core.admin.compaction import CompactionService
from pulsar_gateway.core.admin.internal_stats import InternalStats
from pulsar_gateway.core.admin.namespace_admin import NamespaceAdmin
from pulsar_gateway.core.admin.scheduled_messages import ScheduledMessages
from pulsar_gateway.core.admin.subscription_admin import SubscriptionAdmin
from pulsar_gateway.core.admin.unload import UnloadService
from pulsar_gateway.core.consuming.subscription_service import SubscriptionService
from pulsar_gateway.core.fleet.membership import Fleet
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.topic_metrics import TopicMetrics
from pulsar_gateway.core.fleet.topic_stats import TopicStats
from pulsar_gateway.core.gate import Gate
from pulsar_gateway.core.policies.authentication import AuthenticationService
from pulsar_gateway.core.policies.authorization import AuthorizationService
from pulsar_gateway.core.policies.backlog_quota import BacklogQuotas
from pulsar_gateway.core.policies.backlog_quota_monitor import BacklogQuotaMonitor
from pulsar_gateway.core.policies.delayed_delivery import DelayedDeliveryPolicy
from pulsar_gateway.core.policies.policies import Policies
from pulsar_gateway.core.policies.rate_limits import RateLimits
from pulsar_gateway.core.producing.producer_service import ProducerService
from pulsar_gateway.core.producing.publish_buffer import PublishBuffer
from pulsar_gateway.core.storage.topology import RedisTopology
from pulsar_gateway.core.topics.cluster import Cluster
from pulsar_gateway.core.topics.partitioned_topics import PartitionedTopics
from pulsar_gateway.core.topics.schema_registry import SchemaRegistry
from pulsar_gateway.core.topics.tenants import Tenants

__all__ = ["Limits", "Services"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Settings the front ends apply themselves.

    Attributes:
        max_message_size: the largest entry a producer may send (bytes).
        websocket_max_sessions: WebSocket sessions this gateway serves at once.
        authenticate_metrics_endpoint: ``/metrics`` and the health check need a token.
        default_delayed_delivery: the delayed-delivery policy of namespaces without one,
            as the admin API reports it.
        max_pending_publishes: publishes of one connection or WebSocket producer waiting
            for Redis at which it stops being read, until half are answered.
        max_concurrent_lookups: lookups in progress at once (more: TooManyRequests).
        http_max_request_size: the largest HTTP request body (bytes).
        default_inactive_topic_policies: the ``InactiveTopicPolicies`` JSON of topics
            without a policy (the gateway's ``brokerDeleteInactiveTopics*`` options), as
            the admin API reports it.
    """

    max_message_size: int
    websocket_max_sessions: int
    authenticate_metrics_endpoint: bool
    default_delayed_delivery: DelayedDeliveryPolicy
    max_pending_publishes: int
    max_concurrent_lookups: int
    http_max_request_size: int
    default_inactive_topic_policies: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Services:
    """Every service a front end may call.

    Attributes:
        producers: producers attach to topics (PRODUCER, WebSocket, REST produce).
        subscriptions: consumers attach to subscriptions (SUBSCRIBE, WebSocket).
        topics: topic metadata: partition counts, namespace topic lists, create, delete.
        tenants, namespaces: the tenant and namespace registry; deletions with contents.
        cluster: the cluster's name and this gateway's advertised URLs.
        schemas, policies, backlog_quotas: per-topic schemas; namespace and topic policies.
        subscription_admin, scheduled, compaction, unloads: admin operations.
        stats, internal_stats, topic_metrics, metrics: stats and Prometheus metrics.
        authentication, authorization: who a client is, and what it may do.
        health: raises when Redis does not answer (the health check).
        limits: settings the front ends apply.
        publish_buffer: bytes published and not yet stored, gateway-wide; its gate closes
            when they reach the limit (front ends stop reading producers).
        storage_backlog: closed while Redis is behind (the storage lane's queue is long):
            front ends stop reading their clients until it opens.
        fleet: the live gateways (the admin API's brokers) and this one's membership.
        backlog_quota_monitor: this gateway's backlog quota checks (run one on demand).
        runtime_configuration: this gateway's settings by Pulsar's names, secrets left
            out (``GET /admin/v2/brokers/configuration/runtime``).
        rate_limits: this gateway's publish, dispatch and subscribe rate limiters (the
            front ends pause producers on a topic's publish rate).
        redis_topology: the fleet's Redis, its nodes and their memory (the fleet
            overview); raises StorageError when Redis does not answer.
    """

    producers: ProducerService
    subscriptions: SubscriptionService
    topics: PartitionedTopics
    tenants: Tenants
    namespaces: NamespaceAdmin
    cluster: Cluster
    schemas: SchemaRegistry
    policies: Policies
    backlog_quotas: BacklogQuotas
    subscription_admin: SubscriptionAdmin
    scheduled: ScheduledMessages
    compaction: CompactionService
    unloads: UnloadService
    stats: TopicStats
    internal_stats: InternalStats
    topic_metrics: TopicMetrics
    metrics: GatewayMetrics
    authentication: AuthenticationService
    authorization: AuthorizationService
    health: Callable[[], Awaitable[object]]
    limits: Limits
    publish_buffer: PublishBuffer
    storage_backlog: Gate
    fleet: Fleet
    backlog_quota_monitor: BacklogQuotaMonitor
    runtime_configuration: Mapping[str, str]
    rate_limits: RateLimits
    redis_topology: Callable[[], Awaitable[RedisTopology]]
