"""Admin REST v2: clusters, tenants and namespaces, with Pulsar's paths, JSON and statuses.

Paths (``admin/v2/Clusters.java``, ``Tenants.java``, ``Namespaces.java``)::

    GET    /admin/v2/clusters                          getClusters
    GET    /admin/v2/clusters/{cluster}                getCluster (ClusterData)
    PUT    /admin/v2/clusters/{cluster}                createCluster   (refused, see below)
    POST   /admin/v2/clusters/{cluster}                updateCluster   (refused)
    DELETE /admin/v2/clusters/{cluster}                deleteCluster   (refused)
    GET    /admin/v2/tenants                           getTenants
    GET    /admin/v2/tenants/{tenant}                  getTenantAdmin (TenantInfo)
    PUT    /admin/v2/tenants/{tenant}                  createTenant
    POST   /admin/v2/tenants/{tenant}                  updateTenant
    DELETE /admin/v2/tenants/{tenant}?force=           deleteTenant
    GET    /admin/v2/namespaces/{tenant}               getTenantNamespaces
    GET    /admin/v2/namespaces/{tenant}/{ns}          getPolicies (Policies)
    PUT    /admin/v2/namespaces/{tenant}/{ns}          createNamespace (optional Policies body)
    DELETE /admin/v2/namespaces/{tenant}/{ns}?force=   deleteNamespace

Statuses follow ``ClustersBase``, ``TenantsBase`` and ``NamespacesBase``: 204 for a change;
404 for what is
missing; 409 "Tenant already exist", "Namespace already exists", "The tenant still has
active namespaces", "Cannot delete non empty namespace"; 412 for an invalid name or a
TenantInfo Pulsar refuses; 400 for a body that is not the JSON expected.

Departures, on purpose: a forced delete (``?force=true``) of a tenant or namespace is
allowed, as if the broker ran with ``forceDeleteTenantAllowed`` and
``forceDeleteNamespaceAllowed`` (their default is false, which answers 405); and the
fleet is exactly one cluster, whose URLs come from the gateways' configuration.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from adapters.http.policies import POLICIES, PolicySpec
from adapters.http.topics import _fail, _flag
from adapters.http.topics import _handler as _topics_handler
from gateway.backlog_quota import BACKLOG_QUOTA_POLICY, QUOTA_TYPES, parse_backlog_quota
from gateway.broker import Broker
from gateway.errors import (
    AlreadyExists,
    ConcurrentModification,
    GatewayError,
    InvalidNamespaceName,
    InvalidTenantInfo,
    NamespaceNotFound,
    NotEmpty,
    TenantNotFound,
)
from gateway.tenants import TenantInfo, check_namespace_name, check_tenant_name

__all__ = ["add_routes", "handler", "policies_document", "read_json"]

Body = Callable[[Broker, web.Request], Awaitable[Any]]

#: Domain errors of this surface -> HTTP status (the rest go to topics.py's table).
_STATUS: tuple[tuple[type[GatewayError], type[web.HTTPException]], ...] = (
    (TenantNotFound, web.HTTPNotFound),
    (NamespaceNotFound, web.HTTPNotFound),
    (InvalidNamespaceName, web.HTTPPreconditionFailed),
    (InvalidTenantInfo, web.HTTPPreconditionFailed),
    (AlreadyExists, web.HTTPConflict),
    (NotEmpty, web.HTTPConflict),
    (ConcurrentModification, web.HTTPConflict),
)

#: One bundle covering the whole hash range: a gateway fleet does not split namespaces
#: into bundles (every gateway serves every topic), so there is nothing to split.
FULL_BUNDLE = "0x00000000_0xffffffff"


def handler(broker_key: web.AppKey[Broker], body: Body) -> Any:
    """topics.py's handler (None -> 204, JSON otherwise, its error table) with this
    surface's errors mapped first."""

    async def mapped(broker: Broker, request: web.Request) -> Any:
        try:
            return await body(broker, request)
        except GatewayError as exc:
            for cls, status in _STATUS:
                if isinstance(exc, cls):
                    raise _fail(status, str(exc)) from None
            raise

    return _topics_handler(broker_key, mapped)


