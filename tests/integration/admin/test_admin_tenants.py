"""Clusters, tenants and namespaces admin endpoints (Pulsar admin REST v2), with aiohttp.

Statuses and bodies follow Pulsar's ``ClustersBase``, ``TenantsBase`` and
``NamespacesBase``; state is checked through the API on other gateways, in Redis, and with
the official client.
"""

from __future__ import annotations

from typing import Any

import pulsar
import pytest

from pulsar_gateway.core.storage.keys import KeySchema
from tests.adminhttp import admin, admin_text
from tests.conftest import TIMEOUT, stream_key

RECEIVE_MS = int(TIMEOUT * 1000)
INFO = {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}


def url(gw: Any, path: str) -> str:
    return f"{gw.http_url}/admin/v2/{path}"


def reason(body: Any) -> str:
    assert isinstance(body, dict) and set(body) == {"reason"}, body
    return str(body["reason"])


# -- clusters ------------------------------------------------------------------------------


def test_clusters_list_and_data(gateway):
    assert admin("GET", url(gateway, "clusters")) == (200, ["standalone"])
    status, data = admin("GET", url(gateway, "clusters/standalone"))
    assert status == 200
    assert data["serviceUrl"] == gateway.http_url
    assert data["brokerServiceUrl"] == gateway.url
    assert "serviceUrlTls" not in data  # null fields are left out, as Pulsar's mapper does
    status, body = admin("GET", url(gateway, "clusters/elsewhere"))
    assert status == 404 and reason(body) == "Cluster does not exist"


def test_cluster_name_follows_config(gateway_factory):
    gw = gateway_factory(cluster_name="east")
    assert admin("GET", url(gw, "clusters")) == (200, ["east"])
    assert admin("GET", url(gw, "clusters/east"))[0] == 200
    assert admin("GET", url(gw, "tenants/public")) == (
        200,
        {"adminRoles": [], "allowedClusters": ["east"]},
    )


def test_clusters_cannot_be_changed(gateway):
    data = {"serviceUrl": "http://x:8080", "brokerServiceUrl": "pulsar://x:6650"}
    status, body = admin("PUT", url(gateway, "clusters/standalone"), data)
    assert status == 409 and reason(body) == "Cluster already exists"
    status, body = admin("PUT", url(gateway, "clusters/second"), data)
    assert status == 403 and "read-only" in reason(body)
    status, body = admin("PUT", url(gateway, "clusters/bad%20name"), data)
    assert status == 412 and reason(body) == "Cluster name is not valid"
    assert admin("POST", url(gateway, "clusters/standalone"), data)[0] == 403
    assert admin("POST", url(gateway, "clusters/second"), data)[0] == 404
    status, body = admin("DELETE", url(gateway, "clusters/standalone"))
    assert status == 412 and reason(body) == "Cluster not empty"
    assert admin("DELETE", url(gateway, "clusters/second"))[0] == 404
    # Nothing changed.
    assert admin("GET", url(gateway, "clusters")) == (200, ["standalone"])
    assert admin("GET", url(gateway, "clusters/standalone"))[1]["serviceUrl"] == gateway.http_url


# -- tenants -------------------------------------------------------------------------------


def test_defaults_on_a_fresh_redis(gateway_factory, redis_clean):
    gateway = gateway_factory()
    assert admin("GET", url(gateway, "tenants")) == (200, ["public", "pulsar"])
    assert admin("GET", url(gateway, "namespaces/public")) == (200, ["public/default"])
    assert admin("GET", url(gateway, "namespaces/pulsar")) == (200, ["pulsar/system"])
    assert admin("GET", url(gateway, "tenants/public")) == (
        200,
        {"adminRoles": [], "allowedClusters": ["standalone"]},
    )
    assert admin("GET", url(gateway, "namespaces/public/default"))[0] == 200
    # A second gateway starting on the same Redis leaves the defaults as admins made them.
    admin("POST", url(gateway, "tenants/public"), INFO)
    admin("DELETE", url(gateway, "namespaces/pulsar/system"))
    admin("PUT", url(gateway, "namespaces/public/extra"))
    second = gateway_factory()
    assert admin("GET", url(second, "tenants/public")) == (200, INFO)
    assert admin("GET", url(second, "namespaces/public")) == (
        200,
        ["public/default", "public/extra"],
    )
    # Pulsar standalone re-creates a missing default namespace when it starts; so do we.
    assert admin("GET", url(second, "namespaces/pulsar")) == (200, ["pulsar/system"])


