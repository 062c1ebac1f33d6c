"""The fleet's gateways as Pulsar's brokers (``BrokersBase``, ``BrokerStatsBase``, the broker
parts of ``ClustersBase``), and the operations that do not apply here answering 501.

Two real gateways share one real redis-server; every call goes through aiohttp.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Callable

import pytest

from pulsar_gateway.adapters.http.admin.tenants import FULL_BUNDLE
from pulsar_gateway.adapters.http.admin.unavailable import UNAVAILABLE
from tests.adminhttp import admin, admin_text
from tests.conftest import GatewayThread, wait_for

SECRET = "not-to-be-seen-0123456789abcdef0123456789abcdef"


def broker_id(gw: GatewayThread) -> str:
    return f"127.0.0.1:{gw.gateway.http_port}"


@pytest.fixture
def fleet(gateway_factory: Callable[..., GatewayThread]) -> tuple[GatewayThread, GatewayThread]:
    first = gateway_factory(token_secret_key=SECRET)
    second = gateway_factory()
    expected = sorted([broker_id(first), broker_id(second)])
    for gw in (first, second):
        # the other gateway describes itself with its next lease renewal
        wait_for(lambda gw=gw: admin("GET", f"{gw.http_url}/admin/v2/brokers")[1] == expected)
    return first, second


def test_every_gateway_lists_the_live_gateways(fleet: tuple[GatewayThread, ...]) -> None:
    expected = sorted(broker_id(gw) for gw in fleet)
    for gw in fleet:
        assert admin("GET", f"{gw.http_url}/admin/v2/brokers") == (200, expected)
        assert admin("GET", f"{gw.http_url}/admin/v2/brokers/standalone") == (200, expected)
        status, body = admin("GET", f"{gw.http_url}/admin/v2/brokers/elsewhere")
        assert status == 404 and body == {"reason": "Cluster does not exist"}


def test_the_leader_is_the_oldest_gateway_and_every_gateway_agrees(
    fleet: tuple[GatewayThread, GatewayThread],
) -> None:
    first, second = fleet
    leader = {"serviceUrl": f"http://{broker_id(first)}", "brokerId": broker_id(first)}
    for gw in fleet:
        assert admin("GET", f"{gw.http_url}/admin/v2/brokers/leaderBroker") == (200, leader)
    first.stop()  # leaves the fleet: the next oldest leads
    url = f"{second.http_url}/admin/v2/brokers"
    assert admin("GET", url) == (200, [broker_id(second)])
    status, body = admin("GET", f"{url}/leaderBroker")
    assert status == 200 and body["brokerId"] == broker_id(second)


def test_ready_and_version(gateway: GatewayThread) -> None:
    assert admin_text("GET", f"{gateway.http_url}/admin/v2/brokers/ready") == (200, "ok")
    version = importlib.metadata.version("pulsar-redis-gateway")
    assert admin_text("GET", f"{gateway.http_url}/admin/v2/brokers/version") == (200, version)


def test_configuration_is_fixed_and_has_no_secrets(
    fleet: tuple[GatewayThread, GatewayThread],
) -> None:
    gw = fleet[0]
    base = f"{gw.http_url}/admin/v2/brokers/configuration"
    assert admin("GET", base) == (200, [])
    assert admin("GET", f"{base}/values") == (200, {})
    status, text = admin_text("GET", f"{base}/runtime")
    assert status == 200
    assert SECRET not in text and gw.gateway.config.redis_url not in text
    _, runtime = admin("GET", f"{base}/runtime")
    assert runtime["clusterName"] == "standalone"
    assert runtime["webServicePort"] == str(gw.gateway.http_port)
    assert runtime["brokerServicePort"] == str(gw.gateway.port)
    assert runtime["authenticationEnabled"] == "false"
    assert not [k for k in runtime if "secret" in k.lower() or "password" in k.lower()]
    assert all(isinstance(v, str) for v in runtime.values())
    for method, path in (("POST", f"{base}/maxMessageSize/1024"), ("DELETE", f"{base}/x")):
        status, body = admin(method, path)
        assert status == 412, (method, path)
        assert body["reason"].startswith("Can't update non-dynamic configuration")
    # nothing changed
    assert admin("GET", f"{base}/runtime")[1]["maxMessageSize"] == runtime["maxMessageSize"]


def test_backlog_quota_check_runs(gateway: GatewayThread) -> None:
    url = f"{gateway.http_url}/admin/v2/brokers/backlog-quota-check"
    assert admin("GET", url) == (204, None)


def test_every_gateway_owns_every_namespace(fleet: tuple[GatewayThread, GatewayThread]) -> None:
    first = fleet[0]
    assert admin("PUT", f"{first.http_url}/admin/v2/namespaces/public/other")[0] == 204
    shared = {"broker_assignment": "shared", "is_controlled": False, "is_active": True}
    for gw in fleet:
        for owner in fleet:
            url = f"{gw.http_url}/admin/v2/brokers/standalone/{broker_id(owner)}/ownedNamespaces"
            status, owned = admin("GET", url)
            assert status == 200
            assert owned[f"public/default/{FULL_BUNDLE}"] == shared
            assert owned[f"public/other/{FULL_BUNDLE}"] == shared
    base = f"{first.http_url}/admin/v2/brokers"
    status, body = admin("GET", f"{base}/standalone/127.0.0.1:1/ownedNamespaces")
    assert status == 404 and "not a live gateway" in body["reason"]
    status, body = admin("GET", f"{base}/elsewhere/{broker_id(first)}/ownedNamespaces")
    assert status == 404 and body == {"reason": "Cluster does not exist"}


def test_peers_failure_domains_and_isolation_are_empty(
    fleet: tuple[GatewayThread, GatewayThread],
) -> None:
    gw = fleet[0]
    base = f"{gw.http_url}/admin/v2/clusters/standalone"
    assert admin("GET", f"{base}/peers") == (204, None)
    assert admin("POST", f"{base}/peers", []) == (204, None)
    status, body = admin("POST", f"{base}/peers", ["standalone"])
    assert status == 412 and "peer" in body["reason"]
    status, body = admin("POST", f"{base}/peers", ["west"])
    assert status == 412 and body == {"reason": "Peer cluster west does not exist"}
    assert admin("POST", f"{base}/peers", {"a": 1})[0] == 400
    assert admin("GET", f"{gw.http_url}/admin/v2/clusters/elsewhere/peers")[0] == 404
    assert admin("GET", f"{base}/peers") == (204, None)

    assert admin("GET", f"{base}/failureDomains") == (200, {})
    status, body = admin("GET", f"{base}/failureDomains/rack1")
    assert status == 404 and body == {
        "reason": "Domain rack1 for cluster standalone does not exist"
    }
    assert admin("DELETE", f"{base}/failureDomains/rack1")[0] == 404
    status, body = admin("GET", f"{gw.http_url}/admin/v2/clusters/elsewhere/failureDomains")
    assert status == 412 and body == {"reason": "Cluster elsewhere does not exist."}

    isolation = f"{base}/namespaceIsolationPolicies"
    assert admin("GET", isolation) == (200, {})
    expected = [
        {"brokerName": b, "isPrimary": False, "namespaceRegex": []}
        for b in sorted(broker_id(g) for g in fleet)
    ]
    assert admin("GET", f"{isolation}/brokers") == (200, expected)
    assert admin("GET", f"{isolation}/brokers/{broker_id(fleet[1])}") == (
        200,
        expected[[e["brokerName"] for e in expected].index(broker_id(fleet[1]))],
    )
    assert admin("GET", f"{isolation}/brokers/127.0.0.1:1")[0] == 404
    status, body = admin("GET", f"{isolation}/p1")
    assert status == 404 and "p1" in body["reason"]
    assert admin("DELETE", f"{isolation}/p1")[0] == 404


def test_broker_stats(gateway: GatewayThread) -> None:
    base = gateway.http_url
    status, _ = admin(
        "POST", f"{base}/topics/persistent/public/default/bs", {"messages": [{"payload": "aGk="}]}
    )
    assert status == 200
    status, topics = admin("GET", f"{base}/admin/v2/broker-stats/topics")
    assert status == 200
    stats = topics["public/default"][FULL_BUNDLE]["persistent"]["persistent://public/default/bs"]
    # the topic's own stats (the counters come with the gateways' next rate reports)
    _, own = admin("GET", f"{base}/admin/v2/persistent/public/default/bs/stats")
    assert stats["storageSize"] == own["storageSize"] > 0
    assert set(stats) == set(own)

    status, metrics = admin("GET", f"{base}/admin/v2/broker-stats/metrics")
    assert status == 200 and metrics
    assert all(set(m) == {"metrics", "dimensions"} for m in metrics)
    assert {m["dimensions"]["broker"] for m in metrics} == {broker_id(gateway)}
    names = {name for m in metrics for name in m["metrics"]}
    assert any(name.startswith("pulsar_gateway_") for name in names)

    status, report = admin("GET", f"{base}/admin/v2/broker-stats/load-report")
    assert status == 200
    assert report["webServiceUrl"] == f"http://{broker_id(gateway)}"
    assert report["pulsarServiceUrl"] == gateway.url
    assert report["cpu"]["limit"] >= 100 and report["cpu"]["usage"] >= 0
    assert report["memory"]["usage"] > 0
    assert report["loadReportType"] == "LocalBrokerData"
    assert admin("GET", f"{base}/admin/v2/broker-stats/bookieops") == (200, {})


def test_what_there_is_none_of(gateway: GatewayThread) -> None:
    v2 = f"{gateway.http_url}/admin/v2"
    assert admin("GET", f"{v2}/bookies/all") == (200, {"bookies": []})
    assert admin("GET", f"{v2}/bookies/racks-info") == (200, {})
    status, body = admin("GET", f"{v2}/bookies/racks-info/bk1:3181")
    assert status == 404 and "bk1:3181" in body["reason"]
    assert admin("GET", f"{v2}/resourcegroups") == (200, [])
    assert admin("GET", f"{v2}/resourcegroups/rg")[0] == 404
    assert admin("DELETE", f"{v2}/resourcegroups/rg")[0] == 404
    status, quota = admin("GET", f"{v2}/resource-quotas")
    assert status == 200 and quota["msgRateIn"] == 40.0 and quota["dynamic"] is True
    bundle = f"{v2}/resource-quotas/public/default/{FULL_BUNDLE}"
    assert admin("GET", bundle) == (200, quota)
    status, body = admin("GET", f"{v2}/resource-quotas/public/default/0x00000000_0x7fffffff")
    assert status == 412 and FULL_BUNDLE in body["reason"]
    assert admin("GET", f"{v2}/resource-quotas/public/nothing/{FULL_BUNDLE}")[0] == 404


_PARAMETERS = {
    "cluster": "standalone",
    "domainName": "rack1",
    "policyName": "p1",
    "allocator": "default",
    "tenant": "public",
    "namespace": "default",
    "bookie": "bk1:3181",
    "bundle": FULL_BUNDLE,
    "resourcegroup": "rg",
}


@pytest.mark.parametrize(
    ("method", "path"), [pytest.param(m, p, id=f"{m} {p}") for m, p in sorted(UNAVAILABLE)]
)
def test_what_does_not_apply_answers_501_with_the_reason(
    gateway: GatewayThread, method: str, path: str
) -> None:
    url = gateway.http_url + "/admin/v2" + path.format(**_PARAMETERS)
    body = {"brokers": ["b:8080"]} if method in ("POST", "PUT") else None
    status, answer = admin(method, url, body)
    assert status == 501, (method, url, answer)
    assert answer == {"reason": UNAVAILABLE[method, path]}
    assert re.search(r"^\S.* (does|do) not apply here: \S", answer["reason"])