async def read_json(request: web.Request) -> Any:
    """The request body as JSON; None when empty; 400 when malformed (Jackson's answer)."""
    raw = await request.text()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise _fail(web.HTTPBadRequest, f"Invalid JSON: {exc}") from None


# -- clusters ---------------------------------------------------------------------------------
#
# The fleet is one Pulsar cluster: its name is --cluster-name and its URLs are the gateways'
# advertised address and ports, so no admin call can create, change or delete a cluster. A
# create of the fleet's own cluster is what Pulsar answers for any existing cluster (409
# "Cluster already exists"); a change of cluster metadata the broker refuses is Pulsar's
# 403 (AdminResource.validatePoliciesReadOnlyAccess, "policies are read-only"); a delete of
# the own cluster while tenants use it is Pulsar's 412 "Cluster not empty"; and any other
# cluster does not exist (404), except for a create, which would add a second cluster.


def _cluster_data(broker: Broker) -> dict[str, Any]:
    """ClusterData as Pulsar serializes it (null fields left out, Jackson NON_NULL)."""
    tenants = broker.tenants
    return {
        "serviceUrl": tenants.service_url,
        "brokerServiceUrl": tenants.broker_service_url,
        "brokerClientTlsEnabled": False,
        "tlsAllowInsecureConnection": False,
        "brokerClientTlsEnabledWithKeyStore": False,
        "brokerClientTlsTrustStoreType": "JKS",
        "brokerClientTlsKeyStoreType": "JKS",
    }


def _read_only(broker: Broker) -> web.HTTPException:
    return _fail(
        web.HTTPForbidden,
        f"Cluster metadata is read-only: this gateway fleet is the single cluster "
        f"{broker.tenants.cluster_name!r}, configured by --cluster-name",
    )


def _not_found() -> web.HTTPException:
    return _fail(web.HTTPNotFound, "Cluster does not exist")


async def get_clusters(broker: Broker, request: web.Request) -> list[str]:
    return [broker.tenants.cluster_name]


async def get_cluster(broker: Broker, request: web.Request) -> dict[str, Any]:
    if request.match_info["cluster"] != broker.tenants.cluster_name:
        raise _not_found()
    return _cluster_data(broker)


async def create_cluster(broker: Broker, request: web.Request) -> None:
    cluster = request.match_info["cluster"]
    try:
        # ClustersBase.createCluster: NamedEntity.checkName, else 412.
        check_namespace_name(f"{cluster}/x")
    except InvalidNamespaceName:
        raise _fail(web.HTTPPreconditionFailed, "Cluster name is not valid") from None
    if cluster == broker.tenants.cluster_name:
        raise _fail(web.HTTPConflict, "Cluster already exists")
    raise _read_only(broker)


async def update_cluster(broker: Broker, request: web.Request) -> None:
    if request.match_info["cluster"] != broker.tenants.cluster_name:
        raise _not_found()
    raise _read_only(broker)


async def delete_cluster(broker: Broker, request: web.Request) -> None:
    if request.match_info["cluster"] != broker.tenants.cluster_name:
        raise _not_found()
    if await broker.tenants.tenants():
        # ClustersBase.internalDeleteClusterAsync: a cluster a tenant may use is not empty.
        raise _fail(web.HTTPPreconditionFailed, "Cluster not empty")
    raise _read_only(broker)


# -- tenants ----------------------------------------------------------------------------------


async def _tenant_info(broker: Broker, request: web.Request) -> TenantInfo:
    value = await read_json(request)
    try:
        return TenantInfo.from_json(value, [broker.tenants.cluster_name])
    except ValueError as exc:
        raise _fail(web.HTTPBadRequest, f"Invalid TenantInfo: {exc}") from None


