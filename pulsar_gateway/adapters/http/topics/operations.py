"""Admin REST v2: more of a topic's operations (``PersistentTopics.java``,
``PersistentTopicsBase``): its estimated backlog, its ledger info, missing partitions, its
properties, a subscription's backlog analysis and replication status, offload, and the
non-persistent topics of a bundle.

Figures come from the topic's stats and internal stats (``core/fleet/topic_stats.py``,
``core/admin/internal_stats.py``): a topic is one pseudo-ledger, so the shapes that describe
ledgers describe that one.
"""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from pulsar_gateway.adapters.http.admin.tenants import FULL_BUNDLE
from pulsar_gateway.adapters.http.described import BOOL, STR_MAP, TOPIC, Doc, obj
from pulsar_gateway.adapters.resource import (
    Body,
    fail,
    handler,
    namespace_name,
    read_json,
    read_properties,
    read_text,
    topic_name,
)
from pulsar_gateway.core import MessageId, Services, TopicName, format_time

__all__ = ["DOCS", "add_routes", "message_id_json"]

_DOMAIN_TOPIC = "/admin/v2/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}"
_SUB = "subscription/{subName}"
_BUNDLE_RANGE = "{bundle:0x[0-9a-fA-F]{8}_0x[0-9a-fA-F]{8}}"

#: The stored name of a topic's properties (a JSON object of strings, on the partitioned
#: topic for its partitions, as Pulsar keeps them in the partitioned metadata).
PROPERTIES_POLICY = "properties"

_OFFLOAD = (
    "Offload to tiered storage does not apply: a topic is a Redis stream, kept whole in Redis"
)


async def _existing(services: Services, request: web.Request) -> TopicName:
    topic = topic_name(request)
    if not await services.subscription_admin.exists(topic):
        raise fail(web.HTTPNotFound, f"Topic {topic} not found")
    return topic


async def get_backlog(services: Services, request: web.Request) -> dict[str, Any]:
    """``PersistentOfflineTopicStats``: the backlog as an offline broker would estimate it
    (here it is exact), with each cursor's backlog."""
    topic = await _existing(services, request)
    stats = await services.stats.topic(str(topic))
    subscriptions = stats.get("subscriptions", {})
    cursors = {
        name: {"cursorBacklog": sub.get("msgBacklog", 0), "cursorLedgerId": -1}
        for name, sub in subscriptions.items()
    }
    return {
        "storageSize": stats.get("storageSize", 0),
        "totalMessages": stats.get("entriesAddedCounter", 0),
        "messageBacklog": max((c["cursorBacklog"] for c in cursors.values()), default=0),
        "brokerName": f"{services.cluster.advertised_host}:{services.cluster.http_port}",
        "topicName": str(topic),
        "dataLedgerDetails": [],
        "cursorDetails": cursors,
        "statGeneratedAt": format_time(int(time.time() * 1000)),
    }


async def get_internal_info(services: Services, request: web.Request) -> dict[str, Any]:
    """``ManagedLedgerInfo`` (``getManagedLedgerInfo``): the topic's ledgers and, once it
    was terminated, its ``terminatedPosition``."""
    topic = await _existing(services, request)
    return await services.internal_stats.ledger_info(topic)


async def create_missed_partitions(services: Services, request: web.Request) -> None:
    """Create the partitions of a partitioned topic that do not exist (Pulsar's
    ``createMissedPartitions``)."""
    topic = topic_name(request, partitioned=True)
    count = await services.topics.partitions(topic)
    if count == 0:
        raise fail(web.HTTPNotFound, f"Partitioned Topic not found: {topic}")
    for index in range(count):
        partition = topic.partition(index)
        if not await services.topics.exists(partition):
            await services.topics.create_non_partitioned(partition)


async def message_id_by_timestamp(services: Services, request: web.Request) -> dict[str, int]:
    """``MessageIdImpl`` of the first message published at or after the time (ms)."""
    raw = request.match_info["timestamp"]
    try:
        timestamp = int(raw)
    except ValueError:
        raise fail(web.HTTPBadRequest, f"Invalid timestamp {raw[:40]!r}") from None
    return message_id_json(
        await services.subscription_admin.message_id_at(topic_name(request), timestamp)
    )


