"""Deleting tenants and namespaces with what they hold (Pulsar ``TenantsBase.deleteTenant``,
``NamespacesBase.internalDeleteNamespaceAsync``): the one admin operation that spans the
tenant registry and the topics.

Without ``force`` a tenant with namespaces or a namespace with topics is refused (409); with
it, the topics are deleted first (partitioned topics with their partitions), then the
namespaces, then the tenant. The "is it empty?" check is not atomic with the delete, as in
Pulsar, which checks and then deletes without a lock.
"""

from __future__ import annotations

import contextlib

from pulsar_gateway.core.errors import InvalidTopicName, NotEmpty, TenantNotFound, TopicNotFound
from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.topics.partitioned_topics import PartitionedTopics
from pulsar_gateway.core.topics.tenants import Tenants

__all__ = ["NamespaceAdmin"]


class NamespaceAdmin:
    """Deletes tenants and namespaces, and with ``force`` what is in them."""

    def __init__(self, tenants: Tenants, topics: PartitionedTopics) -> None:
        self._tenants = tenants
        self._topics = topics

    async def delete_tenant(self, tenant: str, force: bool) -> None:
        """Delete a tenant; with ``force`` its namespaces (and their topics) first.

        Raises:
            TenantNotFound: no such tenant.
            NotEmpty: it has namespaces and ``force`` is False.
            TopicBusy: a topic could not be deleted (only without force).
        """
        if not await self._tenants.tenant_exists(tenant):
            raise TenantNotFound("Tenant doesn't exist")
        namespaces = await self._tenants.members(tenant)
        if namespaces and not force:
            raise NotEmpty("The tenant still has active namespaces")
        for namespace in namespaces:
            await self._remove_namespace(namespace, force=True)
        await self._tenants.forget_tenant(tenant)

    async def delete_namespace(self, namespace: str, force: bool) -> None:
        """Delete a namespace: with ``force``, its topics first, then its policies,
        permissions and lists.

        Raises:
            InvalidNamespaceName: bad name.
            NamespaceNotFound: no such namespace.
            NotEmpty: it has topics and ``force`` is False.
        """
        await self._tenants.require_namespace(namespace)
        await self._remove_namespace(namespace, force)

    async def _remove_namespace(self, namespace: str, force: bool) -> None:
        topics = await self._topics.topics(namespace)
        partitioned = await self._topics.partitioned_topics(namespace)
        if (topics or partitioned) and not force:
            raise NotEmpty("Cannot delete non empty namespace")
        await self._delete_topics(topics, partitioned)
        await self._tenants.forget_namespace(namespace)

    async def _delete_topics(self, topics: list[str], partitioned: list[str]) -> None:
        """Delete partitioned topics (with their partitions), then the other topics."""
        covered: set[str] = set()
        for name in partitioned:
            topic = parse_topic_name(name)
            count = await self._topics.partitions(topic)
            covered.update(str(topic.partition(i)) for i in range(count))
            with contextlib.suppress(TopicNotFound):
                await self._topics.delete_partitioned(topic, force=True)
        for name in topics:
            if name in covered:
                continue
            try:
                topic = parse_topic_name(name)
            except InvalidTopicName:
                continue  # not a name we would have written; the set is dropped after
            with contextlib.suppress(TopicNotFound):
                await self._topics.delete(topic, force=True)
