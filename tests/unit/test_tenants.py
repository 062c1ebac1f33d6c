"""Pure parsing and validation of the tenant, namespace, backlog quota and lookup admin
surfaces (no sockets, no Redis)."""

from __future__ import annotations

from typing import Any

import pytest

from pulsar_gateway.adapters.http.admin.tenants import parse_policies, policies_document
from pulsar_gateway.adapters.http.lookup import lookup_data
from pulsar_gateway.core.errors import InvalidNamespaceName, InvalidTenantInfo
from pulsar_gateway.core.policies.backlog_quota import (
    exceeds_retention,
    parse_backlog_quota,
    parse_quota_type,
)
from pulsar_gateway.core.topics.tenants import TenantInfo, check_namespace_name, check_tenant_name

CLUSTERS = ["standalone"]


def test_tenant_info_round_trip_sorted_and_deduplicated():
    info = TenantInfo.from_json(
        {"adminRoles": ["b", "a", "b"], "allowedClusters": ["standalone"], "extra": 1}, CLUSTERS
    )
    assert info == TenantInfo(("a", "b"), ("standalone",))
    assert info.to_json() == {"adminRoles": ["a", "b"], "allowedClusters": ["standalone"]}
    assert TenantInfo.from_json({"adminRoles": None, "allowedClusters": ["standalone"]}, CLUSTERS)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "TenantInfo is null"),
        ({}, "Clusters cannot be null"),
        ({"allowedClusters": []}, "Clusters cannot be empty or blank"),
        ({"allowedClusters": [""]}, "Clusters cannot be empty or blank"),
        ({"allowedClusters": ["standalone", "  "]}, "Clusters cannot be empty or blank"),
        ({"allowedClusters": ["other"]}, "Clusters do not exist"),
        ({"allowedClusters": ["standalone"], "adminRoles": ["r "]}, "AdminRoles contains"),
    ],
)
def test_tenant_info_refused(value: Any, message: str):
    with pytest.raises(InvalidTenantInfo, match=message):
        TenantInfo.from_json(value, CLUSTERS)


@pytest.mark.parametrize(
    "value",
    ["x", 3, [], {"allowedClusters": "standalone"}, {"allowedClusters": [1]}, {"adminRoles": 5}],
)
def test_tenant_info_malformed(value: Any):
    with pytest.raises(ValueError):
        TenantInfo.from_json(value, CLUSTERS)


@pytest.mark.parametrize("name", ["public", "a-b_c.d=e:f", "X9"])
def test_valid_tenant_names(name: str):
    check_tenant_name(name)
    check_namespace_name(f"{name}/{name}")


@pytest.mark.parametrize("name", ["", "a b", "a/b", "é", "a\n", "a*"])
def test_invalid_tenant_names(name: str):
    with pytest.raises(InvalidNamespaceName, match="Tenant name is not valid"):
        check_tenant_name(name)


@pytest.mark.parametrize("name", ["public", "public/", "/default", "a/b/c", "a/b c", "a b/c"])
def test_invalid_namespace_names(name: str):
    with pytest.raises(InvalidNamespaceName, match="Namespace name is not valid"):
        check_namespace_name(name)


def test_backlog_quota_parsing():
    assert parse_backlog_quota(
        {"limitSize": 10, "limitTime": 5, "policy": "producer_exception"}
    ) == {
        "limit": 10,
        "limitSize": 10,
        "limitTime": 5,
        "policy": "producer_exception",
    }
    # The deprecated ``limit`` when ``limitSize`` is absent; 0 and the default policy when
    # absent, as Jackson leaves BacklogQuotaImpl's fields.
    assert parse_backlog_quota({"limit": 7}) == {
        "limit": 7,
        "limitSize": 7,
        "limitTime": 0,
        "policy": "producer_request_hold",
    }
    assert parse_backlog_quota({"limit": 1, "limitSize": 2})["limitSize"] == 2
    assert parse_backlog_quota({"limitSize": -1, "limitTime": -1})["limitSize"] == -1