def test_tenant_lifecycle(gateway):
    assert admin("PUT", url(gateway, "tenants/acme"), INFO) == (204, None)
    assert admin("GET", url(gateway, "tenants/acme")) == (200, INFO)
    assert "acme" in admin("GET", url(gateway, "tenants"))[1]
    status, body = admin("PUT", url(gateway, "tenants/acme"), INFO)
    assert status == 409 and reason(body) == "Tenant already exist"
    updated = {"adminRoles": ["a", "b"], "allowedClusters": ["standalone"]}
    assert admin("POST", url(gateway, "tenants/acme"), updated) == (204, None)
    assert admin("GET", url(gateway, "tenants/acme")) == (200, updated)
    assert admin("DELETE", url(gateway, "tenants/acme")) == (204, None)
    status, body = admin("GET", url(gateway, "tenants/acme"))
    assert status == 404 and reason(body) == "Tenant does not exist"
    status, body = admin("POST", url(gateway, "tenants/acme"), INFO)
    assert status == 404 and reason(body) == "Tenant acme not found"
    status, body = admin("DELETE", url(gateway, "tenants/acme"))
    assert status == 404 and reason(body) == "Tenant doesn't exist"
    assert "acme" not in admin("GET", url(gateway, "tenants"))[1]


@pytest.mark.parametrize(
    ("body", "raw", "status", "text"),
    [
        ({"adminRoles": [], "allowedClusters": ["nowhere"]}, None, 412, "Clusters do not exist"),
        ({"adminRoles": [], "allowedClusters": []}, None, 412, "Clusters cannot be empty"),
        ({"allowedClusters": ["standalone", " "]}, None, 412, "Clusters cannot be empty"),
        ({"adminRoles": ["x"]}, None, 412, "Clusters cannot be null"),
        (None, None, 412, "TenantInfo is null"),
        ({"adminRoles": [" x"], "allowedClusters": ["standalone"]}, None, 412, "AdminRoles"),
        ({"allowedClusters": "standalone"}, None, 400, "allowedClusters"),
        (None, "{not json", 400, "Invalid JSON"),
        ([1, 2], None, 400, "TenantInfo"),
    ],
)
def test_bad_tenant_info(gateway, body, raw, status, text):
    got, answer = admin("PUT", url(gateway, "tenants/t1"), body, raw)
    assert got == status and text in reason(answer)
    admin("PUT", url(gateway, "tenants/t2"), INFO)
    got, answer = admin("POST", url(gateway, "tenants/t2"), body, raw)
    assert got == status and text in reason(answer)
    assert admin("GET", url(gateway, "tenants/t1"))[0] == 404
    assert admin("GET", url(gateway, "tenants/t2")) == (200, INFO)


def test_bad_tenant_name(gateway):
    status, body = admin("PUT", url(gateway, "tenants/bad%20name"), INFO)
    assert status == 412 and reason(body) == "Tenant name is not valid"
    status, body = admin("GET", url(gateway, "namespaces/bad%20name"))
    assert status == 412 and reason(body) == "Tenant name is not valid"


def test_delete_tenant_with_namespaces(gateway, client_factory, redis_clean):
    admin("PUT", url(gateway, "tenants/acme"), INFO)
    admin("PUT", url(gateway, "namespaces/acme/a"))
    admin("PUT", url(gateway, "namespaces/acme/b"))
    # A legacy (v1) namespace, for topic names with a cluster in them.
    assert admin("PUT", f"{gateway.http_url}/admin/namespaces/acme/standalone/old")[0] == 204
    client = client_factory(gateway.url)
    client.create_producer("persistent://acme/a/orders").send(b"x")
    client.create_producer("persistent://acme/standalone/old/t").send(b"y")
    assert redis_clean.exists(stream_key("persistent://acme/a/orders"))
    status, body = admin("DELETE", url(gateway, "tenants/acme"))
    assert status == 409 and reason(body) == "The tenant still has active namespaces"
    assert admin("GET", url(gateway, "namespaces/acme")) == (
        200,
        ["acme/a", "acme/b", "acme/standalone/old"],
    )
    assert admin("DELETE", url(gateway, "tenants/acme?force=true")) == (204, None)
    assert admin("GET", url(gateway, "tenants/acme"))[0] == 404
    assert admin("GET", url(gateway, "namespaces/acme"))[0] == 404
    assert not redis_clean.exists(stream_key("persistent://acme/a/orders"))
    assert not redis_clean.exists(stream_key("persistent://acme/standalone/old/t"))
    assert not redis_clean.exists(KeySchema().tenant_namespaces("acme"))


