"""Admin REST v2: namespace and topic policies, with Pulsar's paths and JSON.

Namespace level (``Namespaces.java``): ``GET/POST/DELETE
/admin/v2/namespaces/{tenant}/{namespace}/{segment}``, value in the POST body.
Topic level (``PersistentTopics.java``, PIP-39): ``GET/POST/DELETE
/admin/v2/{persistent|non-persistent}/{tenant}/{namespace}/{topic}/{segment}``; the path
segment differs for deduplication (``deduplicationEnabled``), and Pulsar takes the topic
message TTL from the ``messageTTL`` query parameter rather than the body.

Unset policies read as JSON ``null``, except ``delayedDelivery`` at namespace level, which
reads as the broker defaults when unset (Pulsar's ``internalGetDelayedDelivery``); POST and
DELETE answer 204 No Content, and invalid values get 412 Precondition Failed with a JSON
``reason``, as Pulsar does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from pulsar_gateway.adapters.resource import SERVICES, fail, http_error, read_text
from pulsar_gateway.core import (
    AUTO_SUBSCRIPTION_CREATION_POLICY,
    DELAYED_DELIVERY_POLICY,
    INACTIVE_TOPIC_POLICY,
    MAX_CONSUMERS_PER_SUBSCRIPTION_POLICY,
    MAX_CONSUMERS_PER_TOPIC_POLICY,
    MAX_PRODUCERS_POLICY,
    MAX_SUBSCRIPTIONS_POLICY,
    MAX_UNACKED_PER_CONSUMER_POLICY,
    MAX_UNACKED_PER_SUBSCRIPTION_POLICY,
    SUBSCRIPTION_EXPIRATION_POLICY,
    SUBSCRIPTION_TYPES_POLICY,
    DelayedDeliveryPolicy,
    GatewayError,
    InvalidTopicName,
    Services,
    parse_topic_name,
)

__all__ = ["NAMESPACE_PATH", "POLICIES", "TOPIC_PATH", "PolicySpec", "add_routes"]


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("expected an integer >= 0")
    return value


def _retention(value: Any) -> dict[str, int]:
    # RetentionPolicies: -1 = infinite, 0 = none (Pulsar's checkRetentionPolicies).
    if not isinstance(value, dict):
        raise ValueError('expected {"retentionTimeInMinutes": int, "retentionSizeInMB": int}')
    out = {}
    for name in ("retentionTimeInMinutes", "retentionSizeInMB"):
        item = value.get(name, 0)
        if isinstance(item, bool) or not isinstance(item, int) or item < -1:
            raise ValueError(f"{name} must be an integer >= -1")
        out[name] = item
    return out


def _int_at_least(minimum: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"expected an integer >= {minimum}")
        return value

    return check


def _one_of(*allowed: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}")
        return str(value)

    return check


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value


def _strings(item: Callable[[Any], str] = _string) -> Callable[[Any], list[str]]:
    def check(value: Any) -> list[str]:
        if not isinstance(value, list):
            raise ValueError("expected a list")
        return [item(v) for v in value]

    return check


#: One field of a Pulsar data object: validator, Pulsar's default, JSON schema.
_Field = tuple[Callable[[Any], Any], Any, dict[str, Any]]


def _object(
    fields: dict[str, _Field], required: tuple[str, ...] = ()
) -> tuple[Callable[[Any], dict[str, Any]], dict[str, Any]]:
    """A Pulsar data object's validator and JSON schema: each field validated, absent ones
    at Pulsar's default, unknown ones dropped (Pulsar's ObjectMapper ignores unknown
    properties)."""

    def check(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValueError(f"expected an object with {', '.join(fields)}")
        out = {}
        for name, (validate, default, _) in fields.items():
            if value.get(name) is None:
                if name in required:
                    raise ValueError(f"{name} is required")
                out[name] = default
                continue
            try:
                out[name] = validate(value[name])
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        return out

    schema = {
        "type": "object",
        "properties": {name: field[2] for name, field in fields.items()},
        **({"required": list(required)} if required else {}),
    }
    return check, schema


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """One policy: its stored name, its path segments and how to validate a value."""

    name: str
    #: the path segment at namespace and at topic level (None: no route at that level)
    namespace_segment: str | None
    topic_segment: str | None
    validate: Callable[[Any], Any]
    topic_query: str | None = None  # topic-level value taken from this query parameter
    namespace_default: Callable[[Services], Any] | None = None  # namespace GET when unset
    #: the JSON schema of a value, for the OpenAPI description
    #: (pulsar_gateway/adapters/http/openapi.py)
    schema: dict[str, Any] = field(default_factory=dict)
    #: the methods that set the value (Pulsar uses PUT for some policies, and accepts
    #: both for a few that changed method between releases)
    set_methods: tuple[str, ...] = ("POST",)
    #: whether DELETE removes the value (a few of Pulsar's policies have no DELETE)
    removable: bool = True
    #: why the policy cannot mean anything over Redis: setting it answers 501 with this
    #: reason, reading it answers "unset" (JSON null), removing it is a no-op
    unavailable: str | None = None
    #: the gateway-wide default, answered by a topic-level GET with ``applied=true`` when
    #: neither the topic nor its namespace sets the policy (Pulsar's broker.conf value)
    default: Callable[[Services], Any] | None = None
    #: whether GET reads the value (Pulsar removes namespace offload policies at a path of
    #: their own, which has only DELETE)
    readable: bool = True
    #: a body that is not JSON is taken as the text itself (Pulsar's String bodies)
    text_body: bool = False

    def routes(self) -> list[tuple[str, str, bool]]:
        """(method, path, topic level) of every route of this policy."""
        out: list[tuple[str, str, bool]] = []
        methods = (
            *(("GET",) if self.readable else ()),
            *self.set_methods,
            *(("DELETE",) if self.removable else ()),
        )
        for segment, prefix, topic_level in (
            (self.namespace_segment, NAMESPACE_PATH, False),
            (self.topic_segment, TOPIC_PATH, True),
        ):
            if segment is not None:
                out.extend((method, f"{prefix}/{segment}", topic_level) for method in methods)
        return out


NAMESPACE_PATH = "/admin/v2/namespaces/{tenant}/{namespace}"
TOPIC_PATH = "/admin/v2/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}"


_INT_SCHEMA = {"type": "integer", "minimum": 0}


_GATEWAY_POLICIES: tuple[PolicySpec, ...] = (
    PolicySpec(
        "deduplication",
        "deduplication",
        "deduplicationEnabled",
        _bool,
        schema={"type": "boolean"},
    ),
    PolicySpec(
        "messageTTL",
        "messageTTL",
        "messageTTL",
        _non_negative_int,
        "messageTTL",
        schema=_INT_SCHEMA,
    ),
    PolicySpec(
        "retention",
        "retention",
        "retention",
        _retention,
        schema={
            "type": "object",
            "properties": {
                "retentionTimeInMinutes": {"type": "integer", "minimum": -1},
                "retentionSizeInMB": {"type": "integer", "minimum": -1},
            },
        },
    ),
    PolicySpec(
        "compactionThreshold",
        "compactionThreshold",
        "compactionThreshold",
        _non_negative_int,
        schema=_INT_SCHEMA,
        # pulsar-admin sends PUT (Namespaces.setCompactionThreshold), topic level POST
        set_methods=("PUT", "POST"),
    ),
    # Pulsar's maxUnackedMessagesPerConsumer / PerSubscription at namespace level, and
    # maxUnackedMessagesOnConsumer / OnSubscription at topic level: one stored name each
    PolicySpec(
        MAX_UNACKED_PER_CONSUMER_POLICY,
        "maxUnackedMessagesPerConsumer",
        "maxUnackedMessagesOnConsumer",
        _non_negative_int,
        schema=_INT_SCHEMA,
    ),
    PolicySpec(
        MAX_UNACKED_PER_SUBSCRIPTION_POLICY,
        "maxUnackedMessagesPerSubscription",
        "maxUnackedMessagesOnSubscription",
        _non_negative_int,
        schema=_INT_SCHEMA,
    ),
    PolicySpec(
        DELAYED_DELIVERY_POLICY,
        "delayedDelivery",
        "delayedDelivery",
        lambda value: DelayedDeliveryPolicy.from_json(value).to_json(),
        namespace_default=lambda services: services.limits.default_delayed_delivery.to_json(),
        schema={
            "type": "object",
            "required": ["active"],
            "properties": {
                "active": {"type": "boolean"},
                "tickTime": _INT_SCHEMA,
                "maxDeliveryDelayInMillis": _INT_SCHEMA,
                "fixedDeliveryDelayInMillis": _INT_SCHEMA,
            },
        },
    ),
)


# -- the rest of Pulsar's namespace and topic policies (Policies.java, TopicPolicies.java) --

_LONG = {"type": "integer", "format": "int64"}
_BOOL_SCHEMA = {"type": "boolean"}
_STRING_SCHEMA = {"type": "string"}
_ANY_INT = _int_at_least(-1)

_DISPATCH_RATE = _object(  # DispatchRateImpl
    {
        "dispatchThrottlingRateInMsg": (_ANY_INT, -1, _LONG),
        "dispatchThrottlingRateInByte": (_ANY_INT, -1, _LONG),
        "relativeToPublishRate": (_bool, False, _BOOL_SCHEMA),
        "ratePeriodInSecond": (_int_at_least(1), 1, _LONG),
    }
)
_PUBLISH_RATE = _object(  # PublishRate
    {
        "publishThrottlingRateInMsg": (_ANY_INT, -1, _LONG),
        "publishThrottlingRateInByte": (_ANY_INT, -1, _LONG),
    }
)
_SUBSCRIBE_RATE = _object(  # SubscribeRate
    {
        "subscribeThrottlingRatePerConsumer": (_ANY_INT, -1, _LONG),
        "ratePeriodInSecond": (_int_at_least(1), 30, _LONG),
    }
)
_INACTIVE_TOPIC = _object(  # InactiveTopicPolicies
    {
        "inactiveTopicDeleteMode": (
            _one_of("delete_when_no_subscriptions", "delete_when_subscriptions_caught_up"),
            "delete_when_no_subscriptions",
            _STRING_SCHEMA,
        ),
        "maxInactiveDurationSeconds": (_int_at_least(0), 60, _LONG),
        "deleteWhileInactive": (_bool, False, _BOOL_SCHEMA),
    }
)
_AUTO_TOPIC_CREATION = _object(  # AutoTopicCreationOverrideImpl
    {
        "allowAutoTopicCreation": (_bool, None, _BOOL_SCHEMA),
        "topicType": (_one_of("partitioned", "non-partitioned"), None, _STRING_SCHEMA),
        "defaultNumPartitions": (_int_at_least(1), None, _LONG),
    },
    required=("allowAutoTopicCreation", "topicType"),
)
_AUTO_SUBSCRIPTION_CREATION = _object(  # AutoSubscriptionCreationOverrideImpl
    {"allowAutoSubscriptionCreation": (_bool, None, _BOOL_SCHEMA)},
    required=("allowAutoSubscriptionCreation",),
)
_SUBSCRIPTION_TYPES = _strings(_one_of("Exclusive", "Shared", "Failover", "Key_Shared"))
_STRING_LIST = {"type": "array", "items": _STRING_SCHEMA}
_COUNT = _int_at_least(0)

_BOOKKEEPER = (
    "BookKeeper persistence policies (ensemble, write and ack quorums, mark-delete rate) do "
    "not apply: every message is stored in Redis, whose durability is Redis's persistence "
    "(AOF, replicas) and the gateway's --replica-acks"
)
_OFFLOAD = (
    "Offload to tiered storage does not apply: a topic is a Redis stream, kept whole in "
    "Redis; trim it with retention"
)
_SNAPSHOT = (
    "Deduplication snapshots do not apply: the deduplication state is written with every "
    "message, so there is no snapshot to space out"
)
_ENTRY_FILTERS = "Entry filters are broker plugins (Java classes); the gateway cannot load them"
_REPLICATOR = (
    "Geo-replication does not apply: the fleet is one cluster over one Redis, so there are "
    "no replicators to throttle"
)
_SHADOW = "Shadow topics (PIP-180) are not supported by this gateway"
_BOOKIE_AFFINITY = (
    "Bookie affinity groups do not apply: there are no bookies; messages are stored in Redis"
)
_RESOURCE_GROUPS = (
    "Resource groups (PIP-82) are not supported by this gateway: limit rates with the "
    "namespace and topic rate policies"
)


def _max_message_size(services: Services) -> int:
    return services.limits.max_message_size


PULSAR_POLICIES: tuple[PolicySpec, ...] = (
    PolicySpec(
        "autoTopicCreation",
        "autoTopicCreation",
        None,
        _AUTO_TOPIC_CREATION[0],
        schema=_AUTO_TOPIC_CREATION[1],
    ),
    PolicySpec(
        AUTO_SUBSCRIPTION_CREATION_POLICY,
        "autoSubscriptionCreation",
        "autoSubscriptionCreation",
        _AUTO_SUBSCRIPTION_CREATION[0],
        schema=_AUTO_SUBSCRIPTION_CREATION[1],
    ),
    PolicySpec(
        "dispatchRate", "dispatchRate", "dispatchRate", _DISPATCH_RATE[0], schema=_DISPATCH_RATE[1]
    ),
    PolicySpec(
        "subscriptionDispatchRate",
        "subscriptionDispatchRate",
        "subscriptionDispatchRate",
        _DISPATCH_RATE[0],
        schema=_DISPATCH_RATE[1],
    ),
    # one subscription's own rate: stored as subscriptionDispatchRate/<subscription>
    PolicySpec(
        "subscriptionDispatchRate",
        None,
        "{subName}/dispatchRate",
        _DISPATCH_RATE[0],
        schema=_DISPATCH_RATE[1],
    ),
    PolicySpec("publishRate", None, "publishRate", _PUBLISH_RATE[0], schema=_PUBLISH_RATE[1]),
    PolicySpec(
        "subscribeRate",
        "subscribeRate",
        "subscribeRate",
        _SUBSCRIBE_RATE[0],
        schema=_SUBSCRIBE_RATE[1],
    ),
    PolicySpec(
        INACTIVE_TOPIC_POLICY,
        "inactiveTopicPolicies",
        "inactiveTopicPolicies",
        _INACTIVE_TOPIC[0],
        schema=_INACTIVE_TOPIC[1],
        default=lambda services: services.limits.default_inactive_topic_policies,
    ),
    PolicySpec(
        "encryptionRequired",
        "encryptionRequired",
        None,
        _bool,
        schema=_BOOL_SCHEMA,
        removable=False,
    ),
    PolicySpec(
        MAX_PRODUCERS_POLICY,
        "maxProducersPerTopic",
        "maxProducers",
        _COUNT,
        schema=_INT_SCHEMA,
        default=lambda services: 0,
    ),
    PolicySpec(
        MAX_CONSUMERS_PER_TOPIC_POLICY,
        "maxConsumersPerTopic",
        "maxConsumers",
        _COUNT,
        schema=_INT_SCHEMA,
        default=lambda services: 0,
    ),
    PolicySpec(
        MAX_CONSUMERS_PER_SUBSCRIPTION_POLICY,
        "maxConsumersPerSubscription",
        "maxConsumersPerSubscription",
        _COUNT,
        schema=_INT_SCHEMA,
        default=lambda services: 0,
    ),
    PolicySpec(
        MAX_SUBSCRIPTIONS_POLICY,
        "maxSubscriptionsPerTopic",
        "maxSubscriptionsPerTopic",
        _COUNT,
        schema=_INT_SCHEMA,
        default=lambda services: 0,
    ),
    PolicySpec("maxTopicsPerNamespace", "maxTopicsPerNamespace", None, _COUNT, schema=_INT_SCHEMA),
    PolicySpec(
        "maxMessageSize",
        None,
        "maxMessageSize",
        _COUNT,
        schema=_INT_SCHEMA,
        default=_max_message_size,
    ),
    PolicySpec(
        SUBSCRIPTION_EXPIRATION_POLICY,
        "subscriptionExpirationTime",
        None,
        _COUNT,
        schema=_INT_SCHEMA,
    ),
    PolicySpec(
        SUBSCRIPTION_TYPES_POLICY,
        "subscriptionTypesEnabled",
        "subscriptionTypesEnabled",
        _SUBSCRIPTION_TYPES,
        schema=_STRING_LIST,
    ),
    PolicySpec(
        "subscriptionAuthMode",
        "subscriptionAuthMode",
        None,
        _one_of("None", "Prefix"),
        schema={"type": "string", "enum": ["None", "Prefix"]},
        removable=False,
        text_body=True,
    ),
    PolicySpec(
        "replicationClusters",
        "replication",
        "replication",
        _strings(),
        schema=_STRING_LIST,
    ),
    PolicySpec(
        "antiAffinityGroup",
        "antiAffinity",
        None,
        _string,
        schema=_STRING_SCHEMA,
        text_body=True,
    ),
    # what cannot mean anything over Redis: answered, never silently accepted
    PolicySpec("persistence", "persistence", "persistence", _bool, unavailable=_BOOKKEEPER),
    PolicySpec(
        "offloadPolicies",
        "offloadPolicies",
        "offloadPolicies",
        _bool,
        unavailable=_OFFLOAD,
    ),
    PolicySpec(
        "offloadPolicies",
        "removeOffloadPolicies",
        None,
        _bool,
        unavailable=_OFFLOAD,
        readable=False,
        set_methods=(),
    ),
    PolicySpec(
        "offloadThreshold",
        "offloadThreshold",
        None,
        _bool,
        unavailable=_OFFLOAD,
        set_methods=("PUT",),
        removable=False,
    ),
    PolicySpec(
        "offloadThresholdInSeconds",
        "offloadThresholdInSeconds",
        None,
        _bool,
        unavailable=_OFFLOAD,
        set_methods=("PUT",),
        removable=False,
    ),
    PolicySpec(
        "offloadDeletionLagMs",
        "offloadDeletionLagMs",
        None,
        _bool,
        unavailable=_OFFLOAD,
        set_methods=("PUT",),
    ),
    PolicySpec(
        "deduplicationSnapshotInterval",
        "deduplicationSnapshotInterval",
        "deduplicationSnapshotInterval",
        _bool,
        unavailable=_SNAPSHOT,
    ),
    PolicySpec("entryFilters", "entryFilters", "entryFilters", _bool, unavailable=_ENTRY_FILTERS),
    PolicySpec(
        "replicatorDispatchRate",
        "replicatorDispatchRate",
        "replicatorDispatchRate",
        _bool,
        unavailable=_REPLICATOR,
    ),
    PolicySpec(
        "shadowTopics", None, "shadowTopics", _bool, unavailable=_SHADOW, set_methods=("PUT",)
    ),
    PolicySpec(
        "bookieAffinityGroup",
        "persistence/bookieAffinity",
        None,
        _bool,
        unavailable=_BOOKIE_AFFINITY,
    ),
    PolicySpec(
        "resourceGroup",
        "resourcegroup",
        None,
        _bool,
        unavailable=_RESOURCE_GROUPS,
        set_methods=(),
    ),
    PolicySpec(
        "resourceGroup",
        "resourcegroup/{resourcegroup}",
        None,
        _bool,
        unavailable=_RESOURCE_GROUPS,
        readable=False,
        removable=False,
    ),
)

#: Every policy route's spec (schemas.py adds the schema policies).
POLICIES: tuple[PolicySpec, ...] = _GATEWAY_POLICIES + PULSAR_POLICIES


async def _read_value(request: web.Request, spec: PolicySpec, topic_level: bool) -> Any:
    if topic_level and spec.topic_query is not None:
        raw = request.query.get(spec.topic_query)
        if raw is None:
            raise fail(web.HTTPPreconditionFailed, f"Missing query parameter {spec.topic_query}")
    else:
        raw = await read_text(request)
    try:
        value = json.loads(raw)
    except ValueError as exc:
        if not spec.text_body:
            raise fail(web.HTTPBadRequest, f"Invalid JSON: {exc}") from None
        value = raw
    try:
        return spec.validate(value)
    except ValueError as exc:
        raise fail(web.HTTPPreconditionFailed, f"Invalid {spec.name}: {exc}") from None


def _namespace(request: web.Request) -> str:
    tenant, namespace = request.match_info["tenant"], request.match_info["namespace"]
    try:
        parse_topic_name(f"persistent://{tenant}/{namespace}/x")
    except InvalidTopicName as exc:
        raise fail(web.HTTPPreconditionFailed, f"Invalid namespace: {exc}") from None
    return f"{tenant}/{namespace}"


def _topic(request: web.Request) -> str:
    info = request.match_info
    name = f"{info['domain']}://{info['tenant']}/{info['namespace']}/{info['topic']}"
    try:
        return str(parse_topic_name(name))
    except InvalidTopicName as exc:
        raise fail(web.HTTPPreconditionFailed, f"Invalid topic name: {exc}") from None


def _applied(request: web.Request) -> bool:
    """Pulsar's ``applied`` query parameter of topic-level GETs: the value in force (topic,
    else namespace, else broker default) rather than the topic's own."""
    return request.query.get("applied", "false").lower() == "true"


