"""Gateway configuration: one frozen dataclass, filled from flags, environment and defaults.

Strategy
--------
Every option exists in three places that must not drift apart: a `GatewayConfig` field, a
command-line flag and an environment variable. They are therefore derived from a single table,
`_OPTIONS`, keyed by field name:

    field                   flag                        environment variable
    ----------------------  --------------------------  ------------------------------------
    port                    --port                      PULSAR_GATEWAY_PORT
    http_port               --http-port                 PULSAR_GATEWAY_HTTP_PORT
    ...                     --<field with dashes>       PULSAR_GATEWAY_<FIELD IN UPPER CASE>

Precedence is flag > environment variable > dataclass default. An environment variable that is
set to the empty string counts as unset, so compose files can write ``PULSAR_GATEWAY_REDIS_URL=``
to mean "use the embedded Redis".

Values are checked twice by the same validators: by `parse_config`, which reports a bad value as
an argparse error naming the flag or environment variable it came from (``SystemExit(2)``), and by
`GatewayConfig.__post_init__`, so a config built in code (tests build one with ``port=0``) is held
to the same rules and raises `ValueError`.

`gateway_id` has no flag: it identifies one running process, so it is generated at start unless a
caller (a test, an embedding application) sets it in code.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final

from pulsar_gateway import build_info
from pulsar_gateway.core.model.ledger import LedgerRollover
from pulsar_gateway.core.policies.authentication import AUTHENTICATION_PROVIDERS
from pulsar_gateway.core.topics.cluster import AdvertisedListener, parse_advertised_listeners

__all__ = [
    "DEFAULT_HTTP_PORT_TLS",
    "DEFAULT_PORT_TLS",
    "ENV_PREFIX",
    "LOG_LEVELS",
    "REDIS_URL_SCHEMES",
    "GatewayConfig",
    "available_cpus",
    "build_parser",
    "parse_config",
    "version_text",
]

#: Prefix of every environment variable read by `parse_config`.
ENV_PREFIX: Final = "PULSAR_GATEWAY_"

#: Accepted values of ``log_level`` (input is case-insensitive, stored upper case).
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

#: URL schemes redis-py's ``from_url`` accepts (it compares them case-sensitively, so do we).
REDIS_URL_SCHEMES: Final = ("redis://", "rediss://", "unix://")

#: Bind addresses that mean "every interface" and so cannot be handed to a client in a LOOKUP.
_WILDCARD_ADDRESSES: Final = frozenset({"0.0.0.0", "::"})

#: What a wildcard bind advertises. Deliberately not ``socket.gethostname()``: a hostname that
#: does not resolve from the client's side is a worse default than loopback, and anything else
#: is a deployment decision that belongs in ``--advertised-address``.
_DEFAULT_ADVERTISED_HOST: Final = "127.0.0.1"

_INT32_MAX: Final = 2**31 - 1


# --------------------------------------------------------------------------------------------
# Validators: value in, normalized value out, ValueError with a human message otherwise.
# They take the already-typed value; `_OPTIONS` pairs each with a string parser for CLI/env.
# --------------------------------------------------------------------------------------------


def _check_port(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"port must be an integer, got {value!r}")
    if not 0 <= value <= 65535:
        raise ValueError(f"port must be in 0..65535 (0 = ephemeral), got {value}")
    return value


def _check_message_size(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"must be an integer, got {value!r}")
    if value <= 0:
        raise ValueError(f"must be a positive number of bytes, got {value}")
    # Sent to clients in CommandConnected.max_message_size, an int32 in PulsarApi.proto.
    if value > _INT32_MAX:
        raise ValueError(f"must fit in a signed 32-bit integer (<= {_INT32_MAX}), got {value}")
    return value


def _check_positive_seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"must be a positive, finite number of seconds, got {value!r}")
    return seconds


def _check_retention_limit(value: object) -> int:
    """Pulsar's retention limits: -1 infinite, 0 none, N minutes or megabytes."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"must be an integer, got {value!r}")
    if value < -1:
        raise ValueError(f"must be -1 (infinite), 0 (none) or positive, got {value}")
    return value


def _check_ttl_seconds(value: object) -> int:
    """Pulsar's message TTL: 0 disables expiry."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"must be an integer number of seconds, got {value!r}")
    if value < 0:
        raise ValueError(f"must be 0 (disabled) or a positive number of seconds, got {value}")
    return value


def _check_bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {value!r}")
    return value


def _check_non_negative_ms(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"must be 0 (off) or a positive number of milliseconds, got {value!r}")
    return value


def _check_replica_count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"must be 0 (off) or a number of replicas, got {value!r}")
    return value


def _check_positive_int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"must be a positive integer, got {value!r}")
    return value


def _check_workers(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"must be a positive number of processes or auto, got {value!r}")
    return value


def _check_non_negative_int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"must be 0 or a positive integer, got {value!r}")
    return value


def _check_limit_or_off(value: object) -> int:
    """Pulsar's "-1 (or 0) disables the limit" integers."""
    if not isinstance(value, int) or isinstance(value, bool) or value < -1:
        raise ValueError(f"must be -1 or 0 (no limit) or a positive integer, got {value!r}")
    return value


def _check_topic_type(value: object) -> str:
    if value not in ("non-partitioned", "partitioned"):
        raise ValueError(f"must be non-partitioned or partitioned, got {value!r}")
    return str(value)


def _check_inactive_topic_mode(value: object) -> str:
    """Pulsar's ``InactiveTopicDeleteMode``."""
    if value not in ("delete_when_no_subscriptions", "delete_when_subscriptions_caught_up"):
        raise ValueError(
            "must be delete_when_no_subscriptions or delete_when_subscriptions_caught_up, "
            f"got {value!r}"
        )
    return str(value)


def _check_optional_non_negative_int(value: object) -> int | None:
    if value is None:
        return None
    return _check_non_negative_int(value)