# -- namespaces ----------------------------------------------------------------------------


def test_namespace_lifecycle(gateway, redis_clean):
    admin("PUT", url(gateway, "tenants/acme"), INFO)
    assert admin("GET", url(gateway, "namespaces/acme")) == (200, [])
    assert admin("PUT", url(gateway, "namespaces/acme/app")) == (204, None)
    assert admin("GET", url(gateway, "namespaces/acme")) == (200, ["acme/app"])
    status, body = admin("PUT", url(gateway, "namespaces/acme/app"))
    assert status == 409 and reason(body) == "Namespace already exists"
    status, policies = admin("GET", url(gateway, "namespaces/acme/app"))
    assert status == 200
    assert policies["replication_clusters"] == ["standalone"]
    assert policies["backlog_quota_map"] == {}
    assert policies["deleted"] is False
    assert "message_ttl_in_seconds" not in policies  # unset: null, left out
    assert admin("DELETE", url(gateway, "namespaces/acme/app")) == (204, None)
    assert admin("GET", url(gateway, "namespaces/acme")) == (200, [])
    status, body = admin("GET", url(gateway, "namespaces/acme/app"))
    assert status == 404 and reason(body) == "Namespace acme/app does not exist."
    assert admin("DELETE", url(gateway, "namespaces/acme/app"))[0] == 404
    assert not redis_clean.exists(KeySchema().namespace_policies("acme/app"))


def test_namespace_errors(gateway):
    status, body = admin("GET", url(gateway, "namespaces/nobody"))
    assert status == 404 and reason(body) == "Tenant not found"
    status, body = admin("PUT", url(gateway, "namespaces/nobody/ns"))
    assert status == 404 and reason(body) == "Tenant does not exist"
    status, body = admin("PUT", url(gateway, "namespaces/public/bad%20ns"))
    assert status == 412 and reason(body) == "Namespace name is not valid"
    assert admin("GET", url(gateway, "namespaces/public/bad%20ns"))[0] == 412
    assert admin("DELETE", url(gateway, "namespaces/public/bad%20ns"))[0] == 412
    status, body = admin("PUT", url(gateway, "namespaces/public/x"), raw="{oops")
    assert status == 400 and "Invalid JSON" in reason(body)
    status, body = admin("PUT", url(gateway, "namespaces/public/x"), {"message_ttl_in_seconds": -5})
    assert status == 412 and "message_ttl_in_seconds" in reason(body)
    assert admin("GET", url(gateway, "namespaces/public/x"))[0] == 404  # nothing created


def test_create_namespace_with_policies(gateway):
    policies = {
        "message_ttl_in_seconds": 120,
        "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10},
        "deduplicationEnabled": True,
        "backlog_quota_map": {
            "destination_storage": {
                "limitSize": 1024,
                "limitTime": -1,
                "policy": "producer_exception",
            }
        },
        "bundles": {"numBundles": 8},  # a field we do not keep: ignored, as Pulsar's mapper does
    }
    assert admin("PUT", url(gateway, "namespaces/public/withp"), policies) == (204, None)
    status, doc = admin("GET", url(gateway, "namespaces/public/withp"))
    assert status == 200
    assert doc["message_ttl_in_seconds"] == 120
    assert doc["retention_policies"] == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
    assert doc["deduplicationEnabled"] is True
    assert doc["backlog_quota_map"] == {
        "destination_storage": {
            "limit": 1024,
            "limitSize": 1024,
            "limitTime": -1,
            "policy": "producer_exception",
        }
    }
    # The per-policy routes read the same stored values, and their changes show up here.
    assert admin("GET", url(gateway, "namespaces/public/withp/messageTTL")) == (200, 120)
    admin("POST", url(gateway, "namespaces/public/withp/compactionThreshold"), 4096)
    assert admin("GET", url(gateway, "namespaces/public/withp"))[1]["compaction_threshold"] == 4096