@pytest.mark.parametrize(
    "value",
    [
        None,
        [],
        {"limitSize": "1"},
        {"limitSize": True},
        {"limitSize": 1.5},
        {"limitSize": 2**63},
        {"limitTime": 2**31},
        {"limitTime": -(2**31) - 1},
        {"policy": "producer_hold"},
        {"policy": 3},
    ],
)
def test_backlog_quota_malformed(value: Any):
    with pytest.raises(ValueError):
        parse_backlog_quota(value)


def test_quota_type():
    assert parse_quota_type(None) == "destination_storage"
    assert parse_quota_type("") == "destination_storage"
    assert parse_quota_type("message_age") == "message_age"
    with pytest.raises(ValueError):
        parse_quota_type("Message_Age")


@pytest.mark.parametrize(
    ("size", "time", "retention", "exceeds"),
    [
        (1024 * 1024, -1, {"retentionSizeInMB": 1, "retentionTimeInMinutes": 0}, True),
        (1024 * 1024 - 1, -1, {"retentionSizeInMB": 1, "retentionTimeInMinutes": 0}, False),
        (1, 60, {"retentionSizeInMB": 0, "retentionTimeInMinutes": 1}, True),
        (1, 59, {"retentionSizeInMB": 0, "retentionTimeInMinutes": 1}, False),
        (10**12, 10**6, {"retentionSizeInMB": -1, "retentionTimeInMinutes": -1}, False),
        (10**12, 10**6, None, False),
    ],
)
def test_exceeds_retention(size: int, time: int, retention: Any, exceeds: bool):
    quota = parse_backlog_quota({"limitSize": size, "limitTime": time})
    assert exceeds_retention(quota, retention) is exceeds


def test_parse_policies_maps_pulsar_fields():
    parsed = parse_policies(
        {
            "message_ttl_in_seconds": 30,
            "deduplicationEnabled": False,
            "retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": 5},
            "compaction_threshold": 100,
            "delayed_delivery_policies": {"active": True, "tickTime": 1000},
            "backlog_quota_map": {"message_age": {"limitTime": 9, "policy": "producer_exception"}},
            "replication_clusters": ["standalone"],
            "schema_compatibility_strategy": None,
        }
    )
    assert parsed["messageTTL"] == 30
    assert parsed["deduplication"] is False
    assert parsed["retention"] == {"retentionTimeInMinutes": -1, "retentionSizeInMB": 5}
    assert parsed["compactionThreshold"] == 100
    assert parsed["delayedDelivery"]["active"] is True
    assert parsed["backlogQuota"]["message_age"]["limitTime"] == 9
    assert set(parsed) == {
        "messageTTL",
        "deduplication",
        "retention",
        "compactionThreshold",
        "delayedDelivery",
        "backlogQuota",
    }
    assert parse_policies(None) == {}
    assert parse_policies({"message_ttl_in_seconds": None}) == {}


@pytest.mark.parametrize(
    "value",
    [
        [],
        {"message_ttl_in_seconds": -1},
        {"deduplicationEnabled": "yes"},
        {"backlog_quota_map": {"wrong_type": {}}},
        {"backlog_quota_map": {"message_age": {"policy": "x"}}},
    ],
)
def test_parse_policies_refuses(value: Any):
    with pytest.raises(ValueError):
        parse_policies(value)


def test_policies_document():
    doc = policies_document(
        {"messageTTL": 5, "backlogQuota": {"message_age": {"limitTime": 1}}},
        "east",
        {"role": ["produce"]},
    )
    assert doc["message_ttl_in_seconds"] == 5
    assert doc["backlog_quota_map"] == {"message_age": {"limitTime": 1}}
    assert doc["replication_clusters"] == ["east"]
    assert doc["auth_policies"]["namespace_auth"] == {"role": ["produce"]}
    assert doc["bundles"] == {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1}
    for unset in ("retention_policies", "deduplicationEnabled", "delayed_delivery_policies"):
        assert unset not in doc


def test_lookup_data():
    assert lookup_data("pulsar://h:1", "http://h:2") == {
        "brokerUrl": "pulsar://h:1",
        "httpUrl": "http://h:2",
        "nativeUrl": "pulsar://h:1",
        "brokerUrlSsl": "",
    }
