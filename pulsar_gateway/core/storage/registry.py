"""Typed commands of the tenant and namespace registry and of the namespaces' topic lists.

The keys (:class:`.keys.KeySchema`): the tenants hash (tenant -> TenantInfo JSON), one set
of namespaces per tenant, and per namespace the set of its topics and partitions and the
hash of its partitioned topics' counts. Each function queues one command and returns the
lane's future (:mod:`.commands`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pulsar_gateway.core.model.topic_name import TopicName
from pulsar_gateway.core.storage.commands import CommandLane
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.scripts import texts

__all__ = [
    "add_namespace",
    "add_tenant",
    "delete_namespace_list",
    "delete_topic_lists",
    "namespace_exists",
    "namespace_names",
    "partition_count",
    "partitioned_topic_names",
    "remove_namespace",
    "remove_tenant",
    "tenant_exists",
    "tenant_info",
    "tenant_names",
    "topic_listed",
    "topic_names",
    "unlist_topic",
]


def _tenant_of(namespace: str) -> str:
    # "tenant/ns", or a legacy "tenant/cluster/ns": the tenant comes first either way
    return namespace.split("/", 1)[0]


def _count(reply: Any) -> int:
    return int(reply) if reply is not None else 0


# -- tenants ---------------------------------------------------------------------------


def tenant_names(lane: CommandLane, keys: KeySchema) -> asyncio.Future[list[str]]:
    """The tenants' names, in no order (``HKEYS`` of the tenants hash)."""
    return lane.call("HKEYS", keys.tenants, decode=texts)


def tenant_exists(lane: CommandLane, keys: KeySchema, tenant: str) -> asyncio.Future[bool]:
    """Whether ``tenant`` is registered (``HEXISTS``)."""
    return lane.call("HEXISTS", keys.tenants, tenant, decode=bool)


def tenant_info(lane: CommandLane, keys: KeySchema, tenant: str) -> asyncio.Future[bytes | None]:
    """``tenant``'s stored TenantInfo JSON, None when it is not registered (``HGET``)."""
    return lane.call("HGET", keys.tenants, tenant)


def add_tenant(lane: CommandLane, keys: KeySchema, tenant: str, info: str) -> asyncio.Future[bool]:
    """Register ``tenant`` with TenantInfo JSON ``info`` unless it exists; resolves False
    when it did (``HSETNX``: the reply says who won a race)."""
    return lane.call("HSETNX", keys.tenants, tenant, info, decode=bool)


def remove_tenant(lane: CommandLane, keys: KeySchema, tenant: str) -> asyncio.Future[Any]:
    """Drop ``tenant`` from the tenants hash (``HDEL``)."""
    return lane.call("HDEL", keys.tenants, tenant)


# -- namespaces ------------------------------------------------------------------------


def namespace_names(lane: CommandLane, keys: KeySchema, tenant: str) -> asyncio.Future[list[str]]:
    """The names of ``tenant``'s namespaces, in no order (``SMEMBERS``)."""
    return lane.call("SMEMBERS", keys.tenant_namespaces(tenant), decode=texts)


def namespace_exists(lane: CommandLane, keys: KeySchema, namespace: str) -> asyncio.Future[bool]:
    """Whether ``namespace`` is in its tenant's set (``SISMEMBER``)."""
    return lane.call(
        "SISMEMBER", keys.tenant_namespaces(_tenant_of(namespace)), namespace, decode=bool
    )


def add_namespace(lane: CommandLane, keys: KeySchema, namespace: str) -> asyncio.Future[bool]:
    """Put ``namespace`` in its tenant's set; resolves False when it was there (``SADD``)."""
    return lane.call("SADD", keys.tenant_namespaces(_tenant_of(namespace)), namespace, decode=bool)


def remove_namespace(lane: CommandLane, keys: KeySchema, namespace: str) -> asyncio.Future[Any]:
    """Take ``namespace`` out of its tenant's set (``SREM``)."""
    return lane.call("SREM", keys.tenant_namespaces(_tenant_of(namespace)), namespace)


def delete_namespace_list(lane: CommandLane, keys: KeySchema, tenant: str) -> asyncio.Future[Any]:
    """Delete ``tenant``'s set of namespaces (``DEL``)."""
    return lane.call("DEL", keys.tenant_namespaces(tenant))


# -- topics of a namespace -------------------------------------------------------------


def topic_names(lane: CommandLane, keys: KeySchema, namespace: str) -> asyncio.Future[list[str]]:
    """The full names of ``namespace``'s topics and partitions, in no order
    (``SMEMBERS``)."""
    return lane.call("SMEMBERS", keys.namespace_topics(namespace), decode=texts)


def topic_listed(lane: CommandLane, keys: KeySchema, topic: TopicName) -> asyncio.Future[bool]:
    """Whether ``topic`` (a non-partitioned topic or a partition) is in its namespace's
    topic set (``SISMEMBER``)."""
    return lane.call("SISMEMBER", keys.namespace_topics(topic.namespace), str(topic), decode=bool)


def unlist_topic(lane: CommandLane, keys: KeySchema, topic: TopicName) -> asyncio.Future[Any]:
    """Take ``topic`` out of its namespace's topic set (``SREM``)."""
    return lane.call("SREM", keys.namespace_topics(topic.namespace), str(topic))


def partition_count(lane: CommandLane, keys: KeySchema, topic: TopicName) -> asyncio.Future[int]:
    """``topic``'s partition count, 0 when it is not a partitioned topic (``HGET``)."""
    return lane.call("HGET", keys.namespace_partitioned(topic.namespace), str(topic), decode=_count)


def partitioned_topic_names(
    lane: CommandLane, keys: KeySchema, namespace: str
) -> asyncio.Future[list[str]]:
    """The full names of ``namespace``'s partitioned topics, in no order (``HKEYS``)."""
    return lane.call("HKEYS", keys.namespace_partitioned(namespace), decode=texts)


def delete_topic_lists(lane: CommandLane, keys: KeySchema, namespace: str) -> asyncio.Future[Any]:
    """Delete ``namespace``'s topic set and partition counts: one ``DEL`` of two keys, which
    share the namespace's hash tag (one cluster slot)."""
    return lane.call("DEL", keys.namespace_topics(namespace), keys.namespace_partitioned(namespace))
