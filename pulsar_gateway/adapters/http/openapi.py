"""The OpenAPI 3.0 description of the HTTP front, served at ``/admin/v2/openapi.json``.

The description is built from the routes the app actually serves (``app.router``), each
looked up in :data:`OPERATIONS` for its summary, tag, parameters and JSON shapes: a route
added without an entry here is left out of the description, and
``tests/integration/admin/test_openapi.py`` fails, so the description cannot silently fall
behind the code. Policy
routes are described from :data:`pulsar_gateway.adapters.http.admin.policies.POLICIES`,
which carries each policy's JSON schema; route modules describe their own routes (``DOCS``).

Shapes are Pulsar's JSON (``TopicStats``, ``ProducerMessages``, ...) with their main
fields; ``additionalProperties`` stays open where Pulsar's objects have more.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pulsar_gateway.adapters.http import console
from pulsar_gateway.adapters.http.admin import (
    brokers,
    namespaces,
    permissions,
    schemas,
    unavailable,
    unload,
)
from pulsar_gateway.adapters.http.admin.policies import POLICIES, PolicySpec
from pulsar_gateway.adapters.http.described import BOOL, INT, NUM, STR, STR_MAP, TOPIC, Doc, obj
from pulsar_gateway.adapters.http.topics import operations

__all__ = ["OPERATIONS", "PATH", "Doc", "add_routes", "build_spec", "served_operations"]

PATH = "/admin/v2/openapi.json"

_SUBSCRIPTION = f"{TOPIC}/subscription/{{subscription}}"


#: Components shared by operations.
SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": {
        "type": "object",
        "properties": {"reason": STR},
        "required": ["reason"],
    },
    "PartitionedTopicMetadata": obj(partitions=INT),
    "Partitions": {
        "oneOf": [INT, {"$ref": "#/components/schemas/PartitionedTopicMetadata"}],
        "description": "a partition count, or PartitionedTopicMetadata",
    },
    "ConsumerStats": obj(
        consumerName=STR,
        msgRateOut=NUM,
        msgThroughputOut=NUM,
        msgRateRedeliver=NUM,
        msgOutCounter=INT,
        bytesOutCounter=INT,
        availablePermits=INT,
        unackedMessages=INT,
        address=STR,
        clientVersion=STR,
        connectedSince=STR,
    ),
    "PublisherStats": obj(
        producerName=STR, producerId=INT, msgRateIn=NUM, msgThroughputIn=NUM, address=STR
    ),
    "SubscriptionStats": obj(
        type=STR,
        msgBacklog=INT,
        msgBacklogNoDelayed=INT,
        msgDelayed=INT,
        unackedMessages=INT,
        backlogSize=INT,
        msgRateOut=NUM,
        msgThroughputOut=NUM,
        msgRateRedeliver=NUM,
        msgOutCounter=INT,
        bytesOutCounter=INT,
        consumers={"type": "array", "items": {"$ref": "#/components/schemas/ConsumerStats"}},
    ),
    "TopicStats": obj(
        msgRateIn=NUM,
        msgRateOut=NUM,
        msgThroughputIn=NUM,
        msgThroughputOut=NUM,
        msgInCounter=INT,
        msgOutCounter=INT,
        bytesInCounter=INT,
        bytesOutCounter=INT,
        averageMsgSize=NUM,
        storageSize=INT,
        backlogSize=INT,
        publishers={"type": "array", "items": {"$ref": "#/components/schemas/PublisherStats"}},
        subscriptions={
            "type": "object",
            "additionalProperties": {"$ref": "#/components/schemas/SubscriptionStats"},
        },
    ),
    "PartitionedTopicStats": {
        "allOf": [
            {"$ref": "#/components/schemas/TopicStats"},
            obj(
                metadata={"$ref": "#/components/schemas/PartitionedTopicMetadata"},
                partitions={
                    "type": "object",
                    "additionalProperties": {"$ref": "#/components/schemas/TopicStats"},
                },
            ),
        ]
    },
    "ProducerMessage": obj(
        payload=STR,
        key=STR,
        properties=STR_MAP,
        eventTime=STR,
        sequenceId=INT,
        deliverAt=INT,
        deliverAfterMs=INT,
        replicationClusters={"type": "array", "items": STR},
        disableReplication=BOOL,
    ),
    "ProducerMessages": obj(
        producerName=STR,
        keySchema=STR,
        valueSchema=STR,
        schemaVersion=INT,
        messages={"type": "array", "items": {"$ref": "#/components/schemas/ProducerMessage"}},
    ),
    "ProducerAcks": obj(
        schemaVersion=INT,
        messagePublishResults={
            "type": "array",
            "items": obj(messageId=STR, errorCode=INT, errorMsg=STR),
        },
    ),
    "ScheduledMessages": obj(
        total=INT,
        inWindow=INT,
        offset=INT,
        messages={
            "type": "array",
            "items": obj(
                messageId=STR,
                ledgerId=INT,
                entryId=INT,
                partition=INT,
                deliverAt=INT,
                key=STR,
                properties=STR_MAP,
                size=INT,
            ),
        },
    ),
    "Reschedule": obj(deliverAt=INT, deliverAfterMs=INT),
    "PeekedMessages": obj(
        messages={
            "type": "array",
            "items": obj(
                messageId=STR,
                ledgerId=INT,
                entryId=INT,
                batchIndex=INT,
                position=INT,
                publishTime=INT,
                eventTime=INT,
                key={"type": "string", "nullable": True},
                properties=STR_MAP,
                producerName=STR,
                sequenceId=INT,
                payload={"type": "string", "format": "byte"},
                size=INT,
                # only on an entry listed whole: why it is not read as messages
                error=STR,
            ),
        }
    ),
    "ScheduledHistogram": obj(
        **{"from": INT},
        to=INT,
        bucketMs=INT,
        counts={"type": "array", "items": INT},
        before=INT,
        after=INT,
        total=INT,
    ),
    "LongRunningProcessStatus": obj(status=STR, lastError=STR),
    "TopicList": {"type": "array", "items": STR},
    "NameList": {"type": "array", "items": STR},
    "ClusterData": obj(
        serviceUrl=STR, brokerServiceUrl=STR, serviceUrlTls=STR, brokerServiceUrlTls=STR
    ),
    "TenantInfo": obj(
        adminRoles={"type": "array", "items": STR},
        allowedClusters={"type": "array", "items": STR},
    ),
    "Policies": obj(
        retention_policies={"type": "object"},
        message_ttl_in_seconds=INT,
        deduplicationEnabled=BOOL,
        delayed_delivery_policies={"type": "object"},
        backlog_quota_map={"type": "object"},
    ),
    "BacklogQuota": obj(limitSize=INT, limitTime=INT, policy={"type": "string"}),
    "BacklogQuotaMap": {
        "type": "object",
        "additionalProperties": {"$ref": "#/components/schemas/BacklogQuota"},
    },
    "LookupData": obj(
        brokerUrl=STR,
        brokerUrlTls=STR,
        httpUrl=STR,
        httpUrlTls=STR,
        nativeUrl=STR,
        brokerUrlSsl=STR,
    ),
}

_CLUSTERS, _TENANTS, _NAMESPACES, _LOOKUP = "clusters", "tenants", "namespaces", "lookup"
_NS = "/admin/v2/namespaces/{tenant}/{namespace}"
_NS_V1 = "/admin/namespaces/{tenant}/{cluster}/{namespace}"
_QUOTA_TYPE = (("backlogQuotaType", "string"),)
_LISTENER = (("listenerName", "string"),)
_TOPICS = "topics"
_SUBSCRIPTIONS = "subscriptions"
POLICIES_TAG = "policies"

#: Every documented operation by (method, aiohttp canonical path).
OPERATIONS: dict[tuple[str, str], Doc] = {
    ("GET", PATH): Doc("meta", "This OpenAPI description", response={"type": "object"}),
    ("GET", "/admin/v2/brokers/health"): Doc(
        "meta", "Health check: ok when Redis answers", response=STR, content_type="text/plain"
    ),
    ("GET", "/admin/v2/brokers/internal-configuration"): Doc(
        "meta",
        "Where the fleet keeps its state: Redis URL (metadataStoreUrl) and key prefix "
        "(ledgersRootPath); superuser only",
        response={"type": "object", "additionalProperties": STR},
    ),
    ("GET", "/metrics"): Doc(
        "meta",
        "Prometheus metrics (Pulsar's topic metrics for the topics this gateway exports)",
        response=STR,
        content_type="text/plain",
    ),
    ("GET", "/admin/v2/{domain}/{tenant}/{namespace}"): Doc(
        _TOPICS, "List the namespace's topics (partitions included)", response="TopicList"
    ),
    ("GET", "/admin/v2/{domain}/{tenant}/{namespace}/partitioned"): Doc(
        _TOPICS, "List the namespace's partitioned topics", response="TopicList"
    ),
    ("PUT", TOPIC): Doc(_TOPICS, "Create a non-partitioned topic", ok=204),
    ("DELETE", TOPIC): Doc(_TOPICS, "Delete a topic", query=(("force", "boolean"),), ok=204),
    ("PUT", f"{TOPIC}/partitions"): Doc(
        _TOPICS, "Create a partitioned topic", body="Partitions", ok=204
    ),
    ("POST", f"{TOPIC}/partitions"): Doc(
        _TOPICS,
        "Increase a partitioned topic's partitions",
        body="Partitions",
        query=(("force", "boolean"),),
        ok=204,
    ),
    ("GET", f"{TOPIC}/partitions"): Doc(
        _TOPICS,
        "Partitioned-topic metadata",
        response="PartitionedTopicMetadata",
        query=(("checkAllowAutoCreation", "boolean"),),
    ),
    ("DELETE", f"{TOPIC}/partitions"): Doc(
        _TOPICS, "Delete a partitioned topic", query=(("force", "boolean"),), ok=204
    ),
    ("GET", f"{TOPIC}/stats"): Doc(
        _TOPICS,
        "Topic stats, fleet-wide",
        response="TopicStats",
        query=(
            ("getPreciseBacklog", "boolean"),
            ("subscriptionBacklogSize", "boolean"),
            ("getEarliestTimeInBacklog", "boolean"),
        ),
    ),
    ("GET", f"{TOPIC}/partitioned-stats"): Doc(
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
    ("PUT", "/admin/v2/non-persistent/{tenant}/{namespace}/{topic}/compaction"): Doc(
        _TOPICS, "Compaction of a non-persistent topic: not allowed (405)", ok=204
    ),
    ("GET", "/admin/v2/non-persistent/{tenant}/{namespace}/{topic}/compaction"): Doc(
        _TOPICS, "Compaction of a non-persistent topic: not allowed (405)", ok=204
    ),
    ("GET", f"{_SUBSCRIPTION}/scheduled"): Doc(
        _SUBSCRIPTIONS,
        "List the subscription's scheduled (delayed) messages, earliest first, optionally "
        "those due in [from, to) (ms since the epoch)",
        response="ScheduledMessages",
        query=(("from", "integer"), ("to", "integer"), ("offset", "integer"), ("limit", "integer")),
    ),
    ("GET", f"{_SUBSCRIPTION}/scheduled/histogram"): Doc(
        _SUBSCRIPTIONS,
        "How many scheduled messages are due in each of `buckets` equal buckets from `from` "
        "(default now) to `to` (default an hour later)",
        response="ScheduledHistogram",
        query=(("from", "integer"), ("to", "integer"), ("buckets", "integer")),
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
        response={"type": "object", "additionalProperties": {"type": "array", "items": STR}},
    ),
    ("POST", f"{_NS}/permissions/{{role}}"): Doc(
        _NAMESPACES,
        "Grant a role actions (produce, consume) on the namespace",
        body={"type": "array", "items": STR},
        ok=204,
    ),
    ("DELETE", f"{_NS}/permissions/{{role}}"): Doc(
        _NAMESPACES, "Revoke every action of a role on the namespace", ok=204
    ),
    ("GET", f"{_NS}/backlogQuotaMap"): Doc(
        POLICIES_TAG, "The namespace's backlog quotas by type", response="BacklogQuotaMap"
    ),
    ("POST", f"{_NS}/backlogQuota"): Doc(
        POLICIES_TAG,
        "Set a namespace backlog quota",
        body="BacklogQuota",
        query=_QUOTA_TYPE,
        ok=204,
    ),
    ("DELETE", f"{_NS}/backlogQuota"): Doc(
        POLICIES_TAG, "Remove a namespace backlog quota", query=_QUOTA_TYPE, ok=204
    ),
    ("GET", f"{TOPIC}/backlogQuotaMap"): Doc(
        POLICIES_TAG,
        "The topic's backlog quotas by type",
        response="BacklogQuotaMap",
        query=(("applied", "boolean"),),
    ),
    ("POST", f"{TOPIC}/backlogQuota"): Doc(
        POLICIES_TAG, "Set a topic backlog quota", body="BacklogQuota", query=_QUOTA_TYPE, ok=204
    ),
    ("DELETE", f"{TOPIC}/backlogQuota"): Doc(
        POLICIES_TAG, "Remove a topic backlog quota", query=_QUOTA_TYPE, ok=204
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
        response=STR,
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


def _policy_operations(specs: tuple[PolicySpec, ...]) -> dict[tuple[str, str], Doc]:
    out = {}
    verbs = {"GET": "Get", "POST": "Set", "PUT": "Set", "DELETE": "Remove"}
    for spec in specs:
        for method, route_path, topic_level in spec.routes():
            path = route_path.replace("{domain:persistent|non-persistent}", "{domain}")
            scope = "topic" if topic_level else "namespace"
            summary = f"{verbs[method]} the {scope} {spec.name} policy"
            query = ((spec.topic_query, "integer"),) if topic_level and spec.topic_query else ()
            if method == "GET":
                out[method, path] = Doc(POLICIES_TAG, summary, response=spec.schema)
            elif method == "DELETE":
                out[method, path] = Doc(POLICIES_TAG, summary, ok=204)
            elif spec.unavailable is not None:  # answered 501 with the reason
                out[method, path] = Doc(POLICIES_TAG, summary, response="Error", ok=501)
            else:
                body = None if query else spec.schema
                out[method, path] = Doc(POLICIES_TAG, summary, body=body, query=query, ok=204)
    return out


OPERATIONS.update(_policy_operations(POLICIES))
OPERATIONS.update(unload.DOCS)
OPERATIONS.update(namespaces.DOCS)
OPERATIONS.update(operations.DOCS)
OPERATIONS.update(permissions.DOCS)

# -- subscriptions and cursors (adapters/http/topics/subscriptions.py) ---------------------------

_CURSOR = {
    "oneOf": [
        obj(
            ledgerId=INT,
            entryId=INT,
            partitionIndex={"type": "integer"},
            isExcluded=BOOL,
            batchIndex={"type": "integer"},
            properties=STR_MAP,
        ),
        {"type": "string", "enum": ["latest", "earliest"]},
    ],
    "description": 'ResetCursorData / MessageIdImpl, or "latest" / "earliest"',
}
SCHEMAS["ResetCursorData"] = _CURSOR
SCHEMAS["MessageIdImpl"] = obj(
    ledgerId=INT, entryId=INT, partitionIndex=INT, batchIndex=INT, batchSize=INT
)
SCHEMAS["PersistentTopicInternalStats"] = obj(
    entriesAddedCounter=INT,
    numberOfEntries=INT,
    totalSize=INT,
    currentLedgerEntries=INT,
    currentLedgerSize=INT,
    lastLedgerCreatedTimestamp=STR,
    waitingCursorsCount=INT,
    pendingAddEntriesCount=INT,
    lastConfirmedEntry=STR,
    state=STR,
    ledgers={"type": "array", "items": {"type": "object"}},
    cursors={"type": "object", "additionalProperties": {"type": "object"}},
)
SCHEMAS["PartitionedTopicInternalStats"] = obj(
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
        ("GET", f"{TOPIC}/subscriptions"): Doc(
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
        ("POST", f"{TOPIC}/all_subscription/expireMessages/{{seconds}}"): Doc(
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
        ("GET", f"{_SUBSCRIPTION}/peek"): Doc(
            _SUBSCRIPTIONS,
            "The first `count` entries of the backlog (1..100, default 10) as JSON, batches "
            "split into their messages",
            response="PeekedMessages",
            query=(("count", "integer"),),
        ),
        ("GET", f"{TOPIC}/ledger/{{ledger}}/entry/{{entry}}"): Doc(
            _TOPICS, "A message by id (X-Pulsar-* headers)", response=_ENTRY, content_type=_OCTETS
        ),
        ("GET", f"{TOPIC}/examinemessage"): Doc(
            _TOPICS,
            "The n-th entry from the earliest or latest end",
            response=_ENTRY,
            query=(("initialPosition", "string"), ("messagePosition", "integer")),
            content_type=_OCTETS,
        ),
        ("GET", f"{TOPIC}/internalStats"): Doc(
            _TOPICS, "Internal stats (one pseudo-ledger)", response="PersistentTopicInternalStats"
        ),
        ("GET", f"{TOPIC}/partitioned-internalStats"): Doc(
            _TOPICS,
            "Internal stats of every partition",
            response="PartitionedTopicInternalStats",
        ),
        ("GET", f"{TOPIC}/lastMessageId"): Doc(
            _TOPICS, "The last message id", response="MessageIdImpl"
        ),
    }
)
OPERATIONS.update(schemas.DOCS)
OPERATIONS.update(_policy_operations(schemas.SCHEMA_POLICIES))
OPERATIONS.update(brokers.DOCS)
OPERATIONS.update(unavailable.DOCS)


def served_operations(app: web.Application) -> list[tuple[str, str]]:
    """Every (method, canonical path) the app serves (HEAD twins of GET left out), the web
    console's pages aside: they are not part of the API."""
    out = []
    for route in app.router.routes():
        resource = route.resource
        if resource is None or route.method == "HEAD":
            continue
        if console.is_console_path(resource.canonical):
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
            schema: dict[str, Any] = dict(STR)
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
        # 501: an operation that cannot mean anything here (adapters/http/admin/unavailable.py)
        description = "Not Implemented" if doc.ok == 501 else "OK"
        responses[str(doc.ok)] = {"description": description, "content": content}
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
