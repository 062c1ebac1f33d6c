"""Admin REST v2: the fleet's gateways as Pulsar's brokers, their stats, and what a cluster
says about its brokers (``BrokersBase``, ``BrokerStatsBase``, ``ClustersBase``).

A fleet is one Pulsar cluster whose brokers are the live gateways (``core/fleet/
membership.py``). Each is named by its broker id, ``host:httpPort`` (its advertised address
and HTTP port, as ``PulsarService.getBrokerId`` names a broker), and serves every topic, so
each namespace has one bundle (``0x00000000_0xffffffff``) owned by every gateway at once.

Paths and answers::

    GET  /admin/v2/brokers                      the live gateways' broker ids
    GET  /admin/v2/brokers/{cluster}            the same; 404 for another cluster
    GET  /admin/v2/brokers/leaderBroker         BrokerInfo of the oldest live gateway
    GET  /admin/v2/brokers/ready                "ok" (503 until the ports are bound)
    GET  /admin/v2/brokers/version              the gateway's version
    GET  /admin/v2/brokers/configuration        [] (no dynamic configuration)
    GET  /admin/v2/brokers/configuration/values {} (nothing overridden)
    GET  /admin/v2/brokers/configuration/runtime  the settings by broker.conf names
    POST /admin/v2/brokers/configuration/{name}/{value}, DELETE .../{name}
                                                412 "Can't update non-dynamic configuration"
    GET  /admin/v2/brokers/backlog-quota-check  runs this gateway's backlog quota check; 204
    GET  /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces
                                                every namespace's bundle (NamespaceOwnershipStatus)
    GET  /admin/v2/broker-stats/topics          topic stats by namespace, bundle and domain
    GET  /admin/v2/broker-stats/metrics         this gateway's metrics as Pulsar's Metrics list
    GET  /admin/v2/broker-stats/load-report     LocalBrokerData: URLs, CPU, memory, clients
    GET  /admin/v2/clusters/{cluster}/peers     204: no peer clusters
    POST /admin/v2/clusters/{cluster}/peers     [] / null accepted; any name 412
    GET  /admin/v2/clusters/{cluster}/failureDomains            {}
    GET, DELETE .../failureDomains/{domainName}                 404: none exist
    GET  /admin/v2/clusters/{cluster}/namespaceIsolationPolicies              {}
    GET  .../namespaceIsolationPolicies/brokers[/{broker}]      brokers, no policy attached
    GET, DELETE .../namespaceIsolationPolicies/{policyName}     404: none exist
    GET  /admin/v2/fleet                        the fleet overview (beyond Pulsar, below)

The fleet overview (``GET /admin/v2/fleet``, superuser only, as every path here) is what an
operator's console shows of the whole fleet in one call: ``{"cluster", "gateways",
"redis"}``. ``gateways`` lists the live gateways, oldest first, each as it describes itself
(``gatewayId``, ``brokerId``, ``serviceUrl``, ``brokerServiceUrl``, ``started`` ms, and the
``host`` name and ``pid`` it runs as, which tell gateways behind one load balancer apart) with its
last summary (``reportedAt`` ms, null when it has written none within three stats intervals;
``connections``, ``producers``, ``consumers``, ``topics``, ``msgRateIn``, ``msgRateOut``,
``msgThroughputIn``, ``msgThroughputOut``, 0 without a summary): its own figures, where
Pulsar's ``broker-stats/load-report`` tells only the broker asked. ``redis`` is the Redis
they share (``core/storage/topology.py``): ``mode`` ``standalone`` or ``cluster``,
``version``, ``usedMemory`` (bytes, summed over the masters), ``maxMemory`` (summed, 0 when
a master has no limit) and ``nodes`` (``id``, ``address``, ``role`` master or replica,
``master``, ``slots``, ``usedMemory``, ``maxMemory``, ``connectedClients``, ``linkState``;
the figures null for a node not asked: replicas, an unreachable master).

The writes that would make failure domains or isolation policies exist answer 501 from
``unavailable.py``: they place namespaces on brokers, and every gateway serves every
namespace. Statuses for a cluster other than the fleet's follow ``ClustersBase``: 404 where
it looks the cluster up (``getCluster``), 412 where it validates it
(``validateClusterExists``).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import resource
import time
from typing import Any

from aiohttp import web

from pulsar_gateway.adapters.http.admin.tenants import FULL_BUNDLE
from pulsar_gateway.adapters.http.described import BOOL, INT, NUM, STR, STR_MAP, Doc, obj
from pulsar_gateway.adapters.resource import SERVICES, Body, fail, handler, read_json
from pulsar_gateway.core import Member, Services, parse_topic_name

__all__ = ["DOCS", "VERSION", "add_routes"]

_BROKERS = "/admin/v2/brokers"
_FLEET = "/admin/v2/fleet"
_STATS = "/admin/v2/broker-stats"
_CLUSTER = "/admin/v2/clusters/{cluster}"

try:
    #: What ``GET /admin/v2/brokers/version`` answers (Pulsar's ``PulsarVersion``).
    VERSION = importlib.metadata.version("pulsar-redis-gateway")
except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
    VERSION = "unknown"

_NON_DYNAMIC = (
    "Can't update non-dynamic configuration: a gateway's settings are its flags and "
    "environment variables, fixed when it starts (restart the gateways to change them)"
)


# -- brokers ----------------------------------------------------------------------------------


async def _broker_ids(services: Services) -> list[str]:
    return sorted({member.broker_id for member in await services.fleet.described_members()})


def _own_cluster(services: Services, request: web.Request, key: str = "cluster") -> None:
    """404 for a cluster that is not the fleet's (``ClustersBase.getCluster``)."""
    if request.match_info[key] != services.cluster.name:
        raise fail(web.HTTPNotFound, "Cluster does not exist")