async def backlog_size_by_message_id(services: Services, request: web.Request) -> int:
    """``PUT .../backlogSize`` with a ``MessageIdImpl`` body: the estimated size (bytes) of
    what follows that message."""
    body = await read_json(request)
    if not isinstance(body, dict):
        raise fail(web.HTTPBadRequest, "Invalid message id: expected a MessageIdImpl object")
    ledger, entry = body.get("ledgerId"), body.get("entryId")
    if type(ledger) is not int or type(entry) is not int:  # bool is an int: refused too
        raise fail(web.HTTPBadRequest, "Invalid message id: ledgerId and entryId are required")
    if not (0 <= ledger < 2**63 and 0 <= entry < 2**63):  # Pulsar's ids are Java longs
        raise fail(web.HTTPPreconditionFailed, f"Invalid message id {ledger}:{entry}")
    position = MessageId(ledger, entry)
    return await services.subscription_admin.backlog_size_after(topic_name(request), position)


def message_id_json(message_id: MessageId) -> dict[str, int]:
    """Pulsar's ``MessageIdImpl`` JSON."""
    return {
        "ledgerId": message_id.ledger_id,
        "entryId": message_id.entry_id,
        "partitionIndex": message_id.partition,
    }


async def terminate(services: Services, request: web.Request) -> dict[str, int]:
    """``POST .../terminate``: the topic takes no more messages; answers its last message
    id. Every gateway closes its producers of it; its consumers are told when they have
    read it all (REACHED_END_OF_TOPIC)."""
    topic = topic_name(request)
    last = await services.subscription_admin.terminate(topic)
    await services.unloads.terminated(str(topic))
    return message_id_json(last)


async def terminate_partitions(services: Services, request: web.Request) -> dict[str, Any]:
    """``POST .../terminate/partitions``: every partition of a partitioned topic, answered
    as partition index -> last message id."""
    topic = topic_name(request, partitioned=True)
    count = await services.topics.partitions(topic)
    if count == 0:
        raise fail(web.HTTPNotFound, f"Partitioned Topic not found: {topic}")
    out = {}
    for index in range(count):
        last = await services.subscription_admin.terminate(topic.partition(index))
        out[str(index)] = message_id_json(last)
    await services.unloads.terminated(str(topic))
    return out


async def truncate(services: Services, request: web.Request) -> None:
    await services.subscription_admin.truncate(topic_name(request))


# -- properties -------------------------------------------------------------------------------


async def _properties(services: Services, topic: TopicName) -> dict[str, str]:
    value = await services.policies.get_topic(topic, PROPERTIES_POLICY)
    return dict(value) if isinstance(value, dict) else {}


async def get_properties(services: Services, request: web.Request) -> dict[str, str]:
    return await _properties(services, await _existing(services, request))


async def update_properties(services: Services, request: web.Request) -> None:
    """``PUT .../properties``: the given properties are added (or replaced)."""
    topic = await _existing(services, request)
    body = await read_properties(request)
    properties = await _properties(services, topic)
    properties.update(body)
    await services.policies.set_topic(topic, PROPERTIES_POLICY, properties)


async def remove_property(services: Services, request: web.Request) -> None:
    """``DELETE .../properties?key=``: remove one property."""
    topic = await _existing(services, request)
    key = request.query.get("key")
    if not key:
        raise fail(web.HTTPPreconditionFailed, "The key of the property to remove is required")
    properties = await _properties(services, topic)
    if properties.pop(key, None) is not None:
        await services.policies.set_topic(topic, PROPERTIES_POLICY, properties)


# -- a subscription ---------------------------------------------------------------------------


async def _subscription_stats(services: Services, request: web.Request) -> dict[str, Any]:
    topic = await _existing(services, request)
    stats = await services.stats.topic(str(topic))
    sub = stats.get("subscriptions", {}).get(request.match_info["subName"])
    if sub is None:
        raise fail(web.HTTPNotFound, "Subscription not found")
    return dict(sub)


async def get_subscription_properties(services: Services, request: web.Request) -> dict[str, str]:
    topic = topic_name(request)
    return await services.subscription_admin.properties(topic, request.match_info["subName"])