async def get_tenants(broker: Broker, request: web.Request) -> list[str]:
    return await broker.tenants.tenants()


async def get_tenant(broker: Broker, request: web.Request) -> dict[str, list[str]]:
    info = await broker.tenants.get_tenant(request.match_info["tenant"])
    return info.to_json()


async def create_tenant(broker: Broker, request: web.Request) -> None:
    tenant = request.match_info["tenant"]
    check_tenant_name(tenant)  # TenantsBase.createTenant checks the name before the body
    await broker.tenants.create_tenant(tenant, await _tenant_info(broker, request))


async def update_tenant(broker: Broker, request: web.Request) -> None:
    info = await _tenant_info(broker, request)
    await broker.tenants.update_tenant(request.match_info["tenant"], info)


async def delete_tenant(broker: Broker, request: web.Request) -> None:
    force = _flag(request, "force")
    await broker.tenants.delete_tenant(request.match_info["tenant"], force)
    if force:
        # Consumers here of the deleted topics lose their leases: close them now (as
        # topics.py does after a forced topic delete).
        await broker.renew_leases()


# -- namespaces -------------------------------------------------------------------------------

#: Pulsar ``Policies`` field -> our policy name, for the policies we keep.
_POLICY_FIELDS: dict[str, str] = {
    "deduplicationEnabled": "deduplication",
    "message_ttl_in_seconds": "messageTTL",
    "retention_policies": "retention",
    "compaction_threshold": "compactionThreshold",
    "delayed_delivery_policies": "delayedDelivery",
    "backlog_quota_map": BACKLOG_QUOTA_POLICY,
}
_SPECS: dict[str, PolicySpec] = {spec.name: spec for spec in POLICIES}


