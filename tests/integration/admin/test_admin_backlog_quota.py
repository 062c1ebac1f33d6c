"""Backlog quota admin endpoints at namespace and topic level (Pulsar admin REST v2)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.adminhttp import admin

NS = "namespaces/public/default"
TOPIC = "persistent/public/default/quota-topic"


def url(gw: Any, path: str) -> str:
    return f"{gw.http_url}/admin/v2/{path}"


def reason(body: Any) -> str:
    assert isinstance(body, dict) and set(body) == {"reason"}, body
    return str(body["reason"])


def stored(size: int, time: int, policy: str) -> dict[str, Any]:
    return {"limit": size, "limitSize": size, "limitTime": time, "policy": policy}


@pytest.mark.parametrize("scope", [NS, TOPIC])
def test_set_get_remove(gateway, scope):
    assert admin("GET", url(gateway, f"{scope}/backlogQuotaMap")) == (200, {})
    quota = {"limitSize": 10_737_418_240, "limitTime": -1, "policy": "producer_request_hold"}
    # No backlogQuotaType: destination_storage, as Pulsar defaults it.
    assert admin("POST", url(gateway, f"{scope}/backlogQuota"), quota) == (204, None)
    age = {"limitTime": 3600, "policy": "producer_exception"}
    path = f"{scope}/backlogQuota?backlogQuotaType=message_age"
    assert admin("POST", url(gateway, path), age) == (204, None)
    assert admin("GET", url(gateway, f"{scope}/backlogQuotaMap")) == (
        200,
        {
            "destination_storage": stored(10_737_418_240, -1, "producer_request_hold"),
            "message_age": stored(0, 3600, "producer_exception"),
        },
    )
    path = f"{scope}/backlogQuota?backlogQuotaType=destination_storage"
    assert admin("DELETE", url(gateway, path)) == (204, None)
    assert admin("GET", url(gateway, f"{scope}/backlogQuotaMap")) == (
        200,
        {"message_age": stored(0, 3600, "producer_exception")},
    )
    assert (
        admin("DELETE", url(gateway, f"{scope}/backlogQuota?backlogQuotaType=message_age"))[0]
        == 204
    )
    assert admin("GET", url(gateway, f"{scope}/backlogQuotaMap")) == (200, {})


def test_deprecated_limit_field_and_policies_document(gateway):
    admin(
        "POST", url(gateway, f"{NS}/backlogQuota"), {"limit": 2048, "policy": "producer_exception"}
    )
    expected = {"destination_storage": stored(2048, 0, "producer_exception")}
    assert admin("GET", url(gateway, f"{NS}/backlogQuotaMap")) == (200, expected)
    assert admin("GET", url(gateway, NS))[1]["backlog_quota_map"] == expected


def test_topic_applied_falls_back_to_namespace(gateway, gateway_factory):
    ns_quota = {"limitSize": 100, "limitTime": -1, "policy": "consumer_backlog_eviction"}
    admin("POST", url(gateway, f"{NS}/backlogQuota"), ns_quota)
    ns_map = {"destination_storage": stored(100, -1, "consumer_backlog_eviction")}
    assert admin("GET", url(gateway, f"{TOPIC}/backlogQuotaMap")) == (200, {})
    assert admin("GET", url(gateway, f"{TOPIC}/backlogQuotaMap?applied=true")) == (200, ns_map)
    admin(
        "POST",
        url(gateway, f"{TOPIC}/backlogQuota"),
        {"limitSize": 5, "policy": "producer_exception"},
    )
    topic_map = {"destination_storage": stored(5, 0, "producer_exception")}
    # Another gateway sees both levels.
    other = gateway_factory()
    assert admin("GET", url(other, f"{TOPIC}/backlogQuotaMap?applied=true")) == (200, topic_map)
    assert admin("GET", url(other, f"{NS}/backlogQuotaMap")) == (200, ns_map)


@pytest.mark.parametrize(
    ("query", "body", "raw", "status", "text"),
    [
        ("?backlogQuotaType=bogus", {"limitSize": 1}, None, 400, "backlogQuotaType"),
        ("", {"limitSize": 1, "policy": "drop_everything"}, None, 400, "policy"),
        ("", {"limitSize": "big"}, None, 400, "limitSize"),
        ("", {"limitTime": 2**31}, None, 400, "limitTime"),
        ("", [1], None, 400, "BacklogQuota"),
        ("", None, "{bad", 400, "Invalid JSON"),
        ("", None, None, 400, "BacklogQuota is required"),
    ],
)
@pytest.mark.parametrize("scope", [NS, TOPIC])
def test_bad_quotas(gateway, scope, query, body, raw, status, text):
    got, answer = admin("POST", url(gateway, f"{scope}/backlogQuota{query}"), body, raw)
    assert got == status and text in reason(answer)
    assert admin("GET", url(gateway, f"{scope}/backlogQuotaMap")) == (200, {})


def test_quota_must_stay_below_retention(gateway):
    admin(
        "POST",
        url(gateway, f"{NS}/retention"),
        {"retentionTimeInMinutes": 10, "retentionSizeInMB": 1},
    )
    too_big = {"limitSize": 1024 * 1024, "limitTime": -1, "policy": "producer_exception"}
    status, body = admin("POST", url(gateway, f"{NS}/backlogQuota"), too_big)
    assert status == 412
    assert reason(body) == (
        "Backlog Quota exceeds configured retention quota for namespace. "
        "Please increase retention quota and retry"
    )
    too_old = {"limitSize": 1, "limitTime": 600, "policy": "producer_exception"}
    assert admin("POST", url(gateway, f"{NS}/backlogQuota"), too_old)[0] == 412
    # A topic inherits its namespace's retention as the bound.
    status, body = admin("POST", url(gateway, f"{TOPIC}/backlogQuota"), too_big)
    assert status == 412 and "for topic" in reason(body)
    fits = {"limitSize": 1024, "limitTime": 60, "policy": "producer_exception"}
    assert admin("POST", url(gateway, f"{NS}/backlogQuota"), fits) == (204, None)


def test_missing_namespace_and_bad_names(gateway):
    status, body = admin("GET", url(gateway, "namespaces/public/nowhere/backlogQuotaMap"))
    assert status == 404 and reason(body) == "Namespace does not exist"
    quota = {"limitSize": 1, "policy": "producer_exception"}
    assert admin("POST", url(gateway, "namespaces/public/nowhere/backlogQuota"), quota)[0] == 404
    assert admin("DELETE", url(gateway, "namespaces/public/nowhere/backlogQuota"))[0] == 404
    assert admin("GET", url(gateway, "namespaces/public/bad%20ns/backlogQuotaMap"))[0] == 412
    status, body = admin("GET", url(gateway, "persistent/bad%20t/default/x/backlogQuotaMap"))
    assert status == 412 and reason(body) == "Topic name is not valid"
