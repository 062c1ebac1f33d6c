"""Admin REST v2 operations that cannot mean anything over Redis, and the truthful answers
of those that can still be read.

A gateway fleet has no bookies (messages are stored in Redis streams, not BookKeeper
ledgers), no functions worker, no load manager placing bundles on brokers (every gateway
serves every namespace), no JVM and no Netty allocator. Pulsar's operations on those are
still routed, so a tool gets a clear answer rather than the router's 404:

* reading what does not exist answers what Pulsar answers when there is none of it: no
  bookies (``BookiesBase.getAllBookies``: an empty ``BookiesClusterInfo``; ``racks-info``:
  an empty map; one bookie: 404), no pending bookie operations (``BrokerStatsBase``), no
  resource groups (``ResourceGroupsBase``: an empty list; one: 404), and the default
  resource quota (``ResourceQuotasBase``: the quota of a bundle nobody set);
* everything else, listed in :data:`UNAVAILABLE`, answers **501 Not Implemented** with
  ``{"reason": "<what> does not apply here: <why>"}``, from one handler.

``docs/admin.md`` ("Operations that do not apply") lists each decision.
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from pulsar_gateway.adapters.http.admin.tenants import FULL_BUNDLE
from pulsar_gateway.adapters.http.described import NUM, STR, Doc, obj
from pulsar_gateway.adapters.resource import Body, fail, handler, namespace_name
from pulsar_gateway.core import Services

__all__ = ["DOCS", "UNAVAILABLE", "add_routes"]

_V2 = "/admin/v2"

_BOOKIES = (
    "bookies do not apply here: messages are stored in Redis streams, not BookKeeper "
    "ledgers; there are no bookies"
)
_WORKER = (
    "Pulsar Functions do not apply here: a gateway fleet runs no functions worker "
    "(no functions, sources or sinks, no worker cluster, no assignments)"
)
_PLACEMENT = (
    "every gateway serves every namespace (one bundle each, owned by all), so there is no "
    "placement of namespaces on brokers to steer"
)
_QUOTAS = f"resource quotas do not apply here: they are the load manager's hints; {_PLACEMENT}"

#: (method, path under /admin/v2) -> the reason it answers 501.
UNAVAILABLE: Final[dict[tuple[str, str], str]] = {
    ("POST", "/brokers/shutdown"): (
        "a graceful shutdown through the admin API does not apply here: a gateway is "
        "stopped by its process manager with SIGTERM, on which it drains its clients and "
        "leaves the fleet"
    ),
    ("POST", "/clusters/{cluster}/migrate"): (
        "cluster migration does not apply here: the fleet is the only cluster on its Redis, "
        "and there is no other cluster to move its topics to"
    ),
    ("POST", "/clusters/{cluster}/failureDomains/{domainName}"): (
        f"failure domains do not apply here: they group brokers for namespace placement; "
        f"{_PLACEMENT}"
    ),
    ("POST", "/clusters/{cluster}/namespaceIsolationPolicies/{policyName}"): (
        f"namespace isolation policies do not apply here: they pin namespaces to brokers; "
        f"{_PLACEMENT}"
    ),
    ("GET", "/broker-stats/mbeans"): (
        "MBeans do not apply here: a gateway is a Python process, not a JVM"
    ),
    ("GET", "/broker-stats/allocator-stats/{allocator}"): (
        "allocator stats do not apply here: a gateway has no Netty allocator"
    ),
    ("GET", "/broker-stats/broker-resource-availability/{tenant}/{namespace}"): (
        f"broker resource availability does not apply here: it ranks brokers for a "
        f"namespace (SimpleLoadManagerImpl); {_PLACEMENT}"
    ),
    ("POST", "/bookies/racks-info/{bookie}"): _BOOKIES,
    ("DELETE", "/bookies/racks-info/{bookie}"): _BOOKIES,
    ("POST", "/resource-quotas"): _QUOTAS,
    ("POST", "/resource-quotas/{tenant}/{namespace}/{bundle}"): _QUOTAS,
    ("DELETE", "/resource-quotas/{tenant}/{namespace}/{bundle}"): _QUOTAS,
    ("PUT", "/resourcegroups/{resourcegroup}"): (
        "resource groups do not apply here: a gateway has no ResourceGroupService sharing "
        "publish and dispatch rate limits across tenants and namespaces"
    ),
    ("GET", "/worker/assignments"): _WORKER,
    ("GET", "/worker/cluster"): _WORKER,
    ("GET", "/worker/cluster/leader"): _WORKER,
    ("GET", "/worker/cluster/leader/ready"): _WORKER,
    ("GET", "/worker/connectors"): _WORKER,
    ("GET", "/worker/drain"): _WORKER,
    ("PUT", "/worker/drain"): _WORKER,
    ("GET", "/worker/leader/drain"): _WORKER,
    ("PUT", "/worker/leader/drain"): _WORKER,
    ("PUT", "/worker/rebalance"): _WORKER,
    ("GET", "/worker-stats/functionsmetrics"): _WORKER,
    ("GET", "/worker-stats/metrics"): _WORKER,
}

_REASONS = {(method, f"{_V2}{path}"): reason for (method, path), reason in UNAVAILABLE.items()}


async def not_applicable(request: web.Request) -> web.Response:
    resource = request.match_info.route.resource
    path = resource.canonical if resource is not None else request.path
    raise fail(web.HTTPNotImplemented, _REASONS[request.method, path])


# -- what can be read: there is none of it ------------------------------------------------------

#: Pulsar's ``ResourceQuota`` of a bundle nobody set a quota for (``BundlesQuotas.
#: INITIAL_QUOTA``): what ``GET /resource-quotas`` answers on a broker left at its defaults.
DEFAULT_QUOTA: Final[dict[str, Any]] = {
    "msgRateIn": 40.0,
    "msgRateOut": 120.0,
    "bandwidthIn": 100000.0,
    "bandwidthOut": 300000.0,
    "memory": 80.0,
    "dynamic": True,
}


async def all_bookies(services: Services, request: web.Request) -> dict[str, Any]:
    return {"bookies": []}


async def racks_info(services: Services, request: web.Request) -> dict[str, Any]:
    return {}


async def rack_info(services: Services, request: web.Request) -> None:
    raise fail(web.HTTPNotFound, f"Bookie address not found: {request.match_info['bookie']}")


async def bookie_ops(services: Services, request: web.Request) -> dict[str, Any]:
    return {}  # no bookie client: nothing pending


async def default_quota(services: Services, request: web.Request) -> dict[str, Any]:
    return dict(DEFAULT_QUOTA)


async def bundle_quota(services: Services, request: web.Request) -> dict[str, Any]:
    namespace = namespace_name(request)
    if not await services.tenants.namespace_exists(namespace):
        raise fail(web.HTTPNotFound, "Namespace does not exist")
    bundle = request.match_info["bundle"]
    if bundle != FULL_BUNDLE:
        raise fail(
            web.HTTPPreconditionFailed,
            f"Bundle {bundle} is not a bundle of {namespace}: its one bundle is {FULL_BUNDLE}",
        )
    return dict(DEFAULT_QUOTA)


async def resource_groups(services: Services, request: web.Request) -> list[str]:
    return []


async def resource_group(services: Services, request: web.Request) -> None:
    raise fail(web.HTTPNotFound, "ResourceGroup does not exist")


_QUOTA_PATH = f"{_V2}/resource-quotas/{{tenant}}/{{namespace}}/{{bundle}}"

_READS: tuple[tuple[str, str, Body], ...] = (
    ("GET", f"{_V2}/bookies/all", all_bookies),
    ("GET", f"{_V2}/bookies/racks-info", racks_info),
    ("GET", f"{_V2}/bookies/racks-info/{{bookie}}", rack_info),
    ("GET", f"{_V2}/broker-stats/bookieops", bookie_ops),
    ("GET", f"{_V2}/resource-quotas", default_quota),
    ("GET", _QUOTA_PATH, bundle_quota),
    ("GET", f"{_V2}/resourcegroups", resource_groups),
    ("GET", f"{_V2}/resourcegroups/{{resourcegroup}}", resource_group),
    ("DELETE", f"{_V2}/resourcegroups/{{resourcegroup}}", resource_group),
)

_QUOTA = obj(
    msgRateIn=NUM,
    msgRateOut=NUM,
    bandwidthIn=NUM,
    bandwidthOut=NUM,
    memory=NUM,
    dynamic={"type": "boolean"},
)


def _tag(path: str) -> str:
    first = path.split("/")[1]
    return {"worker-stats": "worker"}.get(first, first)


#: The OpenAPI description of these routes (merged by ``openapi.py``); a 501 operation is
#: documented with ``ok=501``, which the fuzz test takes as "answers 501 on purpose".
DOCS: dict[tuple[str, str], Doc] = {
    (method, f"{_V2}{path}"): Doc(
        _tag(path), f"Not implemented: {reason}", response="Error", ok=501
    )
    for (method, path), reason in UNAVAILABLE.items()
} | {
    ("GET", f"{_V2}/bookies/all"): Doc(
        "bookies", "BookiesClusterInfo: no bookies", response=obj(bookies={"type": "array"})
    ),
    ("GET", f"{_V2}/bookies/racks-info"): Doc(
        "bookies", "Bookie racks: none", response={"type": "object"}
    ),
    ("GET", f"{_V2}/bookies/racks-info/{{bookie}}"): Doc(
        "bookies", "A bookie's rack: no bookie exists (404)", response={"type": "object"}
    ),
    ("GET", f"{_V2}/broker-stats/bookieops"): Doc(
        "broker-stats", "Pending bookie operations: none", response={"type": "object"}
    ),
    ("GET", f"{_V2}/resource-quotas"): Doc(
        "resource-quotas", "The default resource quota (Pulsar's initial value)", response=_QUOTA
    ),
    ("GET", _QUOTA_PATH): Doc(
        "resource-quotas", "A bundle's resource quota: the default", response=_QUOTA
    ),
    ("GET", f"{_V2}/resourcegroups"): Doc(
        "resourcegroups", "Resource groups: none", response={"type": "array", "items": STR}
    ),
    ("GET", f"{_V2}/resourcegroups/{{resourcegroup}}"): Doc(
        "resourcegroups", "A resource group: none exists (404)", response={"type": "object"}
    ),
    ("DELETE", f"{_V2}/resourcegroups/{{resourcegroup}}"): Doc(
        "resourcegroups", "Delete a resource group: none exists (404)", ok=204
    ),
}


def add_routes(app: web.Application) -> None:
    """Register the reads, then every operation of :data:`UNAVAILABLE`."""
    for method, path, body in _READS:
        app.router.add_route(method, path, handler(body))
    for method, path in UNAVAILABLE:
        app.router.add_route(method, f"{_V2}{path}", not_applicable)
