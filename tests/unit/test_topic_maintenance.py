"""Policy values of topic maintenance (Pulsar admin JSON shapes), without Redis."""

from __future__ import annotations

from pulsar_gateway.core.policies.retention import parse_retention, parse_ttl


def test_retention_policy_values() -> None:
    assert parse_retention({"retentionTimeInMinutes": 5, "retentionSizeInMB": -1}) == (5, -1)
    assert parse_retention({"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}) == (0, 0)
    assert parse_retention({"retentionTimeInMinutes": 5}) is None
    assert parse_retention({"retentionTimeInMinutes": -2, "retentionSizeInMB": 0}) is None
    assert parse_retention({"retentionTimeInMinutes": True, "retentionSizeInMB": 0}) is None
    assert parse_retention([5, 5]) is None


def test_message_ttl_policy_values() -> None:
    assert parse_ttl(30) == 30
    assert parse_ttl(0) == 0
    assert parse_ttl(-1) is None
    assert parse_ttl("30") is None
    assert parse_ttl(True) is None