def _existing_cluster(services: Services, request: web.Request) -> None:
    """412 for a cluster that is not the fleet's (``AdminResource.validateClusterExists``)."""
    cluster = request.match_info["cluster"]
    if cluster != services.cluster.name:
        raise fail(web.HTTPPreconditionFailed, f"Cluster {cluster} does not exist.")


async def active_brokers(services: Services, request: web.Request) -> list[str]:
    return await _broker_ids(services)


async def cluster_brokers(services: Services, request: web.Request) -> list[str]:
    _own_cluster(services, request)
    return await _broker_ids(services)


async def leader_broker(services: Services, request: web.Request) -> dict[str, str]:
    # The fleet elects no leader: its oldest live gateway is one every gateway agrees on.
    members = await services.fleet.described_members()
    if not members:
        raise fail(web.HTTPNotFound, "Couldn't find leader broker")
    leader = members[0]
    return {"serviceUrl": leader.service_url, "brokerId": leader.broker_id}


async def ready(request: web.Request) -> web.Response:
    # Pulsar's isReady: "ok" once PulsarService is Started; the HTTP front serves only
    # after the core started, so only a gateway still binding its ports is not ready.
    if not request.app[SERVICES].cluster.advertised:
        return web.json_response({"reason": "the gateway is starting"}, status=503)
    return web.Response(text="ok")


async def version(request: web.Request) -> web.Response:
    return web.Response(text=VERSION)


async def dynamic_configuration_names(services: Services, request: web.Request) -> list[str]:
    return []


async def dynamic_configuration_values(services: Services, request: web.Request) -> dict[str, str]:
    return {}


async def runtime_configuration(services: Services, request: web.Request) -> dict[str, str]:
    out = dict(services.runtime_configuration)
    cluster = services.cluster
    if cluster.advertised:  # the ports bound (a setting of 0 asks for any free one)
        out["brokerServicePort"] = str(cluster.broker_port)
        out["webServicePort"] = str(cluster.http_port)
        if cluster.broker_port_tls is not None:
            out["brokerServicePortTls"] = str(cluster.broker_port_tls)
        if cluster.http_port_tls is not None:
            out["webServicePortTls"] = str(cluster.http_port_tls)
    return dict(sorted(out.items()))


async def update_dynamic_configuration(services: Services, request: web.Request) -> None:
    raise fail(web.HTTPPreconditionFailed, _NON_DYNAMIC)


async def backlog_quota_check(services: Services, request: web.Request) -> None:
    # BrokerService.monitorBacklogQuota over the topics this gateway's clients use
    await services.backlog_quota_monitor.run_once()


async def _all_namespaces(services: Services) -> list[str]:
    tenants = await services.tenants.tenants()
    listed = await asyncio.gather(*(services.tenants.namespaces(t) for t in tenants))
    return sorted({namespace for batch in listed for namespace in batch})


