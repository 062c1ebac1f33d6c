"""Admin REST v2: topics and partitioned topics, with Pulsar's paths, bodies and statuses.

Paths (``PersistentTopics.java`` / ``NonPersistentTopics.java``, ``{domain}`` is
``persistent`` or ``non-persistent``)::

    GET    /admin/v2/{domain}/{tenant}/{ns}                       getList
    GET    /admin/v2/{domain}/{tenant}/{ns}/partitioned           getPartitionedTopicList
    PUT    /admin/v2/{domain}/{tenant}/{ns}/{topic}               createNonPartitionedTopic
    DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}?force=        deleteTopic
    PUT    /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions    createPartitionedTopic
    POST   /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions    updatePartitionedTopic
    GET    /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions    getPartitionedMetadata
    DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions    deletePartitionedTopic

Statuses follow ``PersistentTopicsBase`` / ``AdminResource``: 204 on success of a change;
412 for an invalid name ("Topic name is not valid", "Partitioned Topic Name should not
contain '-partition-'"); 406 for a partition count below 1; 422 for a decrease; 409 when
the name is taken or is of the other kind; 404 when the topic does not exist; 412 "Topic
has active producers/subscriptions" for a delete without ``force`` while consumers are
connected. Every error body is ``{"reason": ...}`` (the app's middleware).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from gateway.broker import Broker
from gateway.errors import (
    GatewayError,
    InvalidPartitionCount,
    InvalidTopicName,
    MessageNotFound,
    StorageError,
    SubscriptionNotFound,
    TopicBusy,
    TopicConflict,
    TopicNotFound,
)
from gateway.topic_name import PARTITION_SUFFIX, TopicName, parse_topic_name

__all__ = ["add_routes"]

_DOMAIN = "{domain:persistent|non-persistent}"
_BASE = f"/admin/v2/{_DOMAIN}/{{tenant}}/{{namespace}}"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: Domain errors -> HTTP status, first match wins (the HTTP side of errors.py's table).
_STATUS: tuple[tuple[type[GatewayError], type[web.HTTPException]], ...] = (
    (InvalidTopicName, web.HTTPPreconditionFailed),
    (TopicConflict, web.HTTPConflict),
    (TopicBusy, web.HTTPPreconditionFailed),
    (TopicNotFound, web.HTTPNotFound),
    (SubscriptionNotFound, web.HTTPNotFound),
    (MessageNotFound, web.HTTPNotFound),
    (InvalidPartitionCount, web.HTTPUnprocessableEntity),
    (StorageError, web.HTTPServiceUnavailable),
)


def _fail(status: type[web.HTTPException], reason: str) -> web.HTTPException:
    # The json_errors middleware turns the reason into Pulsar's {"reason": ...} body.
    return status(reason=reason.replace("\n", " "))


def _http_error(exc: GatewayError) -> web.HTTPException:
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return _fail(status, str(exc))
    return _fail(web.HTTPInternalServerError, str(exc))


def _namespace(request: web.Request) -> str:
    tenant, namespace = request.match_info["tenant"], request.match_info["namespace"]
    try:
        parse_topic_name(f"persistent://{tenant}/{namespace}/x")
    except InvalidTopicName:
        raise _fail(web.HTTPPreconditionFailed, "Namespace name is not valid") from None
    return f"{tenant}/{namespace}"


def _topic(request: web.Request, partitioned: bool = False) -> TopicName:
    """The topic the path names; 412 when invalid (Pulsar ``validateTopicName``) and, for
    partitioned-topic operations, when it is a partition name (``validatePartitionedTopicName``)."""
    info = request.match_info
    name = f"{info['domain']}://{info['tenant']}/{info['namespace']}/{info['topic']}"
    try:
        topic = parse_topic_name(name)
    except InvalidTopicName:
        raise _fail(web.HTTPPreconditionFailed, "Topic name is not valid") from None
    if partitioned and PARTITION_SUFFIX in topic.local_name:
        raise _fail(
            web.HTTPPreconditionFailed, "Partitioned Topic Name should not contain '-partition-'"
        )
    return topic


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


async def _partition_count(request: web.Request) -> int:
    """The body of a create/update: a JSON int (``3``), or Pulsar's
    ``PartitionedTopicMetadata`` object (``{"partitions": 3, ...}``)."""
    raw = await request.text()
    try:
        value: Any = json.loads(raw)
    except ValueError:
        raise _fail(web.HTTPBadRequest, f"Invalid number of partitions: {raw[:100]!r}") from None
    if isinstance(value, dict):
        value = value.get("partitions")
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(web.HTTPBadRequest, f"Invalid number of partitions: {raw[:100]!r}")
    if value <= 0:
        raise _fail(web.HTTPNotAcceptable, "Number of partitions should be more than 0")
    return value


def _handler(
    broker_key: web.AppKey[Broker], body: Callable[[Broker, web.Request], Awaitable[Any]]
) -> Handler:
    """Wrap ``body``: domain errors become their HTTP status; None becomes 204."""

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            result = await body(request.app[broker_key], request)
        except GatewayError as exc:
            raise _http_error(exc) from None
        if result is None:
            return web.Response(status=204)
        return web.json_response(result)

    return handle


# -- handlers --------------------------------------------------------------------------------


async def get_list(broker: Broker, request: web.Request) -> list[str]:
    namespace = _namespace(request)
    return await broker.partitioned_topics.topics(namespace, request.match_info["domain"])


async def get_partitioned_list(broker: Broker, request: web.Request) -> list[str]:
    namespace = _namespace(request)
    domain = request.match_info["domain"]
    return await broker.partitioned_topics.partitioned_topics(namespace, domain)


async def create_non_partitioned(broker: Broker, request: web.Request) -> None:
    topic = _topic(request)
    if topic.partition_index >= 0:
        # Pulsar validateNonPartitionTopicName: a partition of a partitioned topic may only
        # be created through the partitioned topic.
        base = topic.partitioned_topic_name
        count = await broker.partitioned_topics.partitions(base)
        if count > 0:
            raise _fail(
                web.HTTPConflict,
                f'Can\'t create topic {topic} with "-partition-" if a partitioned topic '
                f"{base} of that name exists",
            )
    await broker.partitioned_topics.create_non_partitioned(topic)


async def delete_topic(broker: Broker, request: web.Request) -> None:
    force = _flag(request, "force")
    await broker.partitioned_topics.delete(_topic(request), force)
    if force:
        # Consumers here lose their leases with the topic's keys: close them now (the
        # client re-subscribes, as after Pulsar's forced delete); other gateways find out
        # at their next lease renewal.
        await broker.renew_leases()


async def create_partitioned(broker: Broker, request: web.Request) -> None:
    topic = _topic(request, partitioned=True)
    count = await _partition_count(request)
    await broker.partitioned_topics.create_partitioned(topic, count)


async def update_partitioned(broker: Broker, request: web.Request) -> None:
    topic = _topic(request, partitioned=True)
    count = await _partition_count(request)
    try:
        await broker.partitioned_topics.update_partitioned(topic, count, _flag(request, "force"))
    except TopicNotFound as exc:
        # Pulsar answers 409 "Topic ... is not the partitioned topic." here.
        raise _fail(web.HTTPConflict, str(exc)) from None


async def get_partitioned_metadata(broker: Broker, request: web.Request) -> dict[str, int]:
    topic = _topic(request)
    count = await broker.partitioned_topics.partitions(topic)
    if (
        count == 0
        and not _flag(request, "checkAllowAutoCreation")
        and not await broker.partitioned_topics.exists(topic)
    ):
        # Pulsar internalGetPartitionedMetadataAsync: a topic that exists neither as a
        # partitioned nor as a non-partitioned topic is 404, unless the caller says the
        # client would auto-create it (then partitions = 0, as the binary protocol answers).
        raise _fail(web.HTTPNotFound, f"Topic {topic} not found")
    return {"partitions": count}


async def delete_partitioned(broker: Broker, request: web.Request) -> None:
    force = _flag(request, "force")
    await broker.partitioned_topics.delete_partitioned(_topic(request, partitioned=True), force)
    if force:
        await broker.renew_leases()


def add_routes(app: web.Application, broker_key: web.AppKey[Broker]) -> None:
    """Register the topic admin routes for both domains."""
    routes: tuple[tuple[str, str, Callable[[Broker, web.Request], Awaitable[Any]]], ...] = (
        ("GET", _BASE, get_list),
        ("GET", f"{_BASE}/partitioned", get_partitioned_list),
        ("PUT", f"{_BASE}/{{topic}}", create_non_partitioned),
        ("DELETE", f"{_BASE}/{{topic}}", delete_topic),
        ("PUT", f"{_BASE}/{{topic}}/partitions", create_partitioned),
        ("POST", f"{_BASE}/{{topic}}/partitions", update_partitioned),
        ("GET", f"{_BASE}/{{topic}}/partitions", get_partitioned_metadata),
        ("DELETE", f"{_BASE}/{{topic}}/partitions", delete_partitioned),
    )
    for method, path, body in routes:
        app.router.add_route(method, path, _handler(broker_key, body))
