"""Tenants and namespaces: Pulsar's ``TenantInfo`` registry and the namespaces of each tenant.

Strategy: a tenant is a field of one hash (``P:tenants``: tenant -> TenantInfo JSON) and a namespace
a member of its tenant's set (``P:tenant-namespaces:<tenant>``); a namespace's policies live in the
policies hash :mod:`pulsar_gateway.core.policies.policies` keeps, its topics in the sets
:mod:`pulsar_gateway.core.topics.partitioned_topics` keeps. There is no metadata store to ask:
whichever gateway is asked reads Redis, so every gateway sees the same tenants.

A namespace exists when it is in its tenant's set, and only the admin API puts it there
(``PUT /admin/v2/namespaces/{tenant}/{ns}``, or the v1 path for a legacy
``tenant/cluster/ns``): as in Pulsar, a client naming a topic in a namespace that does not
exist is refused with TopicNotFound (``PulsarWebResource.checkLocalOrGetPeerReplicationCluster``
answers 404 "Namespace not found", which ``ServerCnx`` sends as TopicNotFound), and topics
are auto-created only inside existing namespaces (``allowAutoTopicCreation``). Nothing
caches the answer: every attach (producer, subscription, lookup, partition metadata) asks
Redis with one ``SISMEMBER``, so a namespace the admin API creates on one gateway is usable
on every gateway at once, and one it deletes is refused at once.

The fleet is one Pulsar cluster, named by ``--cluster-name``. Its standalone defaults
(Pulsar's ``PulsarStandalone``: tenant ``public`` with ``public/default``, tenant
``pulsar`` with ``pulsar/system``) are created idempotently when a gateway starts, so a
fresh Redis shows them and ``public/default`` is usable at once, as in a fresh standalone.

Atomicity: the key names put the tenants hash and each tenant's set in different Redis
Cluster slots, so no script can span them. Each step here is atomic on its own key (a
create is an ``HSETNX``/``SADD`` whose reply says who won; an update is
``tenant_update.lua``); the "is it empty?" checks before a delete are not atomic with the
delete, which is also true of Pulsar (``TenantsBase.internalDeleteTenantAsync`` checks
``hasActiveNamespace`` and then deletes, without a lock).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pulsar_gateway.core.errors import (
    AlreadyExists,
    InvalidNamespaceName,
    InvalidTenantInfo,
    NamespaceNotFound,
    TenantNotFound,
    TopicNotFound,
)
from pulsar_gateway.core.storage import policy_store, registry
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import metadata

__all__ = [
    "DEFAULT_NAMESPACES",
    "TenantInfo",
    "Tenants",
    "check_namespace_name",
    "check_tenant_name",
]

#: Namespaces Pulsar standalone creates at start (``PulsarStandalone.start``), each in a
#: tenant of its own name's first part.
DEFAULT_NAMESPACES = ("public/default", "pulsar/system")

# Pulsar's NamedEntity pattern ``^[-=:.\w]*$``, ASCII \w as in Java, and not empty (an
# empty path segment cannot name a tenant or a namespace in a v2 path).
_NAMED_ENTITY = re.compile(r"[-=:.\w]+", re.ASCII)


def check_tenant_name(tenant: str) -> None:
    """Raise :class:`InvalidNamespaceName` unless ``tenant`` is a valid Pulsar name
    (``NamedEntity.checkName``; Pulsar answers 412 "Tenant name is not valid")."""
    if not _NAMED_ENTITY.fullmatch(tenant):
        raise InvalidNamespaceName("Tenant name is not valid")


def check_namespace_name(namespace: str, cluster: str | None = None) -> None:
    """Raise :class:`InvalidNamespaceName` unless ``namespace`` is ``tenant/ns`` with both
    parts valid (``PulsarWebResource.validateNamespaceName``: 412 "Namespace name is not
    valid"); with ``cluster``, a legacy (v1) ``tenant/cluster/ns`` naming that cluster is
    valid too (Pulsar's v1 ``validateClusterExists``: 412 for another cluster)."""
    parts = namespace.split("/")
    if len(parts) not in (2, 3) or not all(_NAMED_ENTITY.fullmatch(p) for p in parts):
        raise InvalidNamespaceName("Namespace name is not valid")
    if len(parts) == 3:
        if cluster is None:
            raise InvalidNamespaceName("Namespace name is not valid")
        if parts[1] != cluster:
            raise InvalidNamespaceName(f"Cluster {parts[1]} does not exist.")


@dataclass(frozen=True, slots=True)
class TenantInfo:
    """Pulsar's ``TenantInfoImpl``: who administers a tenant and where it may live."""

    admin_roles: tuple[str, ...] = ()
    allowed_clusters: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, value: Any, known_clusters: Iterable[str]) -> TenantInfo:
        """Validate a TenantInfo body as ``TenantsBase`` does.

        Raises:
            ValueError: malformed (not an object, a field of the wrong type): Jackson's
                400 in Pulsar.
            InvalidTenantInfo: ``null`` body, ``allowedClusters`` missing, empty, blank
                or naming an unknown cluster, or an admin role with surrounding
                whitespace: Pulsar's 412.
        """
        if value is None:
            raise InvalidTenantInfo("TenantInfo is null")
        if not isinstance(value, dict):
            raise ValueError('expected {"adminRoles": [...], "allowedClusters": [...]}')
        roles = _string_set(value.get("adminRoles"), "adminRoles")
        clusters = value.get("allowedClusters")
        if clusters is None:
            raise InvalidTenantInfo("Clusters cannot be null")
        cluster_set = _string_set(clusters, "allowedClusters")
        if not cluster_set or any(not c.strip() for c in cluster_set):
            raise InvalidTenantInfo("Clusters cannot be empty or blank")
        if not cluster_set <= set(known_clusters):
            raise InvalidTenantInfo("Clusters do not exist")
        if any(role.strip() != role for role in roles):
            raise InvalidTenantInfo("AdminRoles contains whitespace in the beginning or end.")
        return cls(tuple(sorted(roles)), tuple(sorted(cluster_set)))

    def to_json(self) -> dict[str, list[str]]:
        return {
            "adminRoles": list(self.admin_roles),
            "allowedClusters": list(self.allowed_clusters),
        }


def _string_set(value: Any, field: str) -> set[str]:
    # Jackson reads a JSON array (or null) into the Set<String>; anything else is a 400.
    if value is None:
        return set()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{field} must be a list of strings")
    return set(value)


class Tenants:
    """The fleet's tenants and namespaces, kept in Redis.

    Deleting a tenant or namespace with its topics is :class:`~pulsar_gateway.core.admin.
    namespace_admin.NamespaceAdmin`'s work; this class only keeps the registry.
    """

    def __init__(self, lane: Lane, keys: KeySchema, cluster_name: str) -> None:
        self._lane = lane
        self._keys = keys
        #: the one cluster this fleet forms (``--cluster-name``)
        self.cluster_name = cluster_name
        #: the TenantInfo of a tenant created by a topic registration or at start-up
        self._default_info = json.dumps(TenantInfo((), (cluster_name,)).to_json())

    async def start(self) -> None:
        """Create the standalone defaults if missing (idempotent)."""
        await asyncio.gather(*(self._ensure_namespace(ns) for ns in DEFAULT_NAMESPACES))

    async def _ensure_namespace(self, namespace: str) -> None:
        tenant = namespace.split("/", 1)[0]
        await asyncio.gather(
            registry.add_namespace(self._lane, self._keys, namespace),
            registry.add_tenant(self._lane, self._keys, tenant, self._default_info),
        )

    # -- tenants -----------------------------------------------------------------------

    async def tenants(self) -> list[str]:
        """Sorted tenant names (Pulsar sorts ``getTenants``)."""
        return sorted(await registry.tenant_names(self._lane, self._keys))

    async def tenant_exists(self, tenant: str) -> bool:
        return await registry.tenant_exists(self._lane, self._keys, tenant)

    async def get_tenant(self, tenant: str) -> TenantInfo:
        """Raises: TenantNotFound."""
        raw = await registry.tenant_info(self._lane, self._keys, tenant)
        if raw is None:
            raise TenantNotFound("Tenant does not exist")
        value = json.loads(raw)
        return TenantInfo(
            tuple(value.get("adminRoles") or ()), tuple(value.get("allowedClusters") or ())
        )

    async def create_tenant(self, tenant: str, info: TenantInfo) -> None:
        """Raises: InvalidNamespaceName, AlreadyExists."""
        check_tenant_name(tenant)
        created = await registry.add_tenant(
            self._lane, self._keys, tenant, json.dumps(info.to_json())
        )
        if not created:
            # Pulsar's text, typo included (TenantsBase.createTenant).
            raise AlreadyExists("Tenant already exist")

    async def update_tenant(self, tenant: str, info: TenantInfo) -> None:
        """Raises: TenantNotFound."""
        updated = await metadata.tenant_update(
            self._lane, self._keys.tenants, tenant=tenant, info=json.dumps(info.to_json())
        )
        if not updated:
            raise TenantNotFound(f"Tenant {tenant} not found")

    async def forget_tenant(self, tenant: str) -> None:
        """Remove the tenant and its namespace list (its namespaces are gone already)."""
        await asyncio.gather(
            registry.remove_tenant(self._lane, self._keys, tenant),
            registry.delete_namespace_list(self._lane, self._keys, tenant),
        )

    # -- namespaces --------------------------------------------------------------------

    async def members(self, tenant: str) -> list[str]:
        """Sorted names of the namespaces recorded in ``tenant`` (no checks)."""
        return sorted(await registry.namespace_names(self._lane, self._keys, tenant))

    async def namespaces(self, tenant: str) -> list[str]:
        """Sorted ``tenant/ns`` names of a tenant's namespaces.

        Raises:
            InvalidNamespaceName: bad tenant name (412 in ``internalGetTenantNamespaces``).
            TenantNotFound: no such tenant.
        """
        check_tenant_name(tenant)
        exists, members = await asyncio.gather(self.tenant_exists(tenant), self.members(tenant))
        if not exists:
            raise TenantNotFound("Tenant not found")
        return members

    async def namespace_exists(self, namespace: str) -> bool:
        return await registry.namespace_exists(self._lane, self._keys, namespace)

    async def require_namespace(self, namespace: str) -> None:
        """Raises: InvalidNamespaceName, NamespaceNotFound."""
        check_namespace_name(namespace, self.cluster_name)
        if not await self.namespace_exists(namespace):
            raise NamespaceNotFound(f"Namespace {namespace} does not exist.")

    async def require_topic_namespace(self, namespace: str) -> None:
        """Refuse a topic a client or an admin names in a namespace that does not exist.

        Raises:
            TopicNotFound: "Namespace not found" (Pulsar's 404 from
                ``checkLocalOrGetPeerReplicationCluster``; TopicNotFound on the binary
                protocol, 404 over HTTP).
        """
        if not await self.namespace_exists(namespace):
            raise TopicNotFound(f"Namespace {namespace} not found")

    async def create_namespace(self, namespace: str) -> None:
        """Create an empty namespace (its policies are the caller's, written after).

        Raises:
            InvalidNamespaceName: bad name.
            TenantNotFound: the tenant does not exist.
            AlreadyExists: the namespace exists.
        """
        check_namespace_name(namespace, self.cluster_name)
        tenant = namespace.split("/", 1)[0]
        if not await self.tenant_exists(tenant):
            raise TenantNotFound("Tenant does not exist")
        if await self.namespace_exists(namespace):
            raise AlreadyExists("Namespace already exists")
        added = await registry.add_namespace(self._lane, self._keys, namespace)
        if not added:  # another admin won the race
            raise AlreadyExists("Namespace already exists")

    async def forget_namespace(self, namespace: str) -> None:
        """Remove a namespace whose topics are gone: its topic lists, policies,
        permissions and its place in its tenant (also for a legacy ``tenant/cluster/ns``)."""
        lane, keys = self._lane, self._keys
        await asyncio.gather(
            registry.delete_topic_lists(lane, keys, namespace),
            policy_store.delete_hash(lane, keys.namespace_policies(namespace)),
            policy_store.delete_hash(lane, keys.namespace_permissions(namespace)),
            policy_store.delete_hash(lane, keys.topic_permissions(namespace)),
            policy_store.delete_hash(lane, keys.subscription_permissions(namespace)),
            registry.remove_namespace(lane, keys, namespace),
        )
        # Every gateway drops its cached policies of the namespace.
        self._lane.notify(keys.policies_channel)
