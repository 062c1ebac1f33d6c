"""The OpenAPI 3.0 description of the HTTP front, served at ``/admin/v2/openapi.json``.

The description is built from the routes the app actually serves (``app.router``), each
looked up in :data:`OPERATIONS` for its summary, tag, parameters and JSON shapes: a route
added without an entry here is left out of the description, and ``tests/integration/
test_openapi.py`` fails, so the description cannot silently fall behind the code. Policy
routes are described from :data:`pulsar_gateway.adapters.http.policies.POLICIES`, which carries each
policy's JSON schema.

Shapes are Pulsar's JSON (``TopicStats``, ``ProducerMessages``, ...) with their main
fields; ``additionalProperties`` stays open where Pulsar's objects have more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from pulsar_gateway.adapters.http.policies import POLICIES

__all__ = ["OPERATIONS", "PATH", "Doc", "add_routes", "build_spec", "served_operations"]

PATH = "/admin/v2/openapi.json"

_TOPIC = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}"
_SUBSCRIPTION = f"{_TOPIC}/subscription/{{subscription}}"


@dataclass(frozen=True, slots=True)
class Doc:
    """One operation: its tag, summary, JSON request and response components (names in
    :data:`SCHEMAS`, or a literal JSON schema), query parameters and success status."""

    tag: str
    summary: str
    body: str | dict[str, Any] | None = None
    response: str | dict[str, Any] | None = None
    query: tuple[tuple[str, str], ...] = ()
    ok: int = 200
    content_type: str = "application/json"


def _obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": True}


_STR = {"type": "string"}
_INT = {"type": "integer", "format": "int64"}
_NUM = {"type": "number"}
_BOOL = {"type": "boolean"}
_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}

#: Components shared by operations.
SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": {
        "type": "object",
        "properties": {"reason": _STR},
        "required": ["reason"],
    },
    "PartitionedTopicMetadata": _obj(partitions=_INT),
    "Partitions": {
        "oneOf": [_INT, {"$ref": "#/components/schemas/PartitionedTopicMetadata"}],
        "description": "a partition count, or PartitionedTopicMetadata",
    },
    "ConsumerStats": _obj(
        consumerName=_STR,
        msgRateOut=_NUM,
        msgThroughputOut=_NUM,
        msgRateRedeliver=_NUM,
        msgOutCounter=_INT,
        bytesOutCounter=_INT,
        availablePermits=_INT,
        unackedMessages=_INT,
        address=_STR,
        clientVersion=_STR,
        connectedSince=_STR,
    ),
    "PublisherStats": _obj(
        producerName=_STR, producerId=_INT, msgRateIn=_NUM, msgThroughputIn=_NUM, address=_STR
    ),
    "SubscriptionStats": _obj(
        type=_STR,
        msgBacklog=_INT,
        msgBacklogNoDelayed=_INT,
        msgDelayed=_INT,
        unackedMessages=_INT,
        backlogSize=_INT,
        msgRateOut=_NUM,
        msgThroughputOut=_NUM,
        msgRateRedeliver=_NUM,
        msgOutCounter=_INT,
        bytesOutCounter=_INT,
        consumers={"type": "array", "items": {"$ref": "#/components/schemas/ConsumerStats"}},
    ),
    "TopicStats": _obj(
        msgRateIn=_NUM,
        msgRateOut=_NUM,
        msgThroughputIn=_NUM,
        msgThroughputOut=_NUM,
        msgInCounter=_INT,
        msgOutCounter=_INT,
        bytesInCounter=_INT,
        bytesOutCounter=_INT,
        averageMsgSize=_NUM,
        storageSize=_INT,
        backlogSize=_INT,
        publishers={"type": "array", "items": {"$ref": "#/components/schemas/PublisherStats"}},
        subscriptions={
            "type": "object",
            "additionalProperties": {"$ref": "#/components/schemas/SubscriptionStats"},
        },
    ),
    "PartitionedTopicStats": {
        "allOf": [
            {"$ref": "#/components/schemas/TopicStats"},
            _obj(
                metadata={"$ref": "#/components/schemas/PartitionedTopicMetadata"},
                partitions={
                    "type": "object",
                    "additionalProperties": {"$ref": "#/components/schemas/TopicStats"},
                },
            ),
        ]
    },
    "ProducerMessage": _obj(
        payload=_STR,
        key=_STR,
        properties=_STR_MAP,
        eventTime=_STR,
        sequenceId=_INT,
        deliverAt=_INT,
        deliverAfterMs=_INT,
        replicationClusters={"type": "array", "items": _STR},
        disableReplication=_BOOL,
    ),
    "ProducerMessages": _obj(
        producerName=_STR,
        keySchema=_STR,
        valueSchema=_STR,
        schemaVersion=_INT,
        messages={"type": "array", "items": {"$ref": "#/components/schemas/ProducerMessage"}},
    ),
    "ProducerAcks": _obj(
        schemaVersion=_INT,
        messagePublishResults={
            "type": "array",
            "items": _obj(messageId=_STR, errorCode=_INT, errorMsg=_STR),
        },
    ),
    "ScheduledMessages": _obj(
        total=_INT,
        offset=_INT,
        messages={
            "type": "array",
            "items": _obj(
                messageId=_STR,
                ledgerId=_INT,
                entryId=_INT,
                partition=_INT,
                deliverAt=_INT,
                key=_STR,
                size=_INT,
            ),
        },
    ),
    "Reschedule": _obj(deliverAt=_INT, deliverAfterMs=_INT),
    "LongRunningProcessStatus": _obj(status=_STR, lastError=_STR),
    "TopicList": {"type": "array", "items": _STR},
    "NameList": {"type": "array", "items": _STR},
    "ClusterData": _obj(
        serviceUrl=_STR, brokerServiceUrl=_STR, serviceUrlTls=_STR, brokerServiceUrlTls=_STR
    ),
    "TenantInfo": _obj(
        adminRoles={"type": "array", "items": _STR},
        allowedClusters={"type": "array", "items": _STR},
    ),
    "Policies": _obj(
        retention_policies={"type": "object"},
        message_ttl_in_seconds=_INT,
        deduplicationEnabled=_BOOL,
        delayed_delivery_policies={"type": "object"},
        backlog_quota_map={"type": "object"},
    ),
    "BacklogQuota": _obj(limitSize=_INT, limitTime=_INT, policy={"type": "string"}),
    "BacklogQuotaMap": {
        "type": "object",
        "additionalProperties": {"$ref": "#/components/schemas/BacklogQuota"},
    },
    "LookupData": _obj(
        brokerUrl=_STR,
        brokerUrlTls=_STR,
        httpUrl=_STR,
        httpUrlTls=_STR,
        nativeUrl=_STR,
        brokerUrlSsl=_STR,
    ),
}

_CLUSTERS, _TENANTS, _NAMESPACES, _LOOKUP = "clusters", "tenants", "namespaces", "lookup"
_NS = "/admin/v2/namespaces/{tenant}/{namespace}"
_NS_V1 = "/admin/namespaces/{tenant}/{cluster}/{namespace}"
_QUOTA_TYPE = (("backlogQuotaType", "string"),)
_LISTENER = (("listenerName", "string"),)
_TOPICS = "topics"
_SUBSCRIPTIONS = "subscriptions"
_POLICIES = "policies"

#: Every documented operation by (method, aiohttp canonical path).
OPERATIONS: dict[tuple[str, str], Doc] = {
    ("GET", PATH): Doc("meta", "This OpenAPI description", response={"type": "object"}),
    ("GET", "/admin/v2/brokers/health"): Doc(
        "meta", "Health check: ok when Redis answers", response=_STR, content_type="text/plain"
    ),
    ("GET", "/admin/v2/brokers/internal-configuration"): Doc(
        "meta",
        "Where the fleet keeps its state: Redis URL (metadataStoreUrl) and key prefix "
        "(ledgersRootPath); superuser only",
        response={"type": "object", "additionalProperties": _STR},
    ),
    ("GET", "/metrics"): Doc(
        "meta",
        "Prometheus metrics (Pulsar's topic metrics for the topics this gateway exports)",
        response=_STR,
        content_type="text/plain",
    ),
    ("GET", "/admin/v2/{domain}/{tenant}/{namespace}"): Doc(
        _TOPICS, "List the namespace's topics (partitions included)", response="TopicList"
    ),
    ("GET", "/admin/v2/{domain}/{tenant}/{namespace}/partitioned"): Doc(
        _TOPICS, "List the namespace's partitioned topics", response="TopicList"
    ),
    ("PUT", _TOPIC): Doc(_TOPICS, "Create a non-partitioned topic", ok=204),
    ("DELETE", _TOPIC): Doc(_TOPICS, "Delete a topic", query=(("force", "boolean"),), ok=204),
    ("PUT", f"{_TOPIC}/partitions"): Doc(
        _TOPICS, "Create a partitioned topic", body="Partitions", ok=204
    ),
    ("POST", f"{_TOPIC}/partitions"): Doc(
        _TOPICS,
        "Increase a partitioned topic's partitions",
        body="Partitions",
        query=(("force", "boolean"),),
        ok=204,
    ),
    ("GET", f"{_TOPIC}/partitions"): Doc(
        _TOPICS,
        "Partitioned-topic metadata",
        response="PartitionedTopicMetadata",
        query=(("checkAllowAutoCreation", "boolean"),),
    ),
    ("DELETE", f"{_TOPIC}/partitions"): Doc(
        _TOPICS, "Delete a partitioned topic", query=(("force", "boolean"),), ok=204
    ),
    ("GET", f"{_TOPIC}/stats"): Doc(
        _TOPICS,
        "Topic stats, fleet-wide",
        response="TopicStats",
        query=(
            ("getPreciseBacklog", "boolean"),
            ("subscriptionBacklogSize", "boolean"),
            ("getEarliestTimeInBacklog", "boolean"),
        ),
    ),
    ("GET", f"{_TOPIC}/partitioned-stats"): Doc(
        _TOPICS,
        "Partitioned topic stats: the partitions summed, and each one",
        response="PartitionedTopicStats",
        query=(("perPartition", "boolean"),),
    ),
    ("PUT", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/compaction"): Doc(
        _TOPICS, "Start a compaction", ok=204
    ),
    ("GET", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/compaction"): Doc(
        _TOPICS, "Compaction status", response="LongRunningProcessStatus"
    ),
    ("GET", f"{_SUBSCRIPTION}/scheduled"): Doc(
        _SUBSCRIPTIONS,
        "List the subscription's scheduled (delayed) messages, earliest first",
        response="ScheduledMessages",
        query=(("offset", "integer"), ("limit", "integer")),
    ),
    ("DELETE", f"{_SUBSCRIPTION}/scheduled/{{message_id}}"): Doc(
        _SUBSCRIPTIONS, "Cancel a scheduled message on this subscription", ok=204
    ),
    ("POST", f"{_SUBSCRIPTION}/scheduled/{{message_id}}"): Doc(
        _SUBSCRIPTIONS, "Reschedule a scheduled message", body="Reschedule", ok=204
    ),
    ("POST", "/topics/{domain}/{tenant}/{namespace}/{topic}"): Doc(
        "rest-produce",
        "Publish messages (PIP-64); round-robin over a partitioned topic's partitions",
        body="ProducerMessages",
        response="ProducerAcks",
    ),
    ("POST", "/topics/{domain}/{tenant}/{namespace}/{topic}/partitions/{partition}"): Doc(
        "rest-produce",
        "Publish messages to one partition (PIP-64)",
        body="ProducerMessages",
        response="ProducerAcks",
    ),
    ("GET", "/admin/v2/clusters"): Doc(_CLUSTERS, "List clusters (the fleet)", response="NameList"),
    ("GET", "/admin/v2/clusters/{cluster}"): Doc(
        _CLUSTERS, "The cluster's service URLs", response="ClusterData"
    ),
    ("PUT", "/admin/v2/clusters/{cluster}"): Doc(
        _CLUSTERS, "Refused: the fleet is one cluster", body="ClusterData", ok=204
    ),
    ("POST", "/admin/v2/clusters/{cluster}"): Doc(
        _CLUSTERS, "Refused: the cluster's URLs come from the gateways", body="ClusterData", ok=204
    ),
    ("DELETE", "/admin/v2/clusters/{cluster}"): Doc(
        _CLUSTERS, "Refused: the fleet is one cluster", ok=204
    ),
    ("GET", "/admin/v2/tenants"): Doc(_TENANTS, "List tenants", response="NameList"),
    ("GET", "/admin/v2/tenants/{tenant}"): Doc(_TENANTS, "A tenant", response="TenantInfo"),
    ("PUT", "/admin/v2/tenants/{tenant}"): Doc(
        _TENANTS, "Create a tenant", body="TenantInfo", ok=204
    ),
    ("POST", "/admin/v2/tenants/{tenant}"): Doc(
        _TENANTS, "Update a tenant", body="TenantInfo", ok=204
    ),
    ("DELETE", "/admin/v2/tenants/{tenant}"): Doc(
        _TENANTS, "Delete a tenant", query=(("force", "boolean"),), ok=204
    ),
    ("GET", "/admin/v2/namespaces/{tenant}"): Doc(
        _NAMESPACES, "List the tenant's namespaces", response="NameList"
    ),
    ("GET", _NS): Doc(_NAMESPACES, "The namespace's policies", response="Policies"),
    ("PUT", _NS): Doc(_NAMESPACES, "Create a namespace", body="Policies", ok=204),
    ("DELETE", _NS): Doc(_NAMESPACES, "Delete a namespace", query=(("force", "boolean"),), ok=204),
    ("PUT", _NS_V1): Doc(
        _NAMESPACES, "Create a legacy (v1) namespace for tenant/cluster/ns topic names", ok=204
    ),
    ("DELETE", _NS_V1): Doc(
        _NAMESPACES, "Delete a legacy (v1) namespace", query=(("force", "boolean"),), ok=204
    ),
    ("GET", f"{_NS}/permissions"): Doc(
        _NAMESPACES,
        "Roles and the actions granted to them on the namespace",
        response={"type": "object", "additionalProperties": {"type": "array", "items": _STR}},
    ),
    ("POST", f"{_NS}/permissions/{{role}}"): Doc(
        _NAMESPACES,
        "Grant a role actions (produce, consume) on the namespace",
        body={"type": "array", "items": _STR},
        ok=204,
    ),
    ("DELETE", f"{_NS}/permissions/{{role}}"): Doc(
        _NAMESPACES, "Revoke every action of a role on the namespace", ok=204
    ),
    ("GET", f"{_NS}/backlogQuotaMap"): Doc(
        _POLICIES, "The namespace's backlog quotas by type", response="BacklogQuotaMap"
    ),
    ("POST", f"{_NS}/backlogQuota"): Doc(
        _POLICIES, "Set a namespace backlog quota", body="BacklogQuota", query=_QUOTA_TYPE, ok=204
    ),
    ("DELETE", f"{_NS}/backlogQuota"): Doc(
        _POLICIES, "Remove a namespace backlog quota", query=_QUOTA_TYPE, ok=204
    ),
    ("GET", f"{_TOPIC}/backlogQuotaMap"): Doc(
        _POLICIES,
        "The topic's backlog quotas by type",
        response="BacklogQuotaMap",
        query=(("applied", "boolean"),),
    ),
    ("POST", f"{_TOPIC}/backlogQuota"): Doc(
        _POLICIES, "Set a topic backlog quota", body="BacklogQuota", query=_QUOTA_TYPE, ok=204
    ),
    ("DELETE", f"{_TOPIC}/backlogQuota"): Doc(
        _POLICIES, "Remove a topic backlog quota", query=_QUOTA_TYPE, ok=204
    ),
    ("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}"): Doc(
        _LOOKUP,
        "Where to connect for a topic: any gateway",
        response="LookupData",
        query=_LISTENER,
    ),
    ("GET", "/lookup/v2/destination/{domain}/{tenant}/{cluster}/{namespace}/{topic}"): Doc(
        _LOOKUP, "Lookup, v1 topic names", response="LookupData", query=_LISTENER
    ),
    ("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}/bundle"): Doc(
        _LOOKUP,
        "The topic's namespace bundle (one bundle)",
        response=_STR,
        content_type="text/plain",
    ),
}


def _websocket(summary: str, *query: str) -> Doc:
    """A WebSocket endpoint: a GET that upgrades (101); refusals come before the upgrade
    as the usual JSON errors."""
    return Doc(
        "websocket",
        summary + " (WebSocket upgrade; JSON frames as Pulsar's WebSocket API)",
        query=tuple((name, "string") for name in query),
        ok=101,
    )


_WS_TOPIC = "{domain}/{tenant}/{namespace}/{topic}"
_WS_CONSUMER_QUERY = (
    "subscriptionType",
    "subscriptionMode",
    "subscriptionInitialPosition",
    "receiverQueueSize",
    "consumerName",
    "priorityLevel",
    "ackTimeoutMillis",
    "negativeAckRedeliveryDelay",
    "maxRedeliverCount",
    "deadLetterTopic",
    "pullMode",
    "cryptoFailureAction",
)
OPERATIONS.update(
    {
        ("GET", f"/ws/v2/producer/{_WS_TOPIC}"): _websocket(
            "Producer",
            "producerName",
            "initialSequenceId",
            "compressionType",
            "messageRoutingMode",
            "hashingScheme",
            "batchingEnabled",
            "batchingMaxMessages",
            "batchingMaxPublishDelay",
            "maxPendingMessages",
            "sendTimeoutMillis",
        ),
        ("GET", f"/ws/v2/consumer/{_WS_TOPIC}/{{subscription}}"): _websocket(
            "Consumer", *_WS_CONSUMER_QUERY
        ),
        ("GET", f"/ws/v2/reader/{_WS_TOPIC}"): _websocket(
            "Reader", "messageId", "receiverQueueSize", "readerName"
        ),
        ("GET", "/ws/v3/consumer/{subscription}"): _websocket(
            "Multi-topic consumer", "topics", "topicsPattern", *_WS_CONSUMER_QUERY
        ),
        ("GET", "/ws/pingpong"): _websocket("Ping-pong"),
        ("GET", "/ws/v2/pingpong"): _websocket("Ping-pong"),
    }
)


def _policy_operations() -> dict[tuple[str, str], Doc]:
    out = {}
    for spec in POLICIES:
        for scope, path in (
            (
                "namespace",
                f"/admin/v2/namespaces/{{tenant}}/{{namespace}}/{spec.namespace_segment}",
            ),
            ("topic", f"{_TOPIC}/{spec.topic_segment}"),
        ):
            query = (
                ((spec.topic_query, "integer"),) if scope == "topic" and spec.topic_query else ()
            )
            out["GET", path] = Doc(
                _POLICIES, f"Get the {scope} {spec.name} policy", response=spec.schema
            )
            out["POST", path] = Doc(
                _POLICIES,
                f"Set the {scope} {spec.name} policy",
                body=None if query else spec.schema,
                query=query,
                ok=204,
            )
            out["DELETE", path] = Doc(_POLICIES, f"Remove the {scope} {spec.name} policy", ok=204)
    return out


OPERATIONS.update(_policy_operations())

# -- subscriptions and cursors (adapters/http/subscriptions.py) ---------------------------

_CURSOR = {
    "oneOf": [
        _obj(
            ledgerId=_INT,
            entryId=_INT,
            partitionIndex={"type": "integer"},
            isExcluded=_BOOL,
            batchIndex={"type": "integer"},
            properties=_STR_MAP,
        ),
        {"type": "string", "enum": ["latest", "earliest"]},
    ],
    "description": 'ResetCursorData / MessageIdImpl, or "latest" / "earliest"',
}
SCHEMAS["ResetCursorData"] = _CURSOR
SCHEMAS["MessageIdImpl"] = _obj(
    ledgerId=_INT, entryId=_INT, partitionIndex=_INT, batchIndex=_INT, batchSize=_INT
)
SCHEMAS["PersistentTopicInternalStats"] = _obj(
    entriesAddedCounter=_INT,
    numberOfEntries=_INT,
    totalSize=_INT,
    currentLedgerEntries=_INT,
    currentLedgerSize=_INT,
    lastLedgerCreatedTimestamp=_STR,
    waitingCursorsCount=_INT,
    pendingAddEntriesCount=_INT,
    lastConfirmedEntry=_STR,
    state=_STR,
    ledgers={"type": "array", "items": {"type": "object"}},
    cursors={"type": "object", "additionalProperties": {"type": "object"}},
)
SCHEMAS["PartitionedTopicInternalStats"] = _obj(
    metadata={"$ref": "#/components/schemas/PartitionedTopicMetadata"},
    partitions={
        "type": "object",
        "additionalProperties": {"$ref": "#/components/schemas/PersistentTopicInternalStats"},
    },
)
_ENTRY = {"type": "string", "format": "binary"}
_OCTETS = "application/octet-stream"
OPERATIONS.update(
    {
        ("GET", f"{_TOPIC}/subscriptions"): Doc(
            _SUBSCRIPTIONS, "List subscriptions (union over partitions)", response="NameList"
        ),
        ("PUT", _SUBSCRIPTION): Doc(
            _SUBSCRIPTIONS,
            "Create a subscription at a position (default latest)",
            body="ResetCursorData",
            query=(("replicated", "boolean"),),
            ok=204,
        ),
        ("DELETE", _SUBSCRIPTION): Doc(
            _SUBSCRIPTIONS, "Delete a subscription", query=(("force", "boolean"),), ok=204
        ),
        ("POST", f"{_SUBSCRIPTION}/skip/{{count}}"): Doc(
            _SUBSCRIPTIONS, "Skip entries of the backlog", ok=204
        ),
        ("POST", f"{_SUBSCRIPTION}/skip_all"): Doc(_SUBSCRIPTIONS, "Clear the backlog", ok=204),
        ("POST", f"{_SUBSCRIPTION}/expireMessages/{{seconds}}"): Doc(
            _SUBSCRIPTIONS, "Expire messages older than an age", ok=204
        ),
        ("POST", f"{_SUBSCRIPTION}/expireMessages"): Doc(
            _SUBSCRIPTIONS, "Expire messages up to a position", body="ResetCursorData", ok=204
        ),
        ("POST", f"{_TOPIC}/all_subscription/expireMessages/{{seconds}}"): Doc(
            _SUBSCRIPTIONS, "Expire messages on every subscription", ok=204
        ),
        ("POST", f"{_SUBSCRIPTION}/resetcursor/{{timestamp}}"): Doc(
            _SUBSCRIPTIONS, "Reset the cursor to a time (ms)", ok=204
        ),
        ("POST", f"{_SUBSCRIPTION}/resetcursor"): Doc(
            _SUBSCRIPTIONS, "Reset the cursor to a position", body="ResetCursorData", ok=204
        ),
        ("GET", f"{_SUBSCRIPTION}/position/{{position}}"): Doc(
            _SUBSCRIPTIONS,
            "Peek the n-th entry of the backlog (X-Pulsar-* headers)",
            response=_ENTRY,
            content_type=_OCTETS,
        ),
        ("GET", f"{_TOPIC}/ledger/{{ledger}}/entry/{{entry}}"): Doc(
            _TOPICS, "A message by id (X-Pulsar-* headers)", response=_ENTRY, content_type=_OCTETS
        ),
        ("GET", f"{_TOPIC}/examinemessage"): Doc(
            _TOPICS,
            "The n-th entry from the earliest or latest end",
            response=_ENTRY,
            query=(("initialPosition", "string"), ("messagePosition", "integer")),
            content_type=_OCTETS,
        ),
        ("GET", f"{_TOPIC}/internalStats"): Doc(
            _TOPICS, "Internal stats (one pseudo-ledger)", response="PersistentTopicInternalStats"
        ),
        ("GET", f"{_TOPIC}/partitioned-internalStats"): Doc(
            _TOPICS,
            "Internal stats of every partition",
            response="PartitionedTopicInternalStats",
        ),
        ("GET", f"{_TOPIC}/lastMessageId"): Doc(
            _TOPICS, "The last message id", response="MessageIdImpl"
        ),
    }
)


def served_operations(app: web.Application) -> list[tuple[str, str]]:
    """Every (method, canonical path) the app serves (HEAD twins of GET left out)."""
    out = []
    for route in app.router.routes():
        resource = route.resource
        if route.method == "HEAD" or resource is None:
            continue
        out.append((route.method, resource.canonical))
    return out


def _schema(ref: str | dict[str, Any]) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{ref}"} if isinstance(ref, str) else ref


def _parameters(path: str, doc: Doc) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = []
    for segment in path.split("/"):
        if segment.startswith("{") and segment.endswith("}"):
            name = segment[1:-1]
            schema: dict[str, Any] = dict(_STR)
            if name == "domain":
                schema["enum"] = ["persistent", "non-persistent"]
            params.append({"name": name, "in": "path", "required": True, "schema": schema})
    for name, kind in doc.query:
        params.append({"name": name, "in": "query", "required": False, "schema": {"type": kind}})
    return params


def _operation(method: str, path: str, doc: Doc) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    if doc.ok == 101:
        responses["101"] = {"description": "Switching protocols to WebSocket"}
    elif doc.ok == 204:
        responses["204"] = {"description": "Done"}
    else:
        content = {doc.content_type: {"schema": _schema(doc.response or {"type": "object"})}}
        responses[str(doc.ok)] = {"description": "OK", "content": content}
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    responses["default"] = {
        "description": "Error: 400/412 invalid input, 401/403 not authorised, 404 missing, "
        "409 conflict, 503 Redis unavailable (or, for a producer, a backlog quota exceeded)",
        "content": error,
    }
    operation: dict[str, Any] = {
        "tags": [doc.tag],
        "summary": doc.summary,
        "operationId": f"{method.lower()}{path}".replace("/", "_")
        .replace("{", "")
        .replace("}", ""),
        "parameters": _parameters(path, doc),
        "responses": responses,
    }
    if doc.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _schema(doc.body)}},
        }
    return operation


def build_spec(app: web.Application) -> dict[str, Any]:
    """The OpenAPI document of the documented routes ``app`` serves."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path in served_operations(app):
        doc = OPERATIONS.get((method, path))
        if doc is not None:
            paths.setdefault(path, {})[method.lower()] = _operation(method, path, doc)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "pulsar-redis-gateway HTTP API",
            "version": "2",
            "description": "Pulsar's admin REST v2, REST produce and WebSocket endpoints, "
            "served by every gateway over the same Redis state.",
        },
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": SCHEMAS},
    }


async def _serve(request: web.Request) -> web.Response:
    return web.json_response(build_spec(request.app))


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, _serve)