def test_delete_namespace_with_topics(gateway, client_factory, redis_clean):
    base = "persistent://public/doomed"
    admin("PUT", url(gateway, "namespaces/public/doomed"))
    admin("PUT", f"{gateway.http_url}/admin/v2/persistent/public/doomed/parts/partitions", 2)
    client = client_factory(gateway.url)
    client.create_producer(f"{base}/plain").send(b"a")
    client.create_producer("non-persistent://public/doomed/np")
    consumer = client.subscribe(f"{base}/parts", "s")
    client.create_producer(f"{base}/parts").send(b"b")
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"b"
    status, body = admin("DELETE", url(gateway, "namespaces/public/doomed"))
    assert status == 409 and reason(body) == "Cannot delete non empty namespace"
    assert redis_clean.exists(stream_key(f"{base}/plain"))
    assert admin("DELETE", url(gateway, "namespaces/public/doomed?force=true")) == (204, None)
    for name in (f"{base}/plain", f"{base}/parts-partition-0", f"{base}/parts-partition-1"):
        assert not redis_clean.exists(stream_key(name)), name
    assert not redis_clean.exists(KeySchema().namespace_topics("public/doomed"))
    assert not redis_clean.exists(KeySchema().namespace_partitioned("public/doomed"))
    assert admin("GET", url(gateway, "namespaces/public")) == (200, ["public/default"])
    assert admin("GET", url(gateway, "namespaces/public/doomed"))[0] == 404
    # The namespace can be made again, empty.
    assert admin("PUT", url(gateway, "namespaces/public/doomed")) == (204, None)
    assert admin("GET", f"{gateway.http_url}/admin/v2/persistent/public/doomed") == (200, [])


def test_clients_and_admin_do_not_create_namespaces(gateway, client_factory):
    client = client_factory(gateway.url, operation_timeout_seconds=5)
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer("persistent://newco/orders/created")
    topics = f"{gateway.http_url}/admin/v2/persistent/newco/orders"
    status, body = admin("PUT", f"{topics}/t1")
    assert status == 404 and reason(body) == "Namespace newco/orders not found"
    assert admin("PUT", f"{topics}/t2/partitions", 3)[0] == 404
    status, body = admin("GET", topics)
    assert status == 404 and reason(body) == "Namespace newco/orders does not exist."
    assert admin("GET", f"{topics}/partitioned")[0] == 404
    assert admin("GET", url(gateway, "tenants/newco"))[0] == 404
    # Once created, the admin API and clients use it.
    admin("PUT", url(gateway, "tenants/newco"), INFO)
    assert admin("PUT", url(gateway, "namespaces/newco/orders")) == (204, None)
    assert admin("PUT", f"{topics}/t1")[0] == 204
    assert admin("PUT", f"{topics}/t2/partitions", 3)[0] == 204
    client.create_producer("persistent://newco/orders/created").send(b"x")
    assert admin("GET", topics) == (
        200,
        [f"persistent://newco/orders/{t}" for t in ("created", "t1")]
        + [f"persistent://newco/orders/t2-partition-{i}" for i in range(3)],
    )


def test_two_gateways_share_tenants(gateway_factory):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    admin("PUT", url(gw_a, "tenants/shared"), INFO)
    assert admin("GET", url(gw_b, "tenants/shared")) == (200, INFO)
    assert admin("PUT", url(gw_b, "namespaces/shared/ns")) == (204, None)
    assert admin("GET", url(gw_a, "namespaces/shared")) == (200, ["shared/ns"])
    assert admin("PUT", url(gw_a, "namespaces/shared/ns"))[0] == 409
    assert admin("DELETE", url(gw_a, "tenants/shared"))[0] == 409
    assert admin("DELETE", url(gw_a, "namespaces/shared/ns")) == (204, None)
    assert admin("DELETE", url(gw_b, "tenants/shared")) == (204, None)
    assert admin("GET", url(gw_a, "tenants/shared"))[0] == 404
    assert admin("GET", url(gw_b, "tenants")) == (200, ["public", "pulsar"])


def test_policies_document_shows_permissions(gateway, redis_clean):
    # The authorization module writes role -> actions in the namespace permissions hash.
    key = KeySchema().namespace_permissions("public/default")
    redis_clean.hset(key, "app", '["produce", "consume"]')
    doc = admin("GET", url(gateway, "namespaces/public/default"))[1]
    assert doc["auth_policies"]["namespace_auth"] == {"app": ["produce", "consume"]}


def test_gateway_keeps_serving_after_bad_requests(gateway):
    for path in ("tenants/%00", "namespaces/public/%2e%2e", "clusters/%ff"):
        assert admin_text("GET", url(gateway, path))[0] in (400, 404, 412)
    assert admin("GET", url(gateway, "tenants"))[0] == 200