async def owned_namespaces(services: Services, request: web.Request) -> dict[str, Any]:
    _own_cluster(services, request, "clusterName")
    broker = request.match_info["broker"]
    if broker not in await _broker_ids(services):
        raise fail(web.HTTPNotFound, f"Broker {broker} is not a live gateway of this fleet")
    # every gateway serves every namespace's one bundle: none is isolated (primary or
    # secondary), so each is "shared", as NamespaceService.getOwnedNameSpacesStatus says
    status = {"broker_assignment": "shared", "is_controlled": False, "is_active": True}
    return {f"{ns}/{FULL_BUNDLE}": dict(status) for ns in await _all_namespaces(services)}


# -- broker-stats -----------------------------------------------------------------------------


async def topic_stats(services: Services, request: web.Request) -> dict[str, Any]:
    # PulsarStats' dimension stream: namespace -> bundle -> domain -> topic -> stats (here
    # the fleet-wide TopicStats every gateway answers alike)
    topics = sorted(await services.topics.all_topics())
    read = await services.stats.read_many(topics)
    out: dict[str, Any] = {}
    for name in topics:
        data = read.get(name)
        if data is None:
            continue
        topic = parse_topic_name(name)
        namespace = name.split("://", 1)[1].rsplit("/", 1)[0]
        domain = "persistent" if topic.persistent else "non-persistent"
        bundle = out.setdefault(namespace, {}).setdefault(FULL_BUNDLE, {})
        bundle.setdefault(domain, {})[name] = services.stats.of(data)
    return out


async def broker_metrics(services: Services, request: web.Request) -> list[dict[str, Any]]:
    # Pulsar's Metrics: one {"metrics", "dimensions"} object per set of labels
    base = {"cluster": services.cluster.name, "broker": services.cluster.broker_id}
    groups: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
    for family in services.metrics.registry.collect():
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue  # a counter's creation time, not a figure
            labels = tuple(sorted(sample.labels.items()))
            groups.setdefault(labels, {})[sample.name] = sample.value
    return [
        {"metrics": dict(sorted(metrics.items())), "dimensions": base | dict(labels)}
        for labels, metrics in sorted(groups.items())
    ]


#: The process's CPU time and the wall clock at the previous load report, per app.
_LAST_CPU = web.AppKey("load_report_cpu", list)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _resident_mb() -> float:
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        # ru_maxrss: the peak, in KiB on Linux (bytes on macOS); better than nothing
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _physical_mb() -> float:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        return -1.0


async def load_report(services: Services, request: web.Request) -> dict[str, Any]:
    # LocalBrokerData with what a gateway knows of itself: its URLs, its CPU use (percent,
    # 100 per core, since the previous report) and resident memory (MB), its own clients.
    # Message rates are left out: a gateway's topics are everyone's (broker-stats/topics).
    last = request.app[_LAST_CPU]
    now, cpu = time.monotonic(), _cpu_seconds()
    elapsed = now - last[0]
    usage = 100.0 * (cpu - last[1]) / elapsed if elapsed > 0 else 0.0
    last[:] = [now, cpu]
    cluster = services.cluster
    producers = services.producers.producers()
    consumers = list(services.subscriptions.consumers())
    topics = {p.topic_name for p in producers} | {c.topic_name for c in consumers}
    cores = os.cpu_count() or 1
    return {
        "webServiceUrl": cluster.service_url,
        "webServiceUrlTls": cluster.service_url_tls,
        "pulsarServiceUrl": cluster.broker_service_url,
        "pulsarServiceUrlTls": cluster.broker_service_url_tls,
        "persistentTopicsEnabled": True,
        "nonPersistentTopicsEnabled": True,
        "cpu": {"usage": round(usage, 3), "limit": 100.0 * cores},
        "memory": {"usage": round(_resident_mb(), 3), "limit": round(_physical_mb(), 3)},
        "numTopics": len(topics),
        "numBundles": len({parse_topic_name(t).namespace for t in topics}),
        "numProducers": len(producers),
        "numConsumers": len(consumers),
        "lastUpdate": int(time.time() * 1000),
        "brokerVersionString": VERSION,
        "loadReportType": "LocalBrokerData",
    }


# -- the fleet overview -----------------------------------------------------------------------

#: A gateway's summary figures (``core/fleet/rates.py`` ``RateReporter.summary``) and their
#: value without a fresh summary.
_SUMMARY_FIGURES = (
    ("connections", 0),
    ("producers", 0),
    ("consumers", 0),
    ("topics", 0),
    ("msgRateIn", 0.0),
    ("msgRateOut", 0.0),
    ("msgThroughputIn", 0.0),
    ("msgThroughputOut", 0.0),
)