def _check_non_negative_minutes(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number of minutes, got {value!r}")
    minutes = float(value)
    if not math.isfinite(minutes) or minutes < 0:
        raise ValueError(f"must be 0 (off) or a positive number of minutes, got {value!r}")
    return minutes


def _check_fsync(value: object) -> str:
    if value not in ("everysec", "always"):
        raise ValueError(f"must be everysec or always, got {value!r}")
    return str(value)


def _check_non_empty(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a non-empty string, got {value!r}")
    return value


def _check_token(value: object) -> str:
    """A non-empty string without whitespace (Redis key prefix, cluster name)."""
    text = _check_non_empty(value)
    if any(ch.isspace() for ch in text):
        raise ValueError(f"must not contain whitespace, got {value!r}")
    return text


def _check_optional_token(value: object) -> str | None:
    if value is None:
        return None
    return _check_token(value)


def _check_providers(value: object) -> tuple[str, ...]:
    """Pulsar's ``authenticationProviders``: a comma-separated list of ``token``, ``tls``,
    ``basic`` or Pulsar's provider class names; stored as short names."""
    if isinstance(value, str):
        items: list[object] = list(value.split(","))
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise ValueError(f"must be a comma-separated list of providers, got {value!r}")
    providers: list[str] = []
    for item in items:
        name = item.strip() if isinstance(item, str) else item
        if name == "":
            continue
        short = AUTHENTICATION_PROVIDERS.get(name) if isinstance(name, str) else None
        if short is None:
            raise ValueError(f"unknown authentication provider {item!r} (token, tls or basic)")
        if short not in providers:
            providers.append(short)
    if not providers:
        raise ValueError("must name at least one provider (token, tls, basic)")
    return tuple(providers)


def _check_advertised_listeners(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"must be <name>:<URL>,... , got {value!r}")
    parse_advertised_listeners(value)  # ValueError naming the bad entry
    return value


def _check_optional_port(value: object) -> int | None:
    if value is None:
        return None
    return _check_port(value)


def _check_log_level(value: object) -> str:
    if not isinstance(value, str) or value.upper() not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, got {value!r}")
    return value.upper()


def _check_redis_url(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith(REDIS_URL_SCHEMES):
        schemes = ", ".join(REDIS_URL_SCHEMES[:-1]) + " or " + REDIS_URL_SCHEMES[-1]
        raise ValueError(f"Redis URL must start with {schemes}, got {value!r}")
    return value


def _check_optional_non_empty(value: object) -> str | None:
    if value is None:
        return None
    return _check_non_empty(value)


def _check_optional_role(value: object) -> str | None:
    """Pulsar's ``anonymousUserRole``: a blank value is no role (``StringUtils.isNotBlank``)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"must be a role name, got {value!r}")
    return value if value.strip() else None


def _check_roles(value: object) -> tuple[str, ...]:
    """Pulsar's ``superUserRoles``: a comma-separated list (or, in code, any iterable)."""
    if isinstance(value, str):
        items: list[object] = list(value.split(","))
    elif isinstance(value, list | tuple | set | frozenset):
        items = list(value)
    else:
        raise ValueError(f"must be a comma-separated list of roles, got {value!r}")
    roles: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"a role must be a string, got {item!r}")
        if item.strip() and item.strip() not in roles:
            roles.append(item.strip())
    return tuple(roles)


_Validator = Callable[[object], Any]

#: Field name -> validator. `GatewayConfig.__post_init__` runs every entry.
_VALIDATORS: Final[Mapping[str, _Validator]] = {
    "port": _check_port,
    "http_port": _check_port,
    "workers": _check_workers,
    "bind": _check_token,
    "advertised_address": _check_optional_token,
    "advertised_listeners": _check_advertised_listeners,
    "redis_url": _check_redis_url,
    "data_dir": _check_non_empty,
    "redis_fsync": _check_fsync,
    "redis_replica_acks": _check_replica_count,
    "redis_replica_ack_timeout_ms": _check_positive_int,
    "log_level": _check_log_level,
    "key_prefix": _check_token,
    "cluster_name": _check_token,
    "max_message_size": _check_message_size,
    "keepalive_seconds": _check_positive_seconds,
    "consumer_lease_seconds": _check_positive_seconds,
    "gateway_id": _check_optional_token,
    "default_retention_minutes": _check_retention_limit,
    "default_retention_mb": _check_retention_limit,
    "default_message_ttl_seconds": _check_ttl_seconds,
    "topic_maintenance_interval_seconds": _check_positive_seconds,
    "backlog_quota_check_enabled": _check_bool,
    "backlog_quota_check_interval_seconds": _check_positive_seconds,
    "broker_delete_inactive_topics_enabled": _check_bool,
    "broker_delete_inactive_topics_frequency_seconds": _check_positive_seconds,
    "broker_delete_inactive_topics_mode": _check_inactive_topic_mode,
    "broker_delete_inactive_topics_max_inactive_duration_seconds": (
        _check_optional_non_negative_int
    ),
    "broker_delete_inactive_partitioned_topic_metadata_enabled": _check_bool,
    "subscription_expiration_time_minutes": _check_non_negative_int,
    "subscription_expiry_check_interval_in_minutes": _check_non_negative_minutes,
    "stats_interval_seconds": _check_positive_seconds,
    "delayed_delivery_enabled": _check_bool,
    "delayed_delivery_max_delay_ms": _check_non_negative_ms,
    "managed_ledger_max_entries_per_ledger": _check_positive_int,
    "managed_ledger_max_size_per_ledger_mbytes": _check_positive_int,
    "managed_ledger_min_ledger_rollover_time_minutes": _check_non_negative_int,
    "managed_ledger_max_ledger_rollover_time_minutes": _check_positive_int,
    "websocket_max_sessions": _check_positive_int,
    "max_pending_publish_requests_per_connection": _check_positive_int,
    "max_message_publish_buffer_size_in_mb": _check_limit_or_off,
    "pulsar_channel_write_buffer_high_water_mark": _check_positive_int,
    "pulsar_channel_write_buffer_low_water_mark": _check_non_negative_int,
    "pulsar_channel_pause_receiving_requests_if_unwritable": _check_bool,
    "broker_max_connections": _check_non_negative_int,
    "broker_max_connections_per_ip": _check_non_negative_int,
    "allow_auto_topic_creation": _check_bool,
    "allow_auto_topic_creation_type": _check_topic_type,
    "default_num_partitions": _check_positive_int,
    "max_topics_per_namespace": _check_non_negative_int,
    "max_concurrent_lookup_request": _check_positive_int,
    "max_unacked_messages_per_consumer": _check_non_negative_int,
    "max_unacked_messages_per_subscription": _check_non_negative_int,
    "http_max_request_size": _check_positive_int,
    "authentication_enabled": _check_bool,
    "authorization_enabled": _check_bool,
    "superuser_roles": _check_roles,
    "token_secret_key": _check_optional_non_empty,
    "token_public_key": _check_optional_non_empty,
    "token_auth_claim": _check_token,
    "authenticate_metrics_endpoint": _check_bool,
    "authentication_providers": _check_providers,
    "authentication_refresh_check_seconds": _check_positive_seconds,
    "anonymous_user_role": _check_optional_role,
    "basic_auth_conf": _check_optional_non_empty,
    "tls_certificate_file_path": _check_optional_non_empty,
    "tls_key_file_path": _check_optional_non_empty,
    "tls_trust_certs_file_path": _check_optional_non_empty,
    "tls_require_trusted_client_cert_on_connect": _check_bool,
    "tls_allow_insecure_connection": _check_bool,
    "port_tls": _check_optional_port,
    "http_port_tls": _check_optional_port,
}

#: The TLS ports Pulsar listens on when certificates are configured and no port is given
#: (``brokerServicePortTls``, ``webServicePortTls`` in Pulsar's standalone.conf).
DEFAULT_PORT_TLS: Final = 6651
DEFAULT_HTTP_PORT_TLS: Final = 8443


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """Everything the gateway process needs to start; immutable once built.

    Attributes:
        port: Pulsar binary protocol port (Pulsar's ``brokerServicePort``); 0 = ephemeral.
        http_port: HTTP port for admin, health and metrics (``webServicePort``); 0 = ephemeral.
        workers: Gateway processes sharing the ports (``SO_REUSEPORT``), each a member of
            the fleet, under one supervising process (:mod:`.supervisor`); 1 runs the
            gateway in this process.
        bind: Address both listeners bind to.
        advertised_address: Host returned to clients in LOOKUP answers (Pulsar's
            ``advertisedAddress``); None means derive it, see `advertised_host`.
        advertised_listeners: Pulsar's ``advertisedListeners``: ``<name>:<URL>`` entries,
            comma-separated, giving clients that ask for a listener by name (their
            ``listenerName``) that listener's URLs; None = no named listeners.
        redis_url: Redis to keep all state in; None starts the embedded redis-server under
            ``data_dir`` (`pulsar_gateway.core.storage.embedded_redis`).
        data_dir: Directory for the embedded Redis's files (AOF, socket, log).
        redis_fsync: The embedded Redis's ``appendfsync``: ``everysec`` (up to a second of
            acknowledged writes lost if redis-server is killed) or ``always`` (none).
        redis_replica_acks: Replicas that must confirm a write (``WAIT``) before it is
            acknowledged to a client; 0 answers once the master has it (docs/scaling.md).
        redis_replica_ack_timeout_ms: How long a pipeline's ``WAIT`` may take; a write not
            confirmed in time fails (the client resends it).
        log_level: One of `LOG_LEVELS`; normalized to upper case.
        key_prefix: Prefix of every Redis key the gateway writes.
        cluster_name: Name reported as the Pulsar cluster (``clusterName``).
        max_message_size: Largest accepted message in bytes, reported to clients in
            CONNECTED (``max_message_size``); Pulsar's default is 5 MiB.
        keepalive_seconds: Interval of server-initiated PINGs (``keepAliveIntervalSeconds``).
        consumer_lease_seconds: How long a consumer's claim on a subscription lives in Redis
            without being renewed before another gateway may take it over.
        gateway_id: Identity of this process in Redis; None means generate one at start.
        default_retention_minutes: Retention time of topics without a retention policy
            (Pulsar ``defaultRetentionTimeInMinutes``): -1 infinite, 0 none. Applies to
            acknowledged messages of topics with subscriptions only (docs/lifecycle.md).
        default_retention_mb: Retention size likewise (``defaultRetentionSizeInMB``).
        default_message_ttl_seconds: Message TTL of topics without a messageTTL policy
            (Pulsar ``ttlDurationDefaultInSeconds``); 0 disables expiry.
        topic_maintenance_interval_seconds: How often the fleet applies retention and TTL
            to every topic (Pulsar ``retentionCheckIntervalInSeconds``).
        backlog_quota_check_enabled: Whether each gateway checks the backlog quotas of the
            topics its clients use (Pulsar ``backlogQuotaCheckEnabled``): disconnects their
            producers or evicts, by the quota's policy. New producers are checked anyway.
        backlog_quota_check_interval_seconds: How often (Pulsar
            ``backlogQuotaCheckIntervalInSeconds``).
        broker_delete_inactive_topics_enabled: Whether topics without an
            ``inactiveTopicPolicies`` policy are deleted once inactive (Pulsar
            ``brokerDeleteInactiveTopicsEnabled``, true there, false here: a namespace or
            topic policy turns deletion on either way; docs/lifecycle.md).
        broker_delete_inactive_topics_frequency_seconds: How often the fleet checks for
            inactive topics (``brokerDeleteInactiveTopicsFrequencySeconds``).
        broker_delete_inactive_topics_mode: What inactive means for topics without a
            policy (``brokerDeleteInactiveTopicsMode``): no subscriptions, or every
            subscription caught up.
        broker_delete_inactive_topics_max_inactive_duration_seconds: How long a topic
            without a policy must be inactive before it is deleted
            (``brokerDeleteInactiveTopicsMaxInactiveDurationSeconds``); None = the
            frequency.
        broker_delete_inactive_partitioned_topic_metadata_enabled: Delete a partitioned
            topic once all its partitions were deleted for inactivity
            (``brokerDeleteInactivePartitionedTopicMetadataEnabled``).
        subscription_expiration_time_minutes: Minutes without a consumer after which a
            subscription is deleted, in namespaces without a ``subscriptionExpirationTime``
            (``subscriptionExpirationTimeMinutes``); 0 = never.
        subscription_expiry_check_interval_in_minutes: How often the fleet checks for
            expired subscriptions (``subscriptionExpiryCheckIntervalInMinutes``); 0 = never.
        stats_interval_seconds: How often each gateway turns its counts into rates and
            reports them to the fleet (Pulsar ``statsUpdateFrequencyInSecs``).
        delayed_delivery_enabled: Whether delivery times are honoured on topics without a
            delayedDelivery policy (Pulsar ``delayedDeliveryEnabled``).
        delayed_delivery_max_delay_ms: Longest delay a producer may ask for on topics
            without a delayedDelivery policy (``delayedDeliveryMaxDelayInMillis``); 0 = none.
        managed_ledger_max_entries_per_ledger, managed_ledger_max_size_per_ledger_mbytes,
        managed_ledger_min_ledger_rollover_time_minutes,
        managed_ledger_max_ledger_rollover_time_minutes: When a topic's ledger is full
            and the next append opens a new one (Pulsar's settings of these names, with
            their defaults; :mod:`pulsar_gateway.core.model.ledger`).
        websocket_max_sessions: Most WebSocket sessions one gateway serves at once; a new
            session past it is refused with HTTP 429.
        max_pending_publish_requests_per_connection: SENDs of one binary connection (and
            publishes of one WebSocket producer) waiting for Redis, at which the gateway
            stops reading it until half are answered (Pulsar's
            ``maxPendingPublishRequestsPerConnection``).
        max_message_publish_buffer_size_in_mb: Bytes of published messages waiting for
            Redis, gateway-wide, at which every producing connection stops being read
            until half are answered (``maxMessagePublishBufferSizeInMB``); -1 or 0: none.
        pulsar_channel_write_buffer_high_water_mark,
        pulsar_channel_write_buffer_low_water_mark: Bytes a connection's socket buffer
            may hold before it counts as not writable (its consumers get nothing more)
            and after which it is writable again (Pulsar's
            ``pulsarChannelWriteBufferHighWaterMark`` / ``LowWaterMark``, Netty's defaults).
        pulsar_channel_pause_receiving_requests_if_unwritable: Stop reading a connection
            while it is not writable, so a client that never reads its answers cannot make
            the gateway hold them without bound (``pulsarChannelPauseReceivingRequests
            IfUnwritable``; on by default here, off in Pulsar: docs/operations.md).
        broker_max_connections, broker_max_connections_per_ip: Binary-protocol
            connections this gateway accepts at once, in all and from one IP address
            (``brokerMaxConnections``, ``brokerMaxConnectionsPerIp``); 0 = no limit.
        allow_auto_topic_creation, allow_auto_topic_creation_type,
        default_num_partitions: Whether a topic is created the first time a client names
            it, and as what (Pulsar's ``allowAutoTopicCreation``,
            ``allowAutoTopicCreationType``, ``defaultNumPartitions``); a namespace's
            ``autoTopicCreation`` policy overrides them.
        max_topics_per_namespace: Topics (partitions counted) a namespace may hold; 0 = no
            limit (``maxTopicsPerNamespace``; the namespace policy overrides it).
        max_concurrent_lookup_request: LOOKUP and PARTITIONED_METADATA requests in
            progress at once; more are answered TooManyRequests
            (``maxConcurrentLookupRequest``).
        max_unacked_messages_per_consumer, max_unacked_messages_per_subscription: Unacked
            messages at which a Shared or Key_Shared consumer, or all of a subscription's
            consumers, get nothing more until half are acknowledged, for topics without a
            policy (``maxUnackedMessagesPerConsumer``, ``...PerSubscription``); 0 = none.
        http_max_request_size: Largest HTTP request body accepted (413 beyond it):
            Pulsar's ``httpMaxRequestSize``, which has no limit by default there.
        authentication_enabled: Require credentials on binary connections and HTTP
            requests, of the ``authentication_providers`` (Pulsar
            ``authenticationEnabled``); see ``anonymous_user_role`` for clients without.
        authorization_enabled: Check the authenticated role's permissions (Pulsar
            ``authorizationEnabled``); only meaningful with authentication.
        superuser_roles: Roles allowed everything (``superUserRoles``).
        token_secret_key: HMAC key validating HS256/384/512 tokens (``tokenSecretKey``):
            ``file:///path``, ``data:;base64,...``, a path or the base64 key itself.
        token_public_key: RSA or EC public key validating RS*/PS*/ES* tokens
            (``tokenPublicKey``), DER or PEM, given the same ways.
        token_auth_claim: The claim holding the role (``tokenAuthClaim``; default ``sub``).
        authenticate_metrics_endpoint: Require a token on ``/metrics`` and the health check
            too (``authenticateMetricsEndpoint``).
        authentication_providers: How clients may authenticate (``authenticationProviders``):
            ``token`` (JWT), ``tls`` (the client certificate's common name; needs
            trusted CAs to verify certificates with) and ``basic`` (user and password,
            checked against ``basic_auth_conf``); the client's auth method picks one.
        authentication_refresh_check_seconds: How often a binary connection's credentials
            are checked for expiry (``authenticationRefreshCheckSeconds``): one that will
            have expired within two checks is asked to refresh them (AUTH_CHALLENGE).
        anonymous_user_role: The role of clients that present no credentials while
            authentication is on (``anonymousUserRole``); None refuses them.
        basic_auth_conf: The basic provider's htpasswd-style file (``basicAuthConf``): a
            path, ``file:``/``data:`` URL or the content in base64; ``user:hash`` lines,
            hashes apr1 (``$apr1$``) or DES crypt.
        tls_certificate_file_path: The server's certificate chain, PEM
            (``tlsCertificateFilePath``); with it the gateway also listens with TLS.
        tls_key_file_path: The certificate's private key, PEM (``tlsKeyFilePath``).
        tls_trust_certs_file_path: CA certificates client certificates are checked against,
            PEM (``tlsTrustCertsFilePath``); a client presenting a certificate they do not
            sign is refused during the handshake.
        tls_require_trusted_client_cert_on_connect: Refuse TLS clients without a certificate
            signed by a trusted CA (``tlsRequireTrustedClientCertOnConnect``).
        tls_allow_insecure_connection: Do not ask TLS clients for a certificate at all
            (``tlsAllowInsecureConnection``): every client is let in, none is identified by
            its certificate.
        port_tls: Pulsar binary protocol port with TLS (``brokerServicePortTls``, clients'
            ``pulsar+ssl://``); None = 6651 when a certificate is configured.
        http_port_tls: HTTPS (and ``wss://``) port (``webServicePortTls``); None = 8443 when a
            certificate is configured.

    Raises:
        ValueError: A field fails validation.
    """

    port: int = 6650
    http_port: int = 8080
    workers: int = 1
    bind: str = "0.0.0.0"
    advertised_address: str | None = None
    advertised_listeners: str | None = None
    redis_url: str | None = None
    data_dir: str = "./data"
    redis_fsync: str = "everysec"
    redis_replica_acks: int = 0
    redis_replica_ack_timeout_ms: int = 1000
    log_level: str = "INFO"
    key_prefix: str = "pgw"
    cluster_name: str = "standalone"
    max_message_size: int = 5 * 1024 * 1024
    keepalive_seconds: float = 30.0
    consumer_lease_seconds: float = 10.0
    gateway_id: str | None = None
    default_retention_minutes: int = 0
    default_retention_mb: int = 0
    default_message_ttl_seconds: int = 0
    topic_maintenance_interval_seconds: float = 60.0
    backlog_quota_check_enabled: bool = True
    backlog_quota_check_interval_seconds: float = 60.0
    broker_delete_inactive_topics_enabled: bool = False
    broker_delete_inactive_topics_frequency_seconds: float = 60.0
    broker_delete_inactive_topics_mode: str = "delete_when_no_subscriptions"
    broker_delete_inactive_topics_max_inactive_duration_seconds: int | None = None
    broker_delete_inactive_partitioned_topic_metadata_enabled: bool = False
    subscription_expiration_time_minutes: int = 0
    subscription_expiry_check_interval_in_minutes: float = 5.0
    stats_interval_seconds: float = 5.0
    delayed_delivery_enabled: bool = True
    delayed_delivery_max_delay_ms: int = 0
    managed_ledger_max_entries_per_ledger: int = 50_000
    managed_ledger_max_size_per_ledger_mbytes: int = 2048
    managed_ledger_min_ledger_rollover_time_minutes: int = 10
    managed_ledger_max_ledger_rollover_time_minutes: int = 240
    websocket_max_sessions: int = 10_000
    max_pending_publish_requests_per_connection: int = 1000
    max_message_publish_buffer_size_in_mb: int = 64
    pulsar_channel_write_buffer_high_water_mark: int = 64 * 1024
    pulsar_channel_write_buffer_low_water_mark: int = 32 * 1024
    pulsar_channel_pause_receiving_requests_if_unwritable: bool = True
    broker_max_connections: int = 0
    broker_max_connections_per_ip: int = 0
    allow_auto_topic_creation: bool = True
    allow_auto_topic_creation_type: str = "non-partitioned"
    default_num_partitions: int = 1
    max_topics_per_namespace: int = 0
    max_concurrent_lookup_request: int = 50_000
    max_unacked_messages_per_consumer: int = 50_000
    max_unacked_messages_per_subscription: int = 200_000
    http_max_request_size: int = 16 * 1024 * 1024
    authentication_enabled: bool = False
    authorization_enabled: bool = False
    superuser_roles: tuple[str, ...] = ()
    token_secret_key: str | None = None
    token_public_key: str | None = None
    token_auth_claim: str = "sub"
    authenticate_metrics_endpoint: bool = False
    authentication_providers: tuple[str, ...] = ("token",)
    authentication_refresh_check_seconds: float = 60.0
    anonymous_user_role: str | None = None
    basic_auth_conf: str | None = None
    tls_certificate_file_path: str | None = None
    tls_key_file_path: str | None = None
    tls_trust_certs_file_path: str | None = None
    tls_require_trusted_client_cert_on_connect: bool = False
    tls_allow_insecure_connection: bool = False
    port_tls: int | None = None
    http_port_tls: int | None = None

    def __post_init__(self) -> None:
        for name, check in _VALIDATORS.items():
            try:
                normalized = check(getattr(self, name))
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
            if normalized is not getattr(self, name):
                # Frozen dataclass: normalization (log level case, int seconds -> float)
                # has to bypass the generated __setattr__.
                object.__setattr__(self, name, normalized)
        self._check_tls()
        self._check_workers()
        if (
            self.authentication_enabled
            and "basic" in self.authentication_providers
            and self.basic_auth_conf is None
        ):
            # AuthenticationProviderBasic.initialize: "No basic authentication config provided"
            raise ValueError("authentication_providers: basic needs basic_auth_conf")
        if self.pulsar_channel_write_buffer_low_water_mark > (
            self.pulsar_channel_write_buffer_high_water_mark
        ):
            raise ValueError(
                "pulsar_channel_write_buffer_low_water_mark must not exceed "
                "pulsar_channel_write_buffer_high_water_mark"
            )

    @property
    def publish_buffer_bytes(self) -> int:
        """The publish buffer's limit in bytes, 0 for none."""
        return max(self.max_message_publish_buffer_size_in_mb, 0) * 1024 * 1024

    def _check_workers(self) -> None:
        """Workers share each port (``SO_REUSEPORT``): port 0 would give each worker a
        port of its own, which no client could be told."""
        if self.workers == 1:
            return
        ports = {
            "port": self.port,
            "http_port": self.http_port,
            "port_tls": self.binary_port_tls,
            "http_port_tls": self.web_port_tls,
        }
        for name, port in ports.items():
            if port == 0:
                raise ValueError(
                    f"workers: {self.workers} workers share every port; {name} 0 (a free "
                    "port) would give each worker a different one: give a port number"
                )

    def _check_tls(self) -> None:
        """The TLS options that only make sense together."""
        cert, key = self.tls_certificate_file_path, self.tls_key_file_path
        if (cert is None) != (key is None):
            raise ValueError(
                "tls_certificate_file_path and tls_key_file_path: give both or neither"
            )
        if cert is None:
            for name in ("port_tls", "http_port_tls", "tls_trust_certs_file_path"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name}: needs tls_certificate_file_path")
        certificates_unverified = (
            self.tls_trust_certs_file_path is None or self.tls_allow_insecure_connection
        )
        if (
            self.authentication_enabled
            and "tls" in self.authentication_providers
            and certificates_unverified
        ):
            raise ValueError(
                "authentication_providers: tls needs tls_trust_certs_file_path, without "
                "tls_allow_insecure_connection (client certificates must be asked for "
                "and verified)"
            )
        if self.tls_require_trusted_client_cert_on_connect:
            if self.tls_trust_certs_file_path is None:
                raise ValueError(
                    "tls_require_trusted_client_cert_on_connect: needs "
                    "tls_trust_certs_file_path (the CAs client certificates must be signed by)"
                )
            if self.tls_allow_insecure_connection:
                raise ValueError(
                    "tls_require_trusted_client_cert_on_connect and "
                    "tls_allow_insecure_connection contradict each other"
                )

    @property
    def listeners(self) -> dict[str, AdvertisedListener]:
        """The advertised listeners by name (empty without ``advertised_listeners``)."""
        if self.advertised_listeners is None:
            return {}
        return parse_advertised_listeners(self.advertised_listeners)

    @property
    def inactive_topic_max_seconds(self) -> int:
        """How long a topic without an inactiveTopicPolicies policy must be inactive before
        it is deleted: the option, else the check frequency (Pulsar's
        ``getBrokerDeleteInactiveTopicsMaxInactiveDurationSeconds``)."""
        seconds = self.broker_delete_inactive_topics_max_inactive_duration_seconds
        if seconds is None:
            return math.ceil(self.broker_delete_inactive_topics_frequency_seconds)
        return seconds

    @property
    def ledger_rollover(self) -> LedgerRollover:
        """When a topic's current ledger is full."""
        return LedgerRollover(
            max_entries=self.managed_ledger_max_entries_per_ledger,
            max_size_mb=self.managed_ledger_max_size_per_ledger_mbytes,
            min_rollover_minutes=self.managed_ledger_min_ledger_rollover_time_minutes,
            max_rollover_minutes=self.managed_ledger_max_ledger_rollover_time_minutes,
        )

    @property
    def tls_enabled(self) -> bool:
        """Whether the gateway also listens with TLS (a certificate is configured)."""
        return self.tls_certificate_file_path is not None

    @property
    def binary_port_tls(self) -> int | None:
        """The TLS binary-protocol port to listen on, None without TLS."""
        if not self.tls_enabled:
            return None
        return DEFAULT_PORT_TLS if self.port_tls is None else self.port_tls

    @property
    def web_port_tls(self) -> int | None:
        """The HTTPS port to listen on, None without TLS."""
        if not self.tls_enabled:
            return None
        return DEFAULT_HTTP_PORT_TLS if self.http_port_tls is None else self.http_port_tls

    @property
    def advertised_host(self) -> str:
        """The host clients are told to connect to in LOOKUP and partition-metadata answers.

        Returns:
            `advertised_address` if set; otherwise `bind`, unless `bind` is a wildcard
            (``0.0.0.0`` or ``::``), in which case ``127.0.0.1``.
        """
        if self.advertised_address is not None:
            return self.advertised_address
        if self.bind in _WILDCARD_ADDRESSES:
            return _DEFAULT_ADVERTISED_HOST
        return self.bind


# --------------------------------------------------------------------------------------------
# Command line and environment.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Option:
    field: str
    parse: Callable[[str], object]  # string from argv/env -> typed value (ValueError if not)
    metavar: str
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.field.upper()


def _parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {text!r}") from None


def _parse_float(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError(f"expected a number, got {text!r}") from None


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, as a container's cpuset limits
    it), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _parse_workers(text: str) -> int:
    if text.strip().lower() == "auto":
        return available_cpus()
    return _parse_int(text)


def _parse_str(text: str) -> str:
    return text


def _parse_roles(text: str) -> tuple[str, ...]:
    return tuple(text.split(","))


def _parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


_OPTIONS: Final[tuple[_Option, ...]] = (
    _Option("port", _parse_int, "PORT", "Pulsar binary protocol port (0 = pick a free one)"),
    _Option("http_port", _parse_int, "PORT", "HTTP admin/health/metrics port (0 = free one)"),
    _Option(
        "workers",
        _parse_workers,
        "N",
        "gateway processes sharing the ports, each a fleet member (auto: one per CPU); "
        "more than 1 needs fixed ports",
    ),
    _Option("bind", _parse_str, "ADDR", "address both listeners bind to"),
    _Option(
        "advertised_address",
        _parse_str,
        "HOST",
        "host given to clients in LOOKUP answers (default: the bind address, or 127.0.0.1 "
        "when binding to 0.0.0.0 or ::)",
    ),
    _Option(
        "advertised_listeners",
        _parse_str,
        "LISTENERS",
        "named listeners, <name>:<URL>,... (pulsar://, pulsar+ssl://, http://, https://): "
        "a client's listenerName gets that listener's URLs in lookups",
    ),
    _Option(
        "redis_url",
        _parse_str,
        "URL",
        "Redis holding all state: redis://, rediss:// or unix:// (default: start an "
        "embedded, AOF-persistent redis-server under --data-dir)",
    ),
    _Option("data_dir", _parse_str, "DIR", "directory for the embedded Redis's files"),
    _Option(
        "redis_fsync",
        _parse_str,
        "POLICY",
        "the embedded Redis's appendfsync: everysec, or always to lose no acknowledged "
        "write when redis-server is killed",
    ),
    _Option(
        "redis_replica_acks",
        _parse_int,
        "N",
        "acknowledge a write to clients only once N Redis replicas have it (one WAIT per "
        "pipeline); 0 = once the master has it",
    ),
    _Option(
        "redis_replica_ack_timeout_ms",
        _parse_int,
        "MS",
        "how long to wait for the replicas; a write they do not confirm in time fails",
    ),
    _Option("log_level", _parse_str, "LEVEL", f"one of {', '.join(LOG_LEVELS)} (any case)"),
    _Option("key_prefix", _parse_str, "PREFIX", "prefix of every Redis key the gateway writes"),
    _Option("cluster_name", _parse_str, "NAME", "Pulsar cluster name reported to clients"),
    _Option("max_message_size", _parse_int, "BYTES", "largest accepted message, in bytes"),
    _Option("keepalive_seconds", _parse_float, "SECONDS", "interval of keepalive PINGs"),
    _Option(
        "consumer_lease_seconds",
        _parse_float,
        "SECONDS",
        "lifetime of a consumer's lease in Redis before another gateway may take it over",
    ),
    _Option(
        "default_retention_minutes",
        _parse_int,
        "MINUTES",
        "retention time of acknowledged messages for topics without a retention policy "
        "(-1 infinite, 0 none)",
    ),
    _Option(
        "default_retention_mb",
        _parse_int,
        "MB",
        "retention size of acknowledged messages for topics without a retention policy "
        "(-1 infinite, 0 none)",
    ),
    _Option(
        "default_message_ttl_seconds",
        _parse_int,
        "SECONDS",
        "message TTL for topics without a messageTTL policy (0 = never expire)",
    ),
    _Option(
        "topic_maintenance_interval_seconds",
        _parse_float,
        "SECONDS",
        "interval of the fleet's retention and TTL rounds over every topic",
    ),
    _Option(
        "backlog_quota_check_enabled",
        _parse_bool,
        "BOOL",
        "check the backlog quotas of the topics this gateway's clients use: disconnect "
        "their producers or evict, by the quota's policy (new producers are checked anyway)",
    ),
    _Option(
        "backlog_quota_check_interval_seconds",
        _parse_float,
        "SECONDS",
        "interval of those backlog quota checks",
    ),
    _Option(
        "broker_delete_inactive_topics_enabled",
        _parse_bool,
        "BOOL",
        "delete topics without an inactiveTopicPolicies policy once inactive (a namespace "
        "or topic policy turns deletion on either way)",
    ),
    _Option(
        "broker_delete_inactive_topics_frequency_seconds",
        _parse_float,
        "SECONDS",
        "interval of the fleet's checks for inactive topics",
    ),
    _Option(
        "broker_delete_inactive_topics_mode",
        _parse_str,
        "MODE",
        "what inactive means for topics without a policy: delete_when_no_subscriptions or "
        "delete_when_subscriptions_caught_up",
    ),
    _Option(
        "broker_delete_inactive_topics_max_inactive_duration_seconds",
        _parse_int,
        "SECONDS",
        "how long a topic without a policy must be inactive before it is deleted "
        "(default: the check interval)",
    ),
    _Option(
        "broker_delete_inactive_partitioned_topic_metadata_enabled",
        _parse_bool,
        "BOOL",
        "delete a partitioned topic once every partition was deleted for inactivity",
    ),
    _Option(
        "subscription_expiration_time_minutes",
        _parse_int,
        "MINUTES",
        "delete a subscription without a consumer for this long, in namespaces without a "
        "subscriptionExpirationTime policy (0 = never)",
    ),
    _Option(
        "subscription_expiry_check_interval_in_minutes",
        _parse_float,
        "MINUTES",
        "interval of the fleet's checks for expired subscriptions (0 = no checks)",
    ),
    _Option(
        "stats_interval_seconds",
        _parse_float,
        "SECONDS",
        "how often message rates are computed and reported to the fleet (topic stats)",
    ),
    _Option(
        "delayed_delivery_enabled",
        _parse_bool,
        "BOOL",
        "honour delivery times (deliver_at/deliver_after) on topics without a "
        "delayedDelivery policy",
    ),
    _Option(
        "delayed_delivery_max_delay_ms",
        _parse_int,
        "MS",
        "longest delivery delay allowed on topics without a delayedDelivery policy (0 = none)",
    ),
    _Option(
        "managed_ledger_max_entries_per_ledger",
        _parse_int,
        "N",
        "entries after which a topic's ledger is full (Pulsar's default 50000)",
    ),
    _Option(
        "managed_ledger_max_size_per_ledger_mbytes",
        _parse_int,
        "MB",
        "bytes after which a topic's ledger is full (Pulsar's default 2048)",
    ),
    _Option(
        "managed_ledger_min_ledger_rollover_time_minutes",
        _parse_int,
        "MINUTES",
        "a full ledger is rolled over only once this old (Pulsar's default 10)",
    ),
    _Option(
        "managed_ledger_max_ledger_rollover_time_minutes",
        _parse_int,
        "MINUTES",
        "a ledger this old is rolled over at the next append, full or not (default 240)",
    ),
    _Option(
        "websocket_max_sessions",
        _parse_int,
        "N",
        "most WebSocket sessions this gateway serves at once (more get HTTP 429)",
    ),
    _Option(
        "max_pending_publish_requests_per_connection",
        _parse_int,
        "N",
        "stop reading a connection with N publishes waiting for Redis, until half are answered",
    ),
    _Option(
        "max_message_publish_buffer_size_in_mb",
        _parse_int,
        "MB",
        "stop reading every producing connection while this much published data waits "
        "for Redis, until half is answered (-1 or 0: no limit)",
    ),
    _Option(
        "pulsar_channel_write_buffer_high_water_mark",
        _parse_int,
        "BYTES",
        "unsent bytes at which a connection is not writable: its consumers get nothing "
        "more until it drains",
    ),
    _Option(
        "pulsar_channel_write_buffer_low_water_mark",
        _parse_int,
        "BYTES",
        "unsent bytes below which a connection is writable again",
    ),
    _Option(
        "pulsar_channel_pause_receiving_requests_if_unwritable",
        _parse_bool,
        "BOOL",
        "stop reading a connection while it is not writable",
    ),
    _Option(
        "broker_max_connections",
        _parse_int,
        "N",
        "binary-protocol connections accepted at once (0 = no limit); more are refused",
    ),
    _Option(
        "broker_max_connections_per_ip",
        _parse_int,
        "N",
        "binary-protocol connections accepted at once from one IP address (0 = no limit)",
    ),
    _Option(
        "allow_auto_topic_creation",
        _parse_bool,
        "BOOL",
        "create a topic the first time a client names it (a namespace's autoTopicCreation "
        "policy overrides it)",
    ),
    _Option(
        "allow_auto_topic_creation_type",
        _parse_str,
        "TYPE",
        "non-partitioned or partitioned: what auto-creation creates",
    ),
    _Option(
        "default_num_partitions",
        _parse_int,
        "N",
        "partitions of a topic auto-created partitioned",
    ),
    _Option(
        "max_topics_per_namespace",
        _parse_int,
        "N",
        "topics (partitions counted) a namespace may hold (0 = no limit)",
    ),
    _Option(
        "max_concurrent_lookup_request",
        _parse_int,
        "N",
        "lookups in progress at once; more are answered TooManyRequests",
    ),
    _Option(
        "max_unacked_messages_per_consumer",
        _parse_int,
        "N",
        "unacked messages at which a Shared or Key_Shared consumer gets nothing more "
        "until half are acknowledged, for topics without a policy (0 = no limit)",
    ),
    _Option(
        "max_unacked_messages_per_subscription",
        _parse_int,
        "N",
        "likewise for all consumers of a Shared or Key_Shared subscription (0 = no limit)",
    ),
    _Option(
        "http_max_request_size",
        _parse_int,
        "BYTES",
        "largest HTTP request body accepted; larger ones get 413",
    ),
    _Option(
        "authentication_enabled",
        _parse_bool,
        "BOOL",
        "require credentials (--authentication-providers) on binary connections and HTTP requests",
    ),
    _Option(
        "authorization_enabled",
        _parse_bool,
        "BOOL",
        "check the token's role against superuser roles, tenant admins and namespace "
        "permissions (needs --authentication-enabled)",
    ),
    _Option("superuser_roles", _parse_roles, "ROLES", "comma-separated roles allowed everything"),
    _Option(
        "token_secret_key",
        _parse_str,
        "KEY",
        "HMAC key for HS256 tokens: file:///path, data:;base64,<key>, a path or base64",
    ),
    _Option(
        "token_public_key",
        _parse_str,
        "KEY",
        "RSA/EC public key (DER or PEM) for RS256/ES256 tokens, given as for the secret key",
    ),
    _Option("token_auth_claim", _parse_str, "CLAIM", "the token claim holding the role"),
    _Option(
        "authenticate_metrics_endpoint",
        _parse_bool,
        "BOOL",
        "require a token on /metrics and the health check as well",
    ),
    _Option(
        "authentication_providers",
        _parse_str,
        "LIST",
        "authentication providers, comma-separated: token, tls, basic (or Pulsar's class "
        "names); the client's auth method picks one",
    ),
    _Option(
        "authentication_refresh_check_seconds",
        _parse_float,
        "SECONDS",
        "how often a connection's token is checked; one about to expire is asked to refresh",
    ),
    _Option(
        "anonymous_user_role",
        _parse_str,
        "ROLE",
        "with authentication on, the role of clients presenting no credentials "
        "(none: they are refused)",
    ),
    _Option(
        "basic_auth_conf",
        _parse_str,
        "CONF",
        "the basic provider's htpasswd file (user:hash lines, apr1 or crypt): a path, "
        "file:///path, data:;base64,<content> or the content in base64",
    ),
    _Option(
        "tls_certificate_file_path",
        _parse_str,
        "PATH",
        "server certificate chain (PEM): also listen with TLS (pulsar+ssl://, https://, wss://)",
    ),
    _Option("tls_key_file_path", _parse_str, "PATH", "the certificate's private key (PEM)"),
    _Option(
        "tls_trust_certs_file_path",
        _parse_str,
        "PATH",
        "CA certificates (PEM) that client certificates must be signed by",
    ),
    _Option(
        "tls_require_trusted_client_cert_on_connect",
        _parse_bool,
        "BOOL",
        "refuse TLS clients without a certificate signed by a trusted CA",
    ),
    _Option(
        "tls_allow_insecure_connection",
        _parse_bool,
        "BOOL",
        "do not ask TLS clients for a certificate (none is identified by one)",
    ),
    _Option(
        "port_tls",
        _parse_int,
        "PORT",
        f"Pulsar binary protocol port with TLS (default {DEFAULT_PORT_TLS} with a certificate)",
    ),
    _Option(
        "http_port_tls",
        _parse_int,
        "PORT",
        f"HTTPS/WSS port (default {DEFAULT_HTTP_PORT_TLS} with a certificate)",
    ),
)

_DEFAULTS: Final[Mapping[str, object]] = {f.name: f.default for f in fields(GatewayConfig)}


def version_text() -> str:
    """``pulsar-gateway <version> (<build>)``: the installed version, and whether the
    per-message modules run compiled (:func:`pulsar_gateway.build_info`)."""
    try:
        version = importlib.metadata.version("pulsar-redis-gateway")
    except importlib.metadata.PackageNotFoundError:  # a source tree that is not installed
        version = "(not installed)"
    return f"pulsar-gateway {version} ({build_info()})"


class _VersionAction(argparse.Action):
    """``--version``, worked out only when asked (it looks at the installed files)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        sys.stdout.write(version_text() + "\n")  # where argparse's own "version" action writes
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """Build the ``pulsar-gateway`` argument parser.

    Every flag defaults to None so `parse_config` can tell "not given" from "given"; the help
    text shows the real default and the environment variable instead.

    Returns:
        A parser whose namespace attributes are `GatewayConfig` field names holding raw
        strings or None.
    """
    parser = argparse.ArgumentParser(
        prog="pulsar-gateway",
        description="A Pulsar-compatible messaging gateway whose state lives in Redis.",
        epilog=(
            f"Every option can also be set with an environment variable {ENV_PREFIX}<NAME> "
            "(shown with each option); an empty variable counts as unset. "
            "Precedence: flag, then environment variable, then default."
        ),
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="say the version and which build runs"
    )
    for option in _OPTIONS:
        default = _DEFAULTS[option.field]
        shown = "none" if default is None else str(default)
        parser.add_argument(
            option.flag,
            dest=option.field,
            metavar=option.metavar,
            default=None,
            help=f"{option.help} [env: {option.env}; default: {shown}]",
        )
    return parser


def parse_config(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> GatewayConfig:
    """Build a `GatewayConfig` from command-line flags, environment variables and defaults.

    Args:
        argv: Arguments without the program name; None means ``sys.argv[1:]``.
        environ: Environment to read ``PULSAR_GATEWAY_*`` variables from; None means
            ``os.environ``.

    Returns:
        The validated configuration. ``gateway_id`` is always None (generated at start).

    Raises:
        SystemExit: With status 2 and a message naming the offending flag or environment
            variable when a value is malformed or out of range (``argparse`` convention), or
            with status 0 after printing ``--help``.
    """
    parser = build_parser()
    namespace = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    env = os.environ if environ is None else environ

    values: dict[str, object] = {}
    for option in _OPTIONS:
        raw: str | None = getattr(namespace, option.field)
        if raw is not None:
            source = f"argument {option.flag}"
        else:
            raw = env.get(option.env) or None  # empty string = unset
            source = f"environment variable {option.env}"
        if raw is None:
            continue
        try:
            values[option.field] = _VALIDATORS[option.field](option.parse(raw))
        except ValueError as exc:
            parser.error(f"{source}: {exc}")
    try:
        return GatewayConfig(**values)  # type: ignore[arg-type]  # types checked by _VALIDATORS
    except ValueError as exc:  # options that contradict each other (the TLS ones)
        parser.error(str(exc))
