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
    DELAYED_DELIVERY_POLICY,
    MAX_UNACKED_PER_CONSUMER_POLICY,
    MAX_UNACKED_PER_SUBSCRIPTION_POLICY,
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

    def routes(self) -> list[tuple[str, str, bool]]:
        """(method, path, topic level) of every route of this policy."""
        out: list[tuple[str, str, bool]] = []
        methods = ("GET", *self.set_methods, *(("DELETE",) if self.removable else ()))
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


POLICIES: tuple[PolicySpec, ...] = (
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
        raise fail(web.HTTPBadRequest, f"Invalid JSON: {exc}") from None
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
        if request.method == "GET":
            value = await get(scope, spec.name)
            if value is None and not topic_level and spec.namespace_default is not None:
                value = spec.namespace_default(request.app[SERVICES])
            return web.json_response(value)
        if request.method in spec.set_methods:
            await set_(scope, spec.name, await _read_value(request, spec, topic_level))
        else:
            await delete(scope, spec.name)
        return web.Response(status=204)

    return handle


def add_routes(app: web.Application, specs: tuple[PolicySpec, ...] = POLICIES) -> None:
    """Register every policy's namespace- and topic-level routes."""
    for spec in specs:
        for method, path, topic_level in spec.routes():
            app.router.add_route(method, path, _handler(spec, topic_level))