def _gateway(member: Member) -> dict[str, Any]:
    summary = member.summary or {}
    return {
        "gatewayId": member.gateway_id,
        "brokerId": member.broker_id,
        "serviceUrl": member.service_url,
        "brokerServiceUrl": member.broker_service_url,
        "started": member.started,
        "host": member.host,
        "pid": member.pid,
        "reportedAt": summary.get("t"),
        **{name: summary.get(name, default) for name, default in _SUMMARY_FIGURES},
    }


async def fleet_overview(services: Services, request: web.Request) -> dict[str, Any]:
    members, redis = await asyncio.gather(
        services.fleet.described_members(summaries=True), services.redis_topology()
    )
    return {
        "cluster": services.cluster.name,
        "gateways": [_gateway(member) for member in members],
        "redis": redis.to_json(),
    }


# -- clusters: peers, failure domains, namespace isolation ------------------------------------


async def get_peers(services: Services, request: web.Request) -> None:
    # ClusterData.peerClusterNames is null without peers: Pulsar answers 204, no body
    _own_cluster(services, request)


async def set_peers(services: Services, request: web.Request) -> None:
    _own_cluster(services, request)
    names = await read_json(request)
    if names is None or names == []:
        return None  # no peers: what there is
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise fail(web.HTTPBadRequest, "Invalid request body: a JSON list of cluster names")
    for name in names:
        # ClustersBase.setPeerClusterNames refuses its own cluster and unknown ones; the
        # fleet is the only cluster there is
        if name == services.cluster.name:
            raise fail(web.HTTPPreconditionFailed, f"{name} itself can't be part of peer-list")
        raise fail(web.HTTPPreconditionFailed, f"Peer cluster {name} does not exist")
    return None


async def failure_domains(services: Services, request: web.Request) -> dict[str, Any]:
    _existing_cluster(services, request)
    return {}


async def failure_domain(services: Services, request: web.Request) -> None:
    _existing_cluster(services, request)
    domain, cluster = request.match_info["domainName"], request.match_info["cluster"]
    raise fail(web.HTTPNotFound, f"Domain {domain} for cluster {cluster} does not exist")


async def delete_failure_domain(services: Services, request: web.Request) -> None:
    _existing_cluster(services, request)
    domain, cluster = request.match_info["domainName"], request.match_info["cluster"]
    raise fail(web.HTTPNotFound, f"Domain-name {domain} or cluster {cluster} does not exist")


async def isolation_policies(services: Services, request: web.Request) -> dict[str, Any]:
    _existing_cluster(services, request)
    return {}


def _no_isolation(broker: str) -> dict[str, Any]:
    # BrokerNamespaceIsolationData of a broker no policy names
    return {"brokerName": broker, "isPrimary": False, "namespaceRegex": []}


async def isolation_brokers(services: Services, request: web.Request) -> list[dict[str, Any]]:
    _existing_cluster(services, request)
    return [_no_isolation(broker) for broker in await _broker_ids(services)]


async def isolation_broker(services: Services, request: web.Request) -> dict[str, Any]:
    _existing_cluster(services, request)
    broker = request.match_info["broker"]
    if broker not in await _broker_ids(services):
        raise fail(web.HTTPNotFound, f"Broker {broker} not found")
    return _no_isolation(broker)


async def isolation_policy(services: Services, request: web.Request) -> None:
    _existing_cluster(services, request)
    policy, cluster = request.match_info["policyName"], request.match_info["cluster"]
    raise fail(
        web.HTTPNotFound, f"Cannot find NamespaceIsolationPolicy {policy} for cluster {cluster}"
    )


# -- routes -----------------------------------------------------------------------------------