def _handler(spec: PolicySpec, topic_level: bool) -> Any:
    """GET/POST/DELETE of one policy at namespace or topic level (GET answers the value
    itself, JSON ``null`` when unset, so this is not the common ``resource.handler``)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            return await _run(request)
        except GatewayError as exc:
            raise http_error(exc) from None

    async def _run(request: web.Request) -> web.StreamResponse:
        policies = request.app[SERVICES].policies
        scope = _topic(request) if topic_level else _namespace(request)
        get, set_, delete = (
            (policies.get_topic, policies.set_topic, policies.delete_topic)
            if topic_level
            else (policies.get_namespace, policies.set_namespace, policies.delete_namespace)
        )
        services = request.app[SERVICES]
        name = spec.name
        if "subName" in request.match_info:  # a subscription's own value, on its topic
            name = f"{spec.name}/{request.match_info['subName']}"
        if request.method == "GET":
            if spec.unavailable is not None:
                return web.json_response(None)
            if topic_level and _applied(request):
                value = await policies.effective(scope, name)
                default = spec.default or spec.namespace_default
                if value is None and default is not None:
                    value = default(services)
                return web.json_response(value)
            value = await get(scope, name)
            if value is None and not topic_level and spec.namespace_default is not None:
                value = spec.namespace_default(services)
            return web.json_response(value)
        if spec.unavailable is not None:
            if request.method == "DELETE":
                return web.Response(status=204)
            raise fail(web.HTTPNotImplemented, spec.unavailable)
        if request.method in spec.set_methods:
            await set_(scope, name, await _read_value(request, spec, topic_level))
        else:
            await delete(scope, name)
        return web.Response(status=204)

    return handle


def add_routes(app: web.Application, specs: tuple[PolicySpec, ...] = POLICIES) -> None:
    """Register every policy's namespace- and topic-level routes."""
    for spec in specs:
        for method, path, topic_level in spec.routes():
            app.router.add_route(method, path, _handler(spec, topic_level))