def _backlog_quota_map(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("expected an object of quota type -> BacklogQuota")
    out = {}
    for quota_type, quota in value.items():
        if quota_type not in QUOTA_TYPES:
            raise ValueError(f"unknown backlog quota type {quota_type!r}")
        out[quota_type] = parse_backlog_quota(quota)
    return out


def parse_policies(value: Any) -> dict[str, Any]:
    """The policies a ``Policies`` body sets, as {our policy name: validated value}.

    Fields we do not keep are ignored, as Pulsar's mapper ignores unknown properties;
    null fields are unset.

    Raises:
        ValueError: the body is not an object, or a field's value is invalid.
    """
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("expected a Policies object")
    out: dict[str, Any] = {}
    for field, name in _POLICY_FIELDS.items():
        item = value.get(field)
        if item is None:
            continue
        try:
            if name == BACKLOG_QUOTA_POLICY:
                out[name] = _backlog_quota_map(item) or None
            else:
                out[name] = _SPECS[name].validate(item)
        except ValueError as exc:
            raise ValueError(f"{field}: {exc}") from None
    return {k: v for k, v in out.items() if v is not None}


def policies_document(
    stored: dict[str, Any], cluster: str, permissions: dict[str, list[str]]
) -> dict[str, Any]:
    """Pulsar's ``Policies`` JSON for a namespace, from its stored policies.

    Field names and defaults are ``Policies.java``'s, with null fields left out as Pulsar's
    mapper does (NON_NULL). Policies we do not implement keep Pulsar's defaults.
    """
    doc: dict[str, Any] = {
        "auth_policies": {
            "namespace_auth": permissions,
            "destination_auth": {},
            "subscription_auth_roles": {},
        },
        "replication_clusters": [cluster],
        "allowed_clusters": [],
        "bundles": {"boundaries": FULL_BUNDLE.split("_"), "numBundles": 1},
        "backlog_quota_map": stored.get(BACKLOG_QUOTA_POLICY) or {},
        "clusterDispatchRate": {},
        "topicDispatchRate": {},
        "subscriptionDispatchRate": {},
        "replicatorDispatchRate": {},
        "clusterSubscribeRate": {},
        "publishMaxMessageRate": {},
        "latency_stats_sample_rate": {},
        "deleted": False,
        "encryption_required": False,
        "subscription_auth_mode": "None",
        "offload_threshold": -1,
        "offload_threshold_in_seconds": -1,
        "schema_compatibility_strategy": "UNDEFINED",
        "schema_validation_enforced": False,
        "subscription_types_enabled": [],
        "allowed_topic_properties_for_metrics": [],
        "properties": {},
        "migrated": False,
    }
    for field, name in _POLICY_FIELDS.items():
        if name != BACKLOG_QUOTA_POLICY and stored.get(name) is not None:
            doc[field] = stored[name]
    return doc


def _namespace(request: web.Request) -> str:
    namespace = f"{request.match_info['tenant']}/{request.match_info['namespace']}"
    check_namespace_name(namespace)
    return namespace


async def get_namespaces(broker: Broker, request: web.Request) -> list[str]:
    return await broker.tenants.namespaces(request.match_info["tenant"])


async def _permissions(broker: Broker, namespace: str) -> dict[str, list[str]]:
    raw = await broker.storage.call("HGETALL", broker.schema.namespace_permissions(namespace))
    out: dict[str, list[str]] = {}
    for i in range(0, len(raw), 2):
        try:
            actions = json.loads(raw[i + 1])
        except ValueError:
            continue
        out[raw[i].decode()] = actions if isinstance(actions, list) else []
    return out


async def get_policies(broker: Broker, request: web.Request) -> dict[str, Any]:
    namespace = _namespace(request)
    await broker.tenants.require_namespace(namespace)
    stored = await broker.policies.namespace_policies(namespace)
    permissions = await _permissions(broker, namespace)
    return policies_document(stored, broker.tenants.cluster_name, permissions)


async def create_namespace(broker: Broker, request: web.Request) -> None:
    namespace = _namespace(request)
    try:
        initial = parse_policies(await read_json(request))
    except ValueError as exc:
        # A value Pulsar's validators refuse is 412 (policies.py does the same).
        raise _fail(web.HTTPPreconditionFailed, f"Invalid policies: {exc}") from None
    await broker.tenants.create_namespace(namespace)
    for name, value in initial.items():
        await broker.policies.set_namespace(namespace, name, value)


async def delete_namespace(broker: Broker, request: web.Request) -> None:
    force = _flag(request, "force")
    await broker.tenants.delete_namespace(_namespace(request), force)
    if force:
        await broker.renew_leases()


def add_routes(app: web.Application, broker_key: web.AppKey[Broker]) -> None:
    """Register the cluster, tenant and namespace routes."""
    routes: tuple[tuple[str, str, Body], ...] = (
        ("GET", "/admin/v2/clusters", get_clusters),
        ("GET", "/admin/v2/clusters/{cluster}", get_cluster),
        ("PUT", "/admin/v2/clusters/{cluster}", create_cluster),
        ("POST", "/admin/v2/clusters/{cluster}", update_cluster),
        ("DELETE", "/admin/v2/clusters/{cluster}", delete_cluster),
        ("GET", "/admin/v2/tenants", get_tenants),
        ("GET", "/admin/v2/tenants/{tenant}", get_tenant),
        ("PUT", "/admin/v2/tenants/{tenant}", create_tenant),
        ("POST", "/admin/v2/tenants/{tenant}", update_tenant),
        ("DELETE", "/admin/v2/tenants/{tenant}", delete_tenant),
        ("GET", "/admin/v2/namespaces/{tenant}", get_namespaces),
        ("GET", "/admin/v2/namespaces/{tenant}/{namespace}", get_policies),
        ("PUT", "/admin/v2/namespaces/{tenant}/{namespace}", create_namespace),
        ("DELETE", "/admin/v2/namespaces/{tenant}/{namespace}", delete_namespace),
    )
    for method, path, body in routes:
        app.router.add_route(method, path, handler(broker_key, body))