_ROUTES: tuple[tuple[str, str, Body], ...] = (
    # the fixed paths before /brokers/{cluster}: aiohttp tries routes in order
    ("GET", _BROKERS, active_brokers),
    ("GET", f"{_BROKERS}/leaderBroker", leader_broker),
    ("GET", f"{_BROKERS}/configuration", dynamic_configuration_names),
    ("GET", f"{_BROKERS}/configuration/values", dynamic_configuration_values),
    ("GET", f"{_BROKERS}/configuration/runtime", runtime_configuration),
    (
        "POST",
        f"{_BROKERS}/configuration/{{configName}}/{{configValue}}",
        update_dynamic_configuration,
    ),
    ("DELETE", f"{_BROKERS}/configuration/{{configName}}", update_dynamic_configuration),
    ("GET", f"{_BROKERS}/backlog-quota-check", backlog_quota_check),
    ("GET", f"{_BROKERS}/{{clusterName}}/{{broker}}/ownedNamespaces", owned_namespaces),
    ("GET", f"{_STATS}/topics", topic_stats),
    ("GET", f"{_STATS}/metrics", broker_metrics),
    ("GET", f"{_STATS}/load-report", load_report),
    ("GET", _FLEET, fleet_overview),
    ("GET", f"{_CLUSTER}/peers", get_peers),
    ("POST", f"{_CLUSTER}/peers", set_peers),
    ("GET", f"{_CLUSTER}/failureDomains", failure_domains),
    ("GET", f"{_CLUSTER}/failureDomains/{{domainName}}", failure_domain),
    ("DELETE", f"{_CLUSTER}/failureDomains/{{domainName}}", delete_failure_domain),
    ("GET", f"{_CLUSTER}/namespaceIsolationPolicies", isolation_policies),
    ("GET", f"{_CLUSTER}/namespaceIsolationPolicies/brokers", isolation_brokers),
    ("GET", f"{_CLUSTER}/namespaceIsolationPolicies/brokers/{{broker}}", isolation_broker),
    ("GET", f"{_CLUSTER}/namespaceIsolationPolicies/{{policyName}}", isolation_policy),
    ("DELETE", f"{_CLUSTER}/namespaceIsolationPolicies/{{policyName}}", isolation_policy),
)


_B, _S, _C = "brokers", "broker-stats", "clusters"
_NULLABLE_INT = {"type": "integer", "format": "int64", "nullable": True}
_NULLABLE_STR = {"type": "string", "nullable": True}
_FLEET_GATEWAY = obj(
    gatewayId=STR,
    brokerId=STR,
    serviceUrl=STR,
    brokerServiceUrl=STR,
    started=INT,
    host=STR,
    pid=INT,
    reportedAt=_NULLABLE_INT,
    connections=INT,
    producers=INT,
    consumers=INT,
    topics=INT,
    msgRateIn=NUM,
    msgRateOut=NUM,
    msgThroughputIn=NUM,
    msgThroughputOut=NUM,
)
_REDIS_NODE = obj(
    id=STR,
    address=STR,
    role={"type": "string", "enum": ["master", "replica"]},
    master=_NULLABLE_STR,
    slots=_NULLABLE_STR,
    usedMemory=_NULLABLE_INT,
    maxMemory=_NULLABLE_INT,
    connectedClients=_NULLABLE_INT,
    linkState={"type": "string", "enum": ["connected", "disconnected"]},
)
_NAMES = {"type": "array", "items": STR}
_ISOLATION = obj(brokerName=STR, policyName=STR, isPrimary=BOOL, namespaceRegex=_NAMES)
_USAGE = obj(usage=NUM, limit=NUM)

