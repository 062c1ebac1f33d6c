"""Namespace and topic policies over the admin REST API, shared by a fleet of gateways."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.conftest import TIMEOUT, wait_for


def _request(method: str, url: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            payload = resp.read()
            return resp.status, json.loads(payload) if payload else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize(
    ("segment", "value"),
    [
        ("deduplication", True),
        ("messageTTL", 30),
        ("retention", {"retentionTimeInMinutes": 10, "retentionSizeInMB": -1}),
        ("compactionThreshold", 1048576),
        ("maxUnackedMessagesPerConsumer", 500),
        ("maxUnackedMessagesPerSubscription", 0),
    ],
)
def test_namespace_policy_set_get_delete(gateway, segment, value):
    url = f"{gateway.http_url}/admin/v2/namespaces/public/default/{segment}"
    assert _request("GET", url) == (200, None)
    assert _request("POST", url, value) == (204, None)
    assert _request("GET", url) == (200, value)
    assert _request("DELETE", url) == (204, None)
    assert _request("GET", url) == (200, None)


def test_topic_policy_overrides_namespace(gateway):
    base = f"{gateway.http_url}/admin/v2"
    policies = gateway.gateway.services.policies
    topic = "persistent://public/default/policy-t"
    assert _request("POST", f"{base}/namespaces/public/default/messageTTL", 60)[0] == 204
    assert gateway.call(policies.effective(topic, "messageTTL")) == 60
    # Pulsar takes the topic-level TTL from the query string.
    status, _ = _request(
        "POST", f"{base}/persistent/public/default/policy-t/messageTTL?messageTTL=5"
    )
    assert status == 204
    assert _request("GET", f"{base}/persistent/public/default/policy-t/messageTTL") == (200, 5)
    assert gateway.call(policies.effective(topic, "messageTTL")) == 5
    # A partition reads its partitioned topic's policies.
    assert gateway.call(policies.effective(topic + "-partition-2", "messageTTL")) == 5
    assert _request("DELETE", f"{base}/persistent/public/default/policy-t/messageTTL")[0] == 204
    assert gateway.call(policies.effective(topic, "messageTTL")) == 60
    url = f"{base}/persistent/public/default/policy-t/deduplicationEnabled"
    assert _request("POST", url, True) == (204, None)
    assert gateway.call(policies.effective(topic, "deduplication")) is True


def test_policy_change_reaches_other_gateways(gateway_factory):
    first, second = gateway_factory(), gateway_factory()
    topic = "persistent://public/default/fleet-policy"
    other = second.gateway.services.policies
    assert second.call(other.effective(topic, "deduplication")) is None  # now cached
    url = f"{first.http_url}/admin/v2/namespaces/public/default/deduplication"
    assert _request("POST", url, True)[0] == 204
    # The cache of the second gateway is dropped by the change notification, well before
    # its lifetime runs out.
    wait_for(lambda: second.call(other.effective(topic, "deduplication")) is True, timeout=2)


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("namespaces/public/default/deduplication", b"yes", 400),
        ("namespaces/public/default/deduplication", b"1", 412),
        ("namespaces/public/default/messageTTL", b"-5", 412),
        ("namespaces/public/default/messageTTL", b'"10"', 412),
        ("namespaces/public/default/retention", b'{"retentionTimeInMinutes": -2}', 412),
        ("namespaces/public/default/retention", b"[]", 412),
        ("persistent/public/default/t/messageTTL", b"5", 412),  # query parameter missing
        ("namespaces/public/bad%20ns/messageTTL", b"5", 412),
    ],
)
def test_invalid_policy_values_are_refused(gateway, path, body, status):
    code, reply = _request("POST", f"{gateway.http_url}/admin/v2/{path}", raw=body)
    assert code == status
    assert isinstance(reply, dict)
    assert reply["reason"]
    # nothing was stored
    assert (
        gateway.call(gateway.gateway.services.policies.namespace_policies("public/default")) == {}
    )