async def update_subscription_properties(services: Services, request: web.Request) -> None:
    """``PUT .../subscription/{subName}/properties``: the given map replaces the old one."""
    topic = topic_name(request)
    body = await read_properties(request)
    await services.subscription_admin.update_properties(topic, request.match_info["subName"], body)


async def analyze_backlog(services: Services, request: web.Request) -> dict[str, Any]:
    """``AnalyzeSubscriptionBacklogResult``: with no entry filters, every backlog entry is
    accepted."""
    sub = await _subscription_stats(services, request)
    messages = int(sub.get("msgBacklog", 0))
    return {
        "entries": messages,
        "messages": messages,
        "filterRejectedEntries": 0,
        "filterAcceptedEntries": messages,
        "filterRescheduledEntries": 0,
        "filterRejectedMessages": 0,
        "filterAcceptedMessages": messages,
        "filterRescheduledMessages": 0,
        "aborted": False,
    }


async def get_replicated_subscription_status(
    services: Services, request: web.Request
) -> dict[str, bool]:
    """Whether the subscription is replicated, per topic: never (no geo-replication)."""
    await _subscription_stats(services, request)
    return {str(topic_name(request)): False}


async def set_replicated_subscription_status(services: Services, request: web.Request) -> None:
    await _subscription_stats(services, request)
    raw = (await read_text(request)).strip()
    try:
        enabled = json.loads(raw)
    except ValueError:
        raise fail(
            web.HTTPBadRequest, f"Invalid body {raw[:100]!r}: expected true or false"
        ) from None
    if not isinstance(enabled, bool):
        raise fail(web.HTTPBadRequest, f"Invalid body {raw[:100]!r}: expected true or false")
    if enabled:
        raise fail(
            web.HTTPNotImplemented,
            "Replicated subscriptions do not apply: the fleet is one cluster, without "
            "geo-replication",
        )


# -- offload, bundles -------------------------------------------------------------------------


async def offload(services: Services, request: web.Request) -> None:
    await _existing(services, request)
    raise fail(web.HTTPNotImplemented, _OFFLOAD)


async def non_persistent_topics_of_bundle(services: Services, request: web.Request) -> list[str]:
    """``GET /non-persistent/{tenant}/{namespace}/{bundle}``: the namespace's one bundle
    holds all its non-persistent topics."""
    namespace = namespace_name(request)
    await services.tenants.require_namespace(namespace)
    if request.match_info["bundle"] != FULL_BUNDLE:
        raise fail(web.HTTPNotFound, f"Bundle {namespace}/{request.match_info['bundle']} not found")
    return await services.topics.topics(namespace, "non-persistent")


_ROUTES: tuple[tuple[str, str, Body], ...] = (
    ("GET", f"{_DOMAIN_TOPIC}/backlog", get_backlog),
    ("GET", f"{_DOMAIN_TOPIC}/internal-info", get_internal_info),
    ("POST", f"{_DOMAIN_TOPIC}/createMissedPartitions", create_missed_partitions),
    ("GET", f"{_DOMAIN_TOPIC}/messageid/{{timestamp}}", message_id_by_timestamp),
    ("PUT", f"{_DOMAIN_TOPIC}/backlogSize", backlog_size_by_message_id),
    ("DELETE", f"{_DOMAIN_TOPIC}/truncate", truncate),
    ("POST", f"{_DOMAIN_TOPIC}/terminate", terminate),
    ("POST", f"{_DOMAIN_TOPIC}/terminate/partitions", terminate_partitions),
    ("GET", f"{_DOMAIN_TOPIC}/properties", get_properties),
    ("PUT", f"{_DOMAIN_TOPIC}/properties", update_properties),
    ("DELETE", f"{_DOMAIN_TOPIC}/properties", remove_property),
    ("POST", f"{_DOMAIN_TOPIC}/{_SUB}/analyzeBacklog", analyze_backlog),
    ("GET", f"{_DOMAIN_TOPIC}/{_SUB}/properties", get_subscription_properties),
    ("PUT", f"{_DOMAIN_TOPIC}/{_SUB}/properties", update_subscription_properties),
    (
        "GET",
        f"{_DOMAIN_TOPIC}/{_SUB}/replicatedSubscriptionStatus",
        get_replicated_subscription_status,
    ),
    (
        "POST",
        f"{_DOMAIN_TOPIC}/{_SUB}/replicatedSubscriptionStatus",
        set_replicated_subscription_status,
    ),
    ("GET", f"{_DOMAIN_TOPIC}/offload", offload),
    ("PUT", f"{_DOMAIN_TOPIC}/offload", offload),
    (
        "GET",
        f"/admin/v2/non-persistent/{{tenant}}/{{namespace}}/{_BUNDLE_RANGE}",
        non_persistent_topics_of_bundle,
    ),
)

