"""The gateway's settings by Pulsar's names, for ``GET /admin/v2/brokers/configuration/runtime``.

Pulsar answers that with every ``ServiceConfiguration`` field as a string
(``BrokerService.getRuntimeConfiguration``). A gateway has its own settings
(:class:`~pulsar_gateway.server.config.GatewayConfig`); those that mean what a broker.conf
key means are listed here under that key, so an operator's tooling finds
``brokerServicePort`` or ``maxMessageSize`` where it looks for them. Values are written as
Java's ``String.valueOf`` writes them (``true``, ``30``), lists comma-separated, and a
setting left unset is left out.

Never listed: anything that is or may hold a secret. The token keys (``tokenSecretKey`` and
``tokenPublicKey`` may be the key itself, ``data:...``), the basic-auth file (which may be
inline too), the TLS private key's path and the Redis URL (it may carry a password; a
superuser finds where the fleet keeps its state in ``internal-configuration``). A unit test
keeps them out.
"""

from __future__ import annotations

from typing import Final

from pulsar_gateway.server.config import GatewayConfig

__all__ = ["PULSAR_NAMES", "runtime_configuration"]

#: GatewayConfig field -> the broker.conf key (``ServiceConfiguration`` field) it matches.
PULSAR_NAMES: Final[dict[str, str]] = {
    "cluster_name": "clusterName",
    "bind": "bindAddress",
    "advertised_address": "advertisedAddress",
    "advertised_listeners": "advertisedListeners",
    "port": "brokerServicePort",
    "port_tls": "brokerServicePortTls",
    "http_port": "webServicePort",
    "http_port_tls": "webServicePortTls",
    "max_message_size": "maxMessageSize",
    "keepalive_seconds": "keepAliveIntervalSeconds",
    "default_retention_minutes": "defaultRetentionTimeInMinutes",
    "default_retention_mb": "defaultRetentionSizeInMB",
    "default_message_ttl_seconds": "ttlDurationDefaultInSeconds",
    "backlog_quota_check_enabled": "backlogQuotaCheckEnabled",
    "backlog_quota_check_interval_seconds": "backlogQuotaCheckIntervalInSeconds",
    "broker_delete_inactive_topics_enabled": "brokerDeleteInactiveTopicsEnabled",
    "broker_delete_inactive_topics_frequency_seconds": "brokerDeleteInactiveTopicsFrequencySeconds",
    "broker_delete_inactive_topics_mode": "brokerDeleteInactiveTopicsMode",
    "broker_delete_inactive_topics_max_inactive_duration_seconds": (
        "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds"
    ),
    "broker_delete_inactive_partitioned_topic_metadata_enabled": (
        "brokerDeleteInactivePartitionedTopicMetadataEnabled"
    ),
    "subscription_expiration_time_minutes": "subscriptionExpirationTimeMinutes",
    "subscription_expiry_check_interval_in_minutes": "subscriptionExpiryCheckIntervalInMinutes",
    "stats_interval_seconds": "statsUpdateFrequencyInSecs",
    "delayed_delivery_enabled": "delayedDeliveryEnabled",
    "delayed_delivery_max_delay_ms": "delayedDeliveryMaxDelayInMillis",
    "managed_ledger_max_entries_per_ledger": "managedLedgerMaxEntriesPerLedger",
    "managed_ledger_max_size_per_ledger_mbytes": "managedLedgerMaxSizePerLedgerMbytes",
    "managed_ledger_min_ledger_rollover_time_minutes": "managedLedgerMinLedgerRolloverTimeMinutes",
    "managed_ledger_max_ledger_rollover_time_minutes": "managedLedgerMaxLedgerRolloverTimeMinutes",
    "max_pending_publish_requests_per_connection": "maxPendingPublishRequestsPerConnection",
    "max_message_publish_buffer_size_in_mb": "maxMessagePublishBufferSizeInMB",
    "pulsar_channel_write_buffer_high_water_mark": "pulsarChannelWriteBufferHighWaterMark",
    "pulsar_channel_write_buffer_low_water_mark": "pulsarChannelWriteBufferLowWaterMark",
    "pulsar_channel_pause_receiving_requests_if_unwritable": (
        "pulsarChannelPauseReceivingRequestsIfUnwritable"
    ),
    "broker_max_connections": "brokerMaxConnections",
    "broker_max_connections_per_ip": "brokerMaxConnectionsPerIp",
    "allow_auto_topic_creation": "allowAutoTopicCreation",
    "allow_auto_topic_creation_type": "allowAutoTopicCreationType",
    "default_num_partitions": "defaultNumPartitions",
    "max_topics_per_namespace": "maxTopicsPerNamespace",
    "max_concurrent_lookup_request": "maxConcurrentLookupRequest",
    "max_unacked_messages_per_consumer": "maxUnackedMessagesPerConsumer",
    "max_unacked_messages_per_subscription": "maxUnackedMessagesPerSubscription",
    "http_max_request_size": "httpMaxRequestSize",
    "authentication_enabled": "authenticationEnabled",
    "authorization_enabled": "authorizationEnabled",
    "superuser_roles": "superUserRoles",
    "authentication_providers": "authenticationProviders",
    "authentication_refresh_check_seconds": "authenticationRefreshCheckSeconds",
    "anonymous_user_role": "anonymousUserRole",
    "token_auth_claim": "tokenAuthClaim",
    "authenticate_metrics_endpoint": "authenticateMetricsEndpoint",
    "tls_certificate_file_path": "tlsCertificateFilePath",
    "tls_trust_certs_file_path": "tlsTrustCertsFilePath",
    "tls_require_trusted_client_cert_on_connect": "tlsRequireTrustedClientCertOnConnect",
    "tls_allow_insecure_connection": "tlsAllowInsecureConnection",
}


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, tuple | list):
        return ",".join(_text(item) for item in value)
    return str(value)


def runtime_configuration(config: GatewayConfig) -> dict[str, str]:
    """``config``'s settings under their broker.conf names, sorted by name; unset ones left
    out."""
    out = {
        name: _text(value)
        for field, name in PULSAR_NAMES.items()
        if (value := getattr(config, field)) is not None
    }
    return dict(sorted(out.items()))
