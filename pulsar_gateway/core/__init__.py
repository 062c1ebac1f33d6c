"""The core: Pulsar's concepts over Redis, knowing no wire format.

This module is the core's public API: the front ends (:mod:`pulsar_gateway.adapters`)
import only the names below, and call the services the composition root built
(:class:`Services`), never the storage lane, the Redis client or key names.

Packages, from the bottom layer up; each imports only from the layers below it (a test
checks it):

* :mod:`.model`: topic names, message ids, the stored-entry format, subscription types,
  schemas, the Java client's key hashes. Pure, no I/O.
* :mod:`.storage`: the pipelined lane, notifications, the key schema, the Lua scripts and
  their typed calls, the embedded redis-server.
* :mod:`.policies`: namespace and topic policies, authentication, authorization.
* :mod:`.topics`: topics, partitioned topics, tenants and namespaces, schemas.
* :mod:`.fleet`: gateway membership, rates, topic stats, metrics.
* :mod:`.producing`: producers and the producer registry.
* :mod:`.consuming`: subscriptions, consumers, dispatchers.
* :mod:`.admin`: cursor and scheduled-message admin, compaction, retention and TTL,
  internal stats, tenant and namespace deletion.
"""

from __future__ import annotations

from pulsar_gateway.core.admin.compaction import (
    CompactionAlreadyRunning,
    EntryInspector,
    MessageKey,
)
from pulsar_gateway.core.admin.scheduled_messages import (
    MAX_PAGE,
    MAX_TIME_MS,
    ScheduledMessage,
    histogram_window,
)
from pulsar_gateway.core.admin.subscription_admin import CursorPosition
from pulsar_gateway.core.consuming.consumer import (
    ConsumerHandle,
    ConsumerSink,
    LastMessageId,
    redeliver_unacknowledged,
)
from pulsar_gateway.core.consuming.subscription_service import SubscriptionService
from pulsar_gateway.core.errors import (
    AlreadyExists,
    AuthenticationError,
    AuthorizationError,
    ConcurrentModification,
    ConsumerAssignError,
    ConsumerBusy,
    ConsumerNotFound,
    EncryptionRequired,
    GatewayError,
    IncompatibleSchema,
    InvalidNamespaceName,
    InvalidPartitionCount,
    InvalidTenantInfo,
    InvalidTopicName,
    MessageNotFound,
    MessageTooLarge,
    NamespaceNotFound,
    NotAllowed,
    NotEmpty,
    ProducerBlockedQuotaExceeded,
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
    ProducerBusy,
    ProducerFenced,
    ProducerNotFound,
    ServiceNotReady,
    StorageError,
    SubscriptionBusy,
    SubscriptionConflict,
    SubscriptionNotFound,
    TenantNotFound,
    TooManyTopics,
    TopicBusy,
    TopicConflict,
    TopicNotFound,
    TopicTerminated,
)
from pulsar_gateway.core.fleet.membership import Member
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.rates import ClientInfo
from pulsar_gateway.core.gate import Gate
from pulsar_gateway.core.model.access_mode import ProducerAccessMode
from pulsar_gateway.core.model.date_formatter import format_time
from pulsar_gateway.core.model.entry import (
    Delivery,
    EntryFormatError,
    StoredEntry,
    decode_ack_set,
)
from pulsar_gateway.core.model.key_hash import java_string_hash, murmur3_32_hash
from pulsar_gateway.core.model.key_shared import KeySharedMode, KeySharedPolicy
from pulsar_gateway.core.model.message_id import (
    MessageId,
    parse_stream_id,
    previous_stream_id,
    signed64,
    start_position,
    stream_id,
    time_position,
)
from pulsar_gateway.core.model.schema import (
    SCHEMA_TYPES,
    SchemaData,
    decode_version,
    encode_version,
    schema_type_name,
)
from pulsar_gateway.core.model.subscription_type import InitialPosition, SubscriptionType
from pulsar_gateway.core.model.topic_name import PARTITION_SUFFIX, TopicName, parse_topic_name
from pulsar_gateway.core.policies.authentication import AuthenticatedRole
from pulsar_gateway.core.policies.authorization import (
    AuthAction,
    AuthorizationService,
    parse_actions,
)
from pulsar_gateway.core.policies.backlog_quota import (
    BACKLOG_QUOTA_POLICY,
    QUOTA_TYPES,
    exceeds_retention,
    parse_backlog_quota,
    parse_quota_type,
)
from pulsar_gateway.core.policies.deduplication import to_record
from pulsar_gateway.core.policies.delayed_delivery import (
    DELAYED_DELIVERY_POLICY,
    DelayedDeliveryPolicy,
    DeliveryDelayNotAllowed,
)
from pulsar_gateway.core.policies.policies import (
    AUTO_SUBSCRIPTION_CREATION_POLICY,
    INACTIVE_TOPIC_POLICY,
    MAX_CONSUMERS_PER_SUBSCRIPTION_POLICY,
    MAX_CONSUMERS_PER_TOPIC_POLICY,
    MAX_PRODUCERS_POLICY,
    MAX_SUBSCRIPTIONS_POLICY,
    SUBSCRIPTION_EXPIRATION_POLICY,
    SUBSCRIPTION_TYPES_POLICY,
)
from pulsar_gateway.core.policies.rate_limits import PublishThrottle
from pulsar_gateway.core.policies.unacked_limits import (
    MAX_UNACKED_PER_CONSUMER_POLICY,
    MAX_UNACKED_PER_SUBSCRIPTION_POLICY,
)
from pulsar_gateway.core.producing.producer import EntryToAppend, ProducerHandle
from pulsar_gateway.core.producing.producer_service import ProducerService
from pulsar_gateway.core.producing.publish_buffer import PublishBuffer
from pulsar_gateway.core.services import Limits, Services
from pulsar_gateway.core.storage.scripts.append import AppendOutcome, AppendStatus
from pulsar_gateway.core.topics.cluster import Cluster, UnknownListener
from pulsar_gateway.core.topics.partitioned_topics import PartitionedTopics
from pulsar_gateway.core.topics.schema_compatibility import AUTO_UPDATE_STRATEGIES
from pulsar_gateway.core.topics.schema_compatibility import STRATEGIES as SCHEMA_STRATEGIES
from pulsar_gateway.core.topics.schema_registry import (
    ALLOW_AUTO_UPDATE_POLICY,
    AUTO_UPDATE_STRATEGY_POLICY,
    COMPATIBILITY_STRATEGY_POLICY,
    DEFAULT_ALLOW_AUTO_UPDATE,
    DEFAULT_VALIDATION_ENFORCED,
    VALIDATION_ENFORCED_POLICY,
    SchemaRegistry,
)
from pulsar_gateway.core.topics.tenants import (
    TenantInfo,
    Tenants,
    check_namespace_name,
    check_tenant_name,
)

