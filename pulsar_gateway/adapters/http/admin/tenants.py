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
    PUT    /admin/namespaces/{tenant}/{cluster}/{ns}          createNamespace (v1)
    DELETE /admin/namespaces/{tenant}/{cluster}/{ns}?force=   deleteNamespace (v1)

The v1 paths (``admin/v1/Namespaces.java``) exist for legacy topic names
(``persistent://tenant/cluster/ns/topic``), whose namespace ``tenant/cluster/ns`` must exist
like any other; the cluster must be this fleet's (412 "Cluster X does not exist." otherwise).

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

from typing import Any

from aiohttp import web

from pulsar_gateway.adapters.http.admin.policies import POLICIES, PolicySpec
from pulsar_gateway.adapters.resource import Body, fail, flag, handler, read_json
from pulsar_gateway.core import (
    BACKLOG_QUOTA_POLICY,
    QUOTA_TYPES,
    InvalidNamespaceName,
    Services,
    TenantInfo,
    check_namespace_name,
    check_tenant_name,
    parse_backlog_quota,
)

__all__ = ["FULL_BUNDLE", "add_routes", "policies_document"]

#: One bundle covering the whole hash range: a gateway fleet does not split namespaces
#: into bundles (every gateway serves every topic), so there is nothing to split.
FULL_BUNDLE = "0x00000000_0xffffffff"


# -- clusters ---------------------------------------------------------------------------------
#
# The fleet is one Pulsar cluster: its name is --cluster-name and its URLs are the gateways'
# advertised address and ports, so no admin call can create, change or delete a cluster. A
# create of the fleet's own cluster is what Pulsar answers for any existing cluster (409
# "Cluster already exists"); a change of cluster metadata the broker refuses is Pulsar's
# 403 (AdminResource.validatePoliciesReadOnlyAccess, "policies are read-only"); a delete of
# the own cluster while tenants use it is Pulsar's 412 "Cluster not empty"; and any other
# cluster does not exist (404), except for a create, which would add a second cluster.


def _cluster_data(services: Services) -> dict[str, Any]:
    """ClusterData as Pulsar serializes it (null fields left out, Jackson NON_NULL)."""
    cluster = services.cluster
    data: dict[str, Any] = {
        "serviceUrl": cluster.service_url,
        "brokerServiceUrl": cluster.broker_service_url,
    }
    if cluster.service_url_tls is not None:
        data["serviceUrlTls"] = cluster.service_url_tls
    if cluster.broker_service_url_tls is not None:
        data["brokerServiceUrlTls"] = cluster.broker_service_url_tls
    return data | {
        "brokerClientTlsEnabled": False,
        "tlsAllowInsecureConnection": False,
        "brokerClientTlsEnabledWithKeyStore": False,
        "brokerClientTlsTrustStoreType": "JKS",
        "brokerClientTlsKeyStoreType": "JKS",
    }


def _read_only(services: Services) -> web.HTTPException:
    return fail(
        web.HTTPForbidden,
        f"Cluster metadata is read-only: this gateway fleet is the single cluster "
        f"{services.cluster.name!r}, configured by --cluster-name",
    )


def _not_found() -> web.HTTPException:
    return fail(web.HTTPNotFound, "Cluster does not exist")


async def get_clusters(services: Services, request: web.Request) -> list[str]:
    return [services.cluster.name]


async def get_cluster(services: Services, request: web.Request) -> dict[str, Any]:
    if request.match_info["cluster"] != services.cluster.name:
        raise _not_found()
    return _cluster_data(services)


async def create_cluster(services: Services, request: web.Request) -> None:
    cluster = request.match_info["cluster"]
    try:
        # ClustersBase.createCluster: NamedEntity.checkName, else 412.
        check_namespace_name(f"{cluster}/x")
    except InvalidNamespaceName:
        raise fail(web.HTTPPreconditionFailed, "Cluster name is not valid") from None
    if cluster == services.cluster.name:
        raise fail(web.HTTPConflict, "Cluster already exists")
    raise _read_only(services)


async def update_cluster(services: Services, request: web.Request) -> None:
    if request.match_info["cluster"] != services.cluster.name:
        raise _not_found()
    raise _read_only(services)


async def delete_cluster(services: Services, request: web.Request) -> None:
    if request.match_info["cluster"] != services.cluster.name:
        raise _not_found()
    if await services.tenants.tenants():
        # ClustersBase.internalDeleteClusterAsync: a cluster a tenant may use is not empty.
        raise fail(web.HTTPPreconditionFailed, "Cluster not empty")
    raise _read_only(services)


# -- tenants ----------------------------------------------------------------------------------


async def _tenant_info(services: Services, request: web.Request) -> TenantInfo:
    value = await read_json(request)
    try:
        return TenantInfo.from_json(value, [services.cluster.name])
    except ValueError as exc:
        raise fail(web.HTTPBadRequest, f"Invalid TenantInfo: {exc}") from None


async def get_tenants(services: Services, request: web.Request) -> list[str]:
    return await services.tenants.tenants()


async def get_tenant(services: Services, request: web.Request) -> dict[str, list[str]]:
    info = await services.tenants.get_tenant(request.match_info["tenant"])
    return info.to_json()


async def create_tenant(services: Services, request: web.Request) -> None:
    tenant = request.match_info["tenant"]
    check_tenant_name(tenant)  # TenantsBase.createTenant checks the name before the body
    await services.tenants.create_tenant(tenant, await _tenant_info(services, request))


async def update_tenant(services: Services, request: web.Request) -> None:
    info = await _tenant_info(services, request)
    await services.tenants.update_tenant(request.match_info["tenant"], info)


async def delete_tenant(services: Services, request: web.Request) -> None:
    force = flag(request, "force")
    await services.namespaces.delete_tenant(request.match_info["tenant"], force)
    if force:
        # Consumers here of the deleted topics lose their leases: close them now (as
        # topics/lifecycle.py does after a forced topic delete).
        await services.subscriptions.renew_leases()


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
    stored: dict[str, Any],
    cluster: str,
    permissions: dict[str, list[str]],
    subscription_roles: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Pulsar's ``Policies`` JSON for a namespace, from its stored policies.

    Field names and defaults are ``Policies.java``'s, with null fields left out as Pulsar's
    mapper does (NON_NULL). Policies we do not implement keep Pulsar's defaults.
    """
    doc: dict[str, Any] = {
        "auth_policies": {
            "namespace_auth": permissions,
            "destination_auth": {},
            "subscription_auth_roles": subscription_roles or {},
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


async def get_namespaces(services: Services, request: web.Request) -> list[str]:
    return await services.tenants.namespaces(request.match_info["tenant"])


async def get_policies(services: Services, request: web.Request) -> dict[str, Any]:
    namespace = _namespace(request)
    await services.tenants.require_namespace(namespace)
    stored = await services.policies.namespace_policies(namespace)
    permissions = await services.authorization.get_permissions(namespace)
    roles = await services.authorization.get_subscription_permissions(namespace)
    return policies_document(stored, services.cluster.name, permissions, roles)


async def create_namespace(services: Services, request: web.Request) -> None:
    namespace = _namespace(request)
    try:
        initial = parse_policies(await read_json(request))
    except ValueError as exc:
        # A value Pulsar's validators refuse is 412 (policies.py does the same).
        raise fail(web.HTTPPreconditionFailed, f"Invalid policies: {exc}") from None
    await services.tenants.create_namespace(namespace)
    for name, value in initial.items():
        await services.policies.set_namespace(namespace, name, value)


async def delete_namespace(services: Services, request: web.Request) -> None:
    await _delete_namespace(services, request, _namespace(request))


async def _delete_namespace(services: Services, request: web.Request, namespace: str) -> None:
    force = flag(request, "force")
    await services.namespaces.delete_namespace(namespace, force)
    if force:
        await services.subscriptions.renew_leases()


def _v1_namespace(request: web.Request) -> str:
    # Validated, with the cluster, by Tenants (check_namespace_name).
    info = request.match_info
    return f"{info['tenant']}/{info['cluster']}/{info['namespace']}"


async def create_v1_namespace(services: Services, request: web.Request) -> None:
    # Pulsar's v1 body is an optional BundlesData; a fleet has one bundle, so it is unused.
    await services.tenants.create_namespace(_v1_namespace(request))


async def delete_v1_namespace(services: Services, request: web.Request) -> None:
    await _delete_namespace(services, request, _v1_namespace(request))


def add_routes(app: web.Application) -> None:
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
        ("PUT", "/admin/namespaces/{tenant}/{cluster}/{namespace}", create_v1_namespace),
        ("DELETE", "/admin/namespaces/{tenant}/{cluster}/{namespace}", delete_v1_namespace),
    )
    for method, path, body in routes:
        app.router.add_route(method, path, handler(body))