_TAG = "topics"
_SUB_DOC = f"{TOPIC}/subscription/{{subName}}"

#: OpenAPI descriptions of these routes (``openapi.py``).
DOCS: dict[tuple[str, str], Doc] = {
    ("GET", f"{TOPIC}/backlog"): Doc(
        _TAG, "The estimated backlog (PersistentOfflineTopicStats)", response=obj()
    ),
    ("GET", f"{TOPIC}/internal-info"): Doc(
        _TAG, "The managed ledger info (one pseudo-ledger)", response=obj()
    ),
    ("POST", f"{TOPIC}/createMissedPartitions"): Doc(
        _TAG, "Create a partitioned topic's missing partitions", ok=204
    ),
    ("GET", f"{TOPIC}/messageid/{{timestamp}}"): Doc(
        _TAG, "The first message published at or after a time (ms)", response="MessageIdImpl"
    ),
    ("PUT", f"{TOPIC}/backlogSize"): Doc(
        _TAG,
        "The estimated size (bytes) of what follows a message",
        body="MessageIdImpl",
        response={"type": "integer", "format": "int64"},
    ),
    ("DELETE", f"{TOPIC}/truncate"): Doc(
        _TAG, "Truncate: cursors to the end, every entry but the last deleted", ok=204
    ),
    ("POST", f"{TOPIC}/terminate"): Doc(
        _TAG, "Terminate: no more messages; answers the last message id", response="MessageIdImpl"
    ),
    ("POST", f"{TOPIC}/terminate/partitions"): Doc(
        _TAG,
        "Terminate every partition; answers partition -> last message id",
        response={
            "type": "object",
            "additionalProperties": {"$ref": "#/components/schemas/MessageIdImpl"},
        },
    ),
    ("GET", f"{TOPIC}/properties"): Doc(_TAG, "The topic's properties", response=STR_MAP),
    ("PUT", f"{TOPIC}/properties"): Doc(_TAG, "Add properties", body=STR_MAP, ok=204),
    ("DELETE", f"{TOPIC}/properties"): Doc(
        _TAG, "Remove one property", query=(("key", "string"),), ok=204
    ),
    ("GET", f"{_SUB_DOC}/properties"): Doc(_TAG, "A subscription's properties", response=STR_MAP),
    ("PUT", f"{_SUB_DOC}/properties"): Doc(
        _TAG, "Replace a subscription's properties", body=STR_MAP, ok=204
    ),
    ("POST", f"{_SUB_DOC}/analyzeBacklog"): Doc(
        _TAG, "Analyze a subscription's backlog", response=obj()
    ),
    ("GET", f"{_SUB_DOC}/replicatedSubscriptionStatus"): Doc(
        _TAG, "Whether the subscription is replicated (never)", response=obj()
    ),
    ("POST", f"{_SUB_DOC}/replicatedSubscriptionStatus"): Doc(
        _TAG,
        "Disable replication (204); enabling it does not apply: 501, no geo-replication",
        body=BOOL,
        response="Error",
        ok=501,
    ),
    ("GET", f"{TOPIC}/offload"): Doc(_TAG, "Offload status (does not apply: 501)", ok=501),
    ("PUT", f"{TOPIC}/offload"): Doc(_TAG, "Trigger an offload (does not apply: 501)", ok=501),
    ("GET", "/admin/v2/non-persistent/{tenant}/{namespace}/{bundle}"): Doc(
        _TAG,
        "The non-persistent topics of a bundle",
        response={"type": "array", "items": {"type": "string"}},
    ),
}


def add_routes(app: web.Application) -> None:
    for method, path, body in _ROUTES:
        app.router.add_route(method, path, handler(body))