__all__ = [
    "ALLOW_AUTO_UPDATE_POLICY",
    "AUTO_SUBSCRIPTION_CREATION_POLICY",
    "AUTO_UPDATE_STRATEGIES",
    "AUTO_UPDATE_STRATEGY_POLICY",
    "BACKLOG_QUOTA_POLICY",
    "COMPATIBILITY_STRATEGY_POLICY",
    "DEFAULT_ALLOW_AUTO_UPDATE",
    "DEFAULT_VALIDATION_ENFORCED",
    "DELAYED_DELIVERY_POLICY",
    "INACTIVE_TOPIC_POLICY",
    "MAX_CONSUMERS_PER_SUBSCRIPTION_POLICY",
    "MAX_CONSUMERS_PER_TOPIC_POLICY",
    "MAX_PAGE",
    "MAX_PRODUCERS_POLICY",
    "MAX_SUBSCRIPTIONS_POLICY",
    "MAX_TIME_MS",
    "MAX_UNACKED_PER_CONSUMER_POLICY",
    "MAX_UNACKED_PER_SUBSCRIPTION_POLICY",
    "PARTITION_SUFFIX",
    "QUOTA_TYPES",
    "SCHEMA_STRATEGIES",
    "SCHEMA_TYPES",
    "SUBSCRIPTION_EXPIRATION_POLICY",
    "SUBSCRIPTION_TYPES_POLICY",
    "VALIDATION_ENFORCED_POLICY",
    "AlreadyExists",
    "AppendOutcome",
    "AppendStatus",
    "AuthAction",
    "AuthenticatedRole",
    "AuthenticationError",
    "AuthorizationError",
    "AuthorizationService",
    "ClientInfo",
    "Cluster",
    "CompactionAlreadyRunning",
    "ConcurrentModification",
    "ConsumerAssignError",
    "ConsumerBusy",
    "ConsumerHandle",
    "ConsumerNotFound",
    "ConsumerSink",
    "CursorPosition",
    "DelayedDeliveryPolicy",
    "Delivery",
    "DeliveryDelayNotAllowed",
    "EncryptionRequired",
    "EntryFormatError",
    "EntryInspector",
    "EntryToAppend",
    "Gate",
    "GatewayError",
    "GatewayMetrics",
    "IncompatibleSchema",
    "InitialPosition",
    "InvalidNamespaceName",
    "InvalidPartitionCount",
    "InvalidTenantInfo",
    "InvalidTopicName",
    "KeySharedMode",
    "KeySharedPolicy",
    "LastMessageId",
    "Limits",
    "Member",
    "MessageId",
    "MessageKey",
    "MessageNotFound",
    "MessageTooLarge",
    "NamespaceNotFound",
    "NotAllowed",
    "NotEmpty",
    "PartitionedTopics",
    "ProducerAccessMode",
    "ProducerBlockedQuotaExceeded",
    "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException",
    "ProducerBusy",
    "ProducerFenced",
    "ProducerHandle",
    "ProducerNotFound",
    "ProducerService",
    "PublishBuffer",
    "PublishThrottle",
    "ScheduledMessage",
    "SchemaData",
    "SchemaRegistry",
    "ServiceNotReady",
    "Services",
    "StorageError",
    "StoredEntry",
    "SubscriptionBusy",
    "SubscriptionConflict",
    "SubscriptionNotFound",
    "SubscriptionService",
    "SubscriptionType",
    "TenantInfo",
    "TenantNotFound",
    "Tenants",
    "TooManyTopics",
    "TopicBusy",
    "TopicConflict",
    "TopicName",
    "TopicNotFound",
    "TopicTerminated",
    "UnknownListener",
    "check_namespace_name",
    "check_tenant_name",
    "decode_ack_set",
    "decode_version",
    "encode_version",
    "exceeds_retention",
    "format_time",
    "histogram_window",
    "java_string_hash",
    "murmur3_32_hash",
    "parse_actions",
    "parse_backlog_quota",
    "parse_quota_type",
    "parse_stream_id",
    "parse_topic_name",
    "previous_stream_id",
    "redeliver_unacknowledged",
    "schema_type_name",
    "signed64",
    "start_position",
    "stream_id",
    "time_position",
    "to_record",
]