#: The OpenAPI description of these routes (merged by ``openapi.py``).
DOCS: dict[tuple[str, str], Doc] = {
    ("GET", _BROKERS): Doc(_B, "The live gateways' broker ids (host:httpPort)", response=_NAMES),
    ("GET", f"{_BROKERS}/{{cluster}}"): Doc(
        _B, "The live gateways' broker ids (host:httpPort) of the fleet's cluster", response=_NAMES
    ),
    ("GET", f"{_BROKERS}/leaderBroker"): Doc(
        _B,
        "BrokerInfo of the fleet's leader: its oldest live gateway",
        response=obj(serviceUrl=STR, brokerId=STR),
    ),
    ("GET", f"{_BROKERS}/ready"): Doc(
        _B, "ok once the gateway serves", response=STR, content_type="text/plain"
    ),
    ("GET", f"{_BROKERS}/version"): Doc(
        _B, "The gateway's version", response=STR, content_type="text/plain"
    ),
    ("GET", f"{_BROKERS}/configuration"): Doc(
        _B, "Names of the dynamic settings: none", response=_NAMES
    ),
    ("GET", f"{_BROKERS}/configuration/values"): Doc(
        _B, "Dynamic settings overridden: none", response=STR_MAP
    ),
    ("GET", f"{_BROKERS}/configuration/runtime"): Doc(
        _B, "The gateway's settings by broker.conf names (no secrets)", response=STR_MAP
    ),
    ("POST", f"{_BROKERS}/configuration/{{configName}}/{{configValue}}"): Doc(
        _B, "Refused (412): no setting is dynamic", ok=204
    ),
    ("DELETE", f"{_BROKERS}/configuration/{{configName}}"): Doc(
        _B, "Refused (412): no setting is dynamic", ok=204
    ),
    ("GET", f"{_BROKERS}/backlog-quota-check"): Doc(
        _B, "Run this gateway's backlog quota check now", ok=204
    ),
    ("GET", f"{_BROKERS}/{{clusterName}}/{{broker}}/ownedNamespaces"): Doc(
        _B,
        "Every namespace's bundle (every gateway serves every namespace)",
        response={
            "type": "object",
            "additionalProperties": obj(broker_assignment=STR, is_controlled=BOOL, is_active=BOOL),
        },
    ),
    ("GET", f"{_STATS}/topics"): Doc(
        _S,
        "Topic stats by namespace, bundle and domain",
        response={"type": "object", "additionalProperties": {"type": "object"}},
    ),
    ("GET", f"{_STATS}/metrics"): Doc(
        _S,
        "This gateway's metrics as Pulsar's Metrics list",
        response={
            "type": "array",
            "items": obj(
                metrics={"type": "object", "additionalProperties": NUM}, dimensions=STR_MAP
            ),
        },
    ),
    ("GET", f"{_STATS}/load-report"): Doc(
        _S,
        "LocalBrokerData: URLs, CPU, memory and clients of this gateway",
        response=obj(
            webServiceUrl=STR,
            pulsarServiceUrl=STR,
            cpu=_USAGE,
            memory=_USAGE,
            numTopics=INT,
            numProducers=INT,
            numConsumers=INT,
            loadReportType=STR,
        ),
    ),
    ("GET", _FLEET): Doc(
        _B,
        "The fleet overview (beyond Pulsar): the live gateways with their clients and rates, "
        "and the Redis nodes they share with their memory",
        response=obj(
            cluster=STR,
            gateways={"type": "array", "items": _FLEET_GATEWAY},
            redis=obj(
                mode={"type": "string", "enum": ["standalone", "cluster"]},
                version=STR,
                usedMemory=INT,
                maxMemory=INT,
                nodes={"type": "array", "items": _REDIS_NODE},
            ),
        ),
    ),
    ("GET", f"{_CLUSTER}/peers"): Doc(_C, "Peer clusters: none (204)", ok=204),
    ("POST", f"{_CLUSTER}/peers"): Doc(
        _C, "Set peer clusters: only none (the fleet is the only cluster)", body=_NAMES, ok=204
    ),
    ("GET", f"{_CLUSTER}/failureDomains"): Doc(
        _C, "Failure domains: none", response={"type": "object"}
    ),
    ("GET", f"{_CLUSTER}/failureDomains/{{domainName}}"): Doc(
        _C, "A failure domain: none exists (404)", response={"type": "object"}
    ),
    ("DELETE", f"{_CLUSTER}/failureDomains/{{domainName}}"): Doc(
        _C, "Delete a failure domain: none exists (404)", ok=204
    ),
    ("GET", f"{_CLUSTER}/namespaceIsolationPolicies"): Doc(
        _C, "Namespace isolation policies: none", response={"type": "object"}
    ),
    ("GET", f"{_CLUSTER}/namespaceIsolationPolicies/brokers"): Doc(
        _C,
        "The live gateways, no isolation policy attached",
        response={"type": "array", "items": _ISOLATION},
    ),
    ("GET", f"{_CLUSTER}/namespaceIsolationPolicies/brokers/{{broker}}"): Doc(
        _C, "A live gateway, no isolation policy attached", response=_ISOLATION
    ),
    ("GET", f"{_CLUSTER}/namespaceIsolationPolicies/{{policyName}}"): Doc(
        _C, "A namespace isolation policy: none exists (404)", response={"type": "object"}
    ),
    ("DELETE", f"{_CLUSTER}/namespaceIsolationPolicies/{{policyName}}"): Doc(
        _C, "Delete a namespace isolation policy: none exists (404)", ok=204
    ),
}


def add_routes(app: web.Application) -> None:
    """Register the brokers, broker-stats and cluster routes (health and
    internal-configuration are registered by ``app.py`` before these)."""
    app[_LAST_CPU] = [time.monotonic(), _cpu_seconds()]
    app.router.add_get(f"{_BROKERS}/ready", ready)
    app.router.add_get(f"{_BROKERS}/version", version)
    for method, path, body in _ROUTES:
        app.router.add_route(method, path, handler(body))
    # last: {cluster} would match the fixed paths above
    app.router.add_get(f"{_BROKERS}/{{cluster}}", handler(cluster_brokers))
