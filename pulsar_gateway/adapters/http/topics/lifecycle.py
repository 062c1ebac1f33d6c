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
from typing import Any

from aiohttp import web

from pulsar_gateway.adapters.resource import (
    Body,
    fail,
    flag,
    handler,
    namespace_name,
    read_text,
    topic_name,
)
from pulsar_gateway.core import Services, TopicNotFound

__all__ = ["add_routes"]

_DOMAIN = "{domain:persistent|non-persistent}"
_BASE = f"/admin/v2/{_DOMAIN}/{{tenant}}/{{namespace}}"


async def _partition_count(request: web.Request) -> int:
    """The body of a create/update: a JSON int (``3``), or Pulsar's
    ``PartitionedTopicMetadata`` object (``{"partitions": 3, ...}``)."""
    raw = await read_text(request)
    try:
        value: Any = json.loads(raw)
    except ValueError:
        raise fail(web.HTTPBadRequest, f"Invalid number of partitions: {raw[:100]!r}") from None
    if isinstance(value, dict):
        value = value.get("partitions")
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(web.HTTPBadRequest, f"Invalid number of partitions: {raw[:100]!r}")
    if value <= 0:
        raise fail(web.HTTPNotAcceptable, "Number of partitions should be more than 0")
    return value


# -- handlers --------------------------------------------------------------------------------


async def get_list(services: Services, request: web.Request) -> list[str]:
    namespace = namespace_name(request)
    await services.tenants.require_namespace(namespace)
    return await services.topics.topics(namespace, request.match_info["domain"])


async def get_partitioned_list(services: Services, request: web.Request) -> list[str]:
    namespace = namespace_name(request)
    await services.tenants.require_namespace(namespace)
    domain = request.match_info["domain"]
    return await services.topics.partitioned_topics(namespace, domain)


async def create_non_partitioned(services: Services, request: web.Request) -> None:
    topic = topic_name(request)
    if topic.partition_index >= 0:
        # Pulsar validateNonPartitionTopicName: a partition of a partitioned topic may only
        # be created through the partitioned topic.
        base = topic.partitioned_topic_name
        count = await services.topics.partitions(base)
        if count > 0:
            raise fail(
                web.HTTPConflict,
                f'Can\'t create topic {topic} with "-partition-" if a partitioned topic '
                f"{base} of that name exists",
            )
    await services.topics.create_non_partitioned(topic)


async def delete_topic(services: Services, request: web.Request) -> None:
    force = flag(request, "force")
    await services.topics.delete(topic_name(request), force)
    if force:
        # Consumers here lose their leases with the topic's keys: close them now (the
        # client re-subscribes, as after Pulsar's forced delete); other gateways find out
        # at their next lease renewal.
        await services.subscriptions.renew_leases()


async def create_partitioned(services: Services, request: web.Request) -> None:
    topic = topic_name(request, partitioned=True)
    count = await _partition_count(request)
    await services.topics.create_partitioned(topic, count)


async def update_partitioned(services: Services, request: web.Request) -> None:
    topic = topic_name(request, partitioned=True)
    count = await _partition_count(request)
    try:
        await services.topics.update_partitioned(topic, count, flag(request, "force"))
    except TopicNotFound as exc:
        # Pulsar answers 409 "Topic ... is not the partitioned topic." here.
        raise fail(web.HTTPConflict, str(exc)) from None


async def get_partitioned_metadata(services: Services, request: web.Request) -> dict[str, int]:
    topic = topic_name(request)
    count = await services.topics.client_partitions(topic)
    if (
        count == 0
        and not flag(request, "checkAllowAutoCreation")
        and not await services.topics.exists(topic)
    ):
        # Pulsar internalGetPartitionedMetadataAsync: a topic that exists neither as a
        # partitioned nor as a non-partitioned topic is 404, unless the caller says the
        # client would auto-create it (then partitions = 0, as the binary protocol answers).
        raise fail(web.HTTPNotFound, f"Topic {topic} not found")
    return {"partitions": count}


async def delete_partitioned(services: Services, request: web.Request) -> None:
    force = flag(request, "force")
    await services.topics.delete_partitioned(topic_name(request, partitioned=True), force)
    if force:
        await services.subscriptions.renew_leases()


def add_routes(app: web.Application) -> None:
    """Register the topic admin routes for both domains."""
    routes: tuple[tuple[str, str, Body], ...] = (
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
        app.router.add_route(method, path, handler(body))
