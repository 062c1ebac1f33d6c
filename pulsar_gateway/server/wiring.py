"""The composition root of the core: builds every service with the collaborators it uses,
starts the background work and stops it again.

This is the one place that knows every part (docs/architecture.md "Layers"). Build order follows
the layers: storage, policies and auth, topics and tenants, fleet meters, producing, consuming,
fleet reports and metrics, admin. Nothing built here is handed a reference to this module or to
the whole set of services; back-references are callbacks given at construction.

Start-up: scripts loaded, notifications listening, standalone tenants created, policies
listening, then the background loops (leases, heartbeat, rate reports, maintenance, backlog
quota checks, inactive topic and subscription expiry sweeps).
Shutdown runs the other way: producers and consumers released (their unacked messages go
back to their subscriptions at once), loops stopped, reports withdrawn, the fleet left, the
lane drained.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from dataclasses import dataclass
from functools import partial

from redis.asyncio import Redis

from pulsar_gateway.core import admin, consuming, fleet, policies, producing, storage, topics
from pulsar_gateway.core.admin.compaction import EntryInspector
from pulsar_gateway.core.errors import GatewayError
from pulsar_gateway.core.policies.delayed_delivery import DelayedDeliveryPolicy
from pulsar_gateway.core.policies.retention import Lifecycle
from pulsar_gateway.core.policies.topic_creation import AutoTopicCreation, TopicCreationRules
from pulsar_gateway.core.services import Limits, Services
from pulsar_gateway.core.storage.topology import redis_topology
from pulsar_gateway.server.config import GatewayConfig
from pulsar_gateway.server.runtime_configuration import runtime_configuration

__all__ = ["Core", "build"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Core:
    """The built core of one gateway: its services, and the parts only the composition
    root starts and stops."""

    gateway_id: str
    lane: storage.Lane
    notifier: storage.Notifier
    services: Services
    membership: fleet.Fleet
    rates: fleet.RateReporter
    maintenance: admin.TopicMaintenance
    non_persistent: consuming.NonPersistentSubscriptions
    backlog_quota_monitor: policies.BacklogQuotaMonitor
    inactive_topics: admin.InactiveTopics

    async def start(self) -> None:
        s = self.services
        await self.lane.load_scripts()
        await self.lane.check_replicas()
        await self.notifier.start()
        await s.tenants.start()
        s.policies.start()
        s.rate_limits.start()
        s.producers.start()
        s.subscriptions.start()
        await s.unloads.start()
        self.membership.start()
        self.maintenance.start()
        self.backlog_quota_monitor.start()
        self.inactive_topics.start()
        self.rates.start()
        await self.membership.heartbeat()

    async def close(self) -> None:
        """Release every local producer and consumer, then stop background work."""
        s = self.services
        await s.producers.close_all()
        await s.subscriptions.close()
        await s.unloads.stop()
        await self.maintenance.stop()
        await self.backlog_quota_monitor.stop()
        await self.inactive_topics.stop()
        await self.rates.stop()
        await self.rates.withdraw()
        await s.rate_limits.stop()
        with contextlib.suppress(GatewayError):
            await self.membership.leave()
        await s.compaction.close()
        # the notifier first: on a cluster it may hold a connection of a lane's node pool
        await self.notifier.close()
        await self.lane.close()


def build(
    config: GatewayConfig,
    redis: Redis,
    inspector: EntryInspector | None = None,
    storage_url: str = "",
    redis_cluster: bool = False,
) -> Core:
    """Build the core of a gateway on ``redis``.

    Args:
        config: the gateway's settings.
        redis: the client the lane and the notifier connect with.
        inspector: reads stored entries' wire format (compaction); None refuses compaction.
        storage_url: the URL of ``redis``, reported to tools that read storage directly.
        redis_cluster: ``redis`` is a node of a Redis Cluster: route commands to its masters.

    Raises:
        ValueError: an authentication setting cannot be used (a key or a password file
            that does not load).
    """
    authentication = policies.AuthenticationService.from_settings(
        enabled=config.authentication_enabled,
        secret_key=config.token_secret_key,
        public_key=config.token_public_key,
        role_claim=config.token_auth_claim,
        providers=config.authentication_providers,
        basic_auth_conf=config.basic_auth_conf,
        anonymous_role=config.anonymous_user_role,
    )
    gateway_id = config.gateway_id or secrets.token_hex(4)
    lease_ms = int(config.consumer_lease_seconds * 1000)
    keys = storage.KeySchema(config.key_prefix)
    replica_acks = storage.ReplicaAcks(
        config.redis_replica_acks, config.redis_replica_ack_timeout_ms
    )
    metrics = fleet.GatewayMetrics(config.cluster_name)
    # what this gateway publishes as a hint, unique to the process: it wakes its own
    # listeners without the pub/sub round trip and drops the hint when it comes back
    hint = secrets.token_hex(8).encode()
    if redis_cluster:
        cluster_lane = storage.ClusterLane(
            redis, replica_acks, metrics.count_storage_errors, hint=hint
        )
        lane: storage.Lane = cluster_lane
        notifier = storage.Notifier(
            redis,
            candidates=cluster_lane.node_clients,
            route=cluster_lane.shard_of,
            refresh=cluster_lane.refresh,
            own_hint=hint,
        )
    else:
        lane = storage.Lane(redis, replica_acks, on_error=metrics.count_storage_errors, hint=hint)
        notifier = storage.Notifier(redis, own_hint=hint)
    lane.on_notified = notifier.wake

    # policies and auth
    policy_store = policies.Policies(lane, notifier, keys)
    authorization = policies.AuthorizationService(
        lane,
        keys,
        policy_store,
        # Authorization needs roles, so it is only on with authentication (as in Pulsar).
        enabled=config.authentication_enabled and config.authorization_enabled,
        superuser_roles=config.superuser_roles,
    )
    policy_store.on_change(authorization.drop_cache)
    rate_limits = policies.RateLimits(policy_store)

    # topics and tenants
    tenants = topics.Tenants(lane, keys, config.cluster_name)
    creation_rules = TopicCreationRules(
        policy_store,
        AutoTopicCreation(
            allowed=config.allow_auto_topic_creation,
            partitioned=config.allow_auto_topic_creation_type == "partitioned",
            default_partitions=config.default_num_partitions,
        ),
        config.max_topics_per_namespace,
    )
    topic_handles = topics.Topics(
        lane, keys, tenants.require_topic_namespace, config.ledger_rollover, creation_rules
    )
    partitioned = topics.PartitionedTopics(
        lane, keys, tenants.require_topic_namespace, creation_rules
    )
    schemas = topics.SchemaRegistry(lane, keys, policy_store)
    cluster = topics.Cluster(
        config.cluster_name,
        config.advertised_host,
        storage_url,
        config.key_prefix,
        config.listeners,
    )

    # producing and consuming
    meters = fleet.GatewayMeters()
    default_delayed = DelayedDeliveryPolicy(
        active=config.delayed_delivery_enabled,
        max_delay_ms=config.delayed_delivery_max_delay_ms,
    )
    publish_buffer = producing.PublishBuffer(config.publish_buffer_bytes)
    metrics.publish_buffer_bytes.set_function(lambda: publish_buffer.size)
    metrics.storage_queue.set_function(lambda: lane.queued)
    producer_service = producing.ProducerService(
        lane=lane,
        topics=topic_handles,
        registry=producing.ProducerRegistry(lane, notifier, lease_ms),
        schemas=schemas,
        policies=policy_store,
        default_delayed_delivery=default_delayed,
        metrics=metrics,
        meters=meters.topic,
        cluster_name=config.cluster_name,
        gateway_id=gateway_id,
        publish_buffer=publish_buffer,
        rate_limits=rate_limits,
    )
    non_persistent = consuming.NonPersistentSubscriptions(
        lane, notifier, metrics, meters.topic, lease_ms
    )
    subscription_service = consuming.SubscriptionService(
        lane=lane,
        notifier=notifier,
        topics=topic_handles,
        non_persistent=non_persistent,
        gateway_id=gateway_id,
        lease_ms=lease_ms,
        metrics=metrics,
        meters=meters.topic,
        policies=policy_store,
        default_unacked_limits=policies.UnackedLimits(
            config.max_unacked_messages_per_consumer,
            config.max_unacked_messages_per_subscription,
        ),
        rate_limits=rate_limits,
    )

    # the fleet: membership, rate reports, stats, metrics
    membership = fleet.Fleet(
        lane,
        keys.gateways,
        gateway_id,
        lease_ms,
        info=keys.gateway_info,
        cluster=cluster,
        stats=keys.gateway_stats,
        stats_interval=config.stats_interval_seconds,
    )
    rates = fleet.RateReporter(
        lane,
        keys,
        gateway_id=gateway_id,
        meters=meters,
        producers=producer_service.producers,
        consumers=subscription_service.consumers,
        interval=config.stats_interval_seconds,
        # the front ends count their connections in the metrics gauge (binary server,
        # WebSocket sessions)
        connections=metrics.open_connections,
        # the ports are bound after the core is built: the broker id is read at report time
        broker_id=lambda: cluster.broker_id if cluster.advertised else None,
    )
    topic_stats = fleet.TopicStats(lane, topic_handles, partitioned, rates.interval)
    topic_metrics = fleet.TopicMetrics(
        membership, topic_stats, partitioned.all_topics, config.cluster_name
    )

    # admin
    lifecycle_defaults = Lifecycle(
        config.default_message_ttl_seconds,
        config.default_retention_minutes,
        config.default_retention_mb,
        explicit_retention=False,
    )
    maintenance = admin.TopicMaintenance(
        lane,
        keys,
        policy_store,
        all_topics=partitioned.all_topics,
        defaults=lifecycle_defaults,
        gateway_id=gateway_id,
        interval=config.topic_maintenance_interval_seconds,
        registry=metrics.registry,
    )

    inactive_topics = admin.InactiveTopics(
        lane,
        keys,
        policy_store,
        partitioned,
        owns=membership.owns,
        defaults=admin.InactiveTopicPolicies(
            config.broker_delete_inactive_topics_mode,
            config.inactive_topic_max_seconds,
            config.broker_delete_inactive_topics_enabled,
        ),
        lifecycle_defaults=lifecycle_defaults,
        subscription_expiration_minutes=config.subscription_expiration_time_minutes,
        delete_partitioned_metadata=config.broker_delete_inactive_partitioned_topic_metadata_enabled,
        gc_interval=config.broker_delete_inactive_topics_frequency_seconds,
        expiry_interval=config.subscription_expiry_check_interval_in_minutes * 60,
        registry=metrics.registry,
    )

    def served_topics() -> list[str]:
        """The topics this gateway's producers and consumers use (a broker's loaded ones)."""
        used = [producer.topic_name for producer in producer_service.producers()]
        return used + [consumer.topic_name for consumer in subscription_service.consumers()]

    backlog_quota_monitor = policies.BacklogQuotaMonitor(
        lane,
        keys,
        policy_store,
        topics=served_topics,
        disconnect_producers=producer_service.disconnect,
        interval=config.backlog_quota_check_interval_seconds,
        enabled=config.backlog_quota_check_enabled,
    )
    services = Services(
        producers=producer_service,
        subscriptions=subscription_service,
        topics=partitioned,
        tenants=tenants,
        namespaces=admin.NamespaceAdmin(tenants, partitioned),
        cluster=cluster,
        schemas=schemas,
        policies=policy_store,
        backlog_quotas=policies.BacklogQuotas(lane, keys),
        subscription_admin=admin.SubscriptionAdmin(
            lane, topic_handles, partitioned, subscription_service.detach_lost
        ),
        scheduled=admin.ScheduledMessages(lane, topic_handles),
        compaction=admin.CompactionService(
            lane, keys, gateway_id=gateway_id, inspector=inspector, registry=metrics.registry
        ),
        unloads=admin.UnloadService(lane, notifier, keys, producer_service, subscription_service),
        stats=topic_stats,
        internal_stats=admin.InternalStats(lane, topic_handles, partitioned),
        topic_metrics=topic_metrics,
        metrics=metrics,
        authentication=authentication,
        authorization=authorization,
        health=lane.ping,
        limits=Limits(
            max_message_size=config.max_message_size,
            websocket_max_sessions=config.websocket_max_sessions,
            authenticate_metrics_endpoint=config.authenticate_metrics_endpoint,
            default_delayed_delivery=default_delayed,
            max_pending_publishes=config.max_pending_publish_requests_per_connection,
            max_concurrent_lookups=config.max_concurrent_lookup_request,
            http_max_request_size=config.http_max_request_size,
            default_inactive_topic_policies=inactive_topics.defaults.to_json(),
        ),
        publish_buffer=publish_buffer,
        storage_backlog=lane.backlog,
        fleet=membership,
        backlog_quota_monitor=backlog_quota_monitor,
        runtime_configuration=runtime_configuration(config),
        rate_limits=rate_limits,
        redis_topology=partial(redis_topology, lane),
    )
    return Core(
        gateway_id,
        lane,
        notifier,
        services,
        membership,
        rates,
        maintenance,
        non_persistent,
        backlog_quota_monitor,
        inactive_topics,
    )
