"""What each HTTP path needs (pulsar_gateway.adapters.http.auth.requirement) and the authorization
data
helpers (pulsar_gateway.core.policies.authorization), as data: no sockets, no Redis."""

from __future__ import annotations

import json

import pytest

from pulsar_gateway.adapters.http.auth import Access, Requirement, requirement
from pulsar_gateway.core.policies.authorization import (
    _admin_roles,
    _permissions,
    _roles,
    parse_actions,
)

PUBLIC = ("public", "public/default")


@pytest.mark.parametrize(
    ("path", "query", "expected"),
    [
        ("/metrics", {}, Requirement(Access.OPEN)),
        ("/metrics/", {}, Requirement(Access.OPEN)),
        ("/admin/v2/brokers/health", {}, Requirement(Access.OPEN)),
        (
            "/ws/v2/producer/persistent/public/default/t",
            {},
            Requirement(
                Access.PRODUCE, (PUBLIC,), websocket=True, topics=("persistent://public/default/t",)
            ),
        ),
        (
            "/ws/v2/consumer/non-persistent/acme/ns1/t/my-sub",
            {},
            Requirement(
                Access.CONSUME,
                (("acme", "acme/ns1"),),
                websocket=True,
                topics=("non-persistent://acme/ns1/t",),
                subscription="my-sub",
            ),
        ),
        (
            "/ws/v2/reader/persistent/public/default/t",
            {},
            Requirement(
                Access.CONSUME, (PUBLIC,), websocket=True, topics=("persistent://public/default/t",)
            ),
        ),
        (
            "/ws/v3/consumer/sub",
            {"topics": "persistent://acme/a/t1,acme/b/t2,t3"},
            Requirement(
                Access.CONSUME,
                (("acme", "acme/a"), ("acme", "acme/b"), PUBLIC),
                websocket=True,
                subscription="sub",
            ),
        ),
        (
            "/ws/v3/consumer/sub",
            {"topicsPattern": "persistent://acme/a/t.*"},
            Requirement(Access.CONSUME, (("acme", "acme/a"),), websocket=True, subscription="sub"),
        ),
        (
            "/ws/v3/consumer/sub",
            {"topicsPattern": "t-.*"},
            Requirement(Access.CONSUME, (PUBLIC,), websocket=True, subscription="sub"),
        ),
        # A consumer path without a subscription, an unknown domain, no topics: superuser.
        (
            "/ws/v2/consumer/persistent/public/default/t",
            {},
            Requirement(Access.SUPERUSER, (), True),
        ),
        ("/ws/v2/producer/other/public/default/t", {}, Requirement(Access.SUPERUSER, (), True)),
        ("/ws/v3/consumer/sub", {}, Requirement(Access.SUPERUSER, websocket=True)),
        ("/ws/producer/persistent/p/c/ns/t", {}, Requirement(Access.SUPERUSER, websocket=True)),
        (
            "/topics/persistent/public/default/t",
            {},
            Requirement(Access.PRODUCE, (PUBLIC,), topics=("persistent://public/default/t",)),
        ),
        (
            "/topics/persistent/public/default/t/partitions/2",
            {},
            Requirement(Access.PRODUCE, (PUBLIC,), topics=("persistent://public/default/t",)),
        ),
        ("/topics/persistent/public", {}, Requirement(Access.SUPERUSER)),
        (
            "/lookup/v2/topic/persistent/public/default/t",
            {},
            Requirement(Access.LOOKUP, (PUBLIC,), topics=("persistent://public/default/t",)),
        ),
        (
            "/admin/v2/namespaces/acme/ns1/permissions/app",
            {},
            Requirement(Access.TENANT_ADMIN, (("acme", ""),)),
        ),
        ("/admin/v2/namespaces/acme", {}, Requirement(Access.TENANT_ADMIN, (("acme", ""),))),
        (
            "/admin/v2/persistent/acme/ns1/t/partitions",
            {},
            Requirement(Access.TENANT_ADMIN, (("acme", ""),)),
        ),
        (
            "/admin/v2/non-persistent/acme/ns1",
            {},
            Requirement(Access.TENANT_ADMIN, (("acme", ""),)),
        ),
        (
            "/lookup/v2/destination/persistent/acme/c1/ns1/t",
            {},
            Requirement(Access.LOOKUP, (("acme", "acme/c1/ns1"),)),
        ),
        ("/admin/v2/openapi.json", {}, Requirement(Access.AUTHENTICATED)),
        ("/admin/v2/namespaces", {}, Requirement(Access.SUPERUSER)),
        ("/admin/v2/tenants", {}, Requirement(Access.SUPERUSER)),
        ("/admin/v2/tenants/acme", {}, Requirement(Access.SUPERUSER)),
        ("/admin/v2/clusters/standalone", {}, Requirement(Access.SUPERUSER)),
        ("/admin/v2/brokers/standalone", {}, Requirement(Access.SUPERUSER)),
        ("/admin/v2/fleet", {}, Requirement(Access.SUPERUSER)),
        (
            "/admin/v2/persistent/acme/ns1/t/subscription/s/peek",
            {"count": "5"},
            Requirement(Access.TENANT_ADMIN, (("acme", ""),)),
        ),
        (
            "/admin/v2/persistent/acme/ns1/t/subscription/s/scheduled/histogram",
            {},
            Requirement(Access.TENANT_ADMIN, (("acme", ""),)),
        ),
        ("/admin/v3/namespaces/acme", {}, Requirement(Access.SUPERUSER)),
        ("/", {}, Requirement(Access.OPEN)),  # the web console's page
        ("/console/js/app.js", {}, Requirement(Access.OPEN)),
        ("/consoles", {}, Requirement(Access.SUPERUSER)),
        ("/anything/else", {}, Requirement(Access.SUPERUSER)),
    ],
)
def test_requirement(path: str, query: dict[str, str], expected: Requirement) -> None:
    assert requirement(path, query) == expected


def test_metrics_and_health_need_a_token_when_asked() -> None:
    for path in ("/metrics", "/admin/v2/brokers/health"):
        assert requirement(path, {}, authenticate_metrics=True) == Requirement(Access.AUTHENTICATED)


def test_segments_are_decoded_one_by_one() -> None:
    # %2F stays inside its segment, as the router matches {tenant}: no path smuggling.
    need = requirement("/admin/v2/namespaces/acme%2Fother/ns", {})
    assert need == Requirement(Access.TENANT_ADMIN, (("acme/other", ""),))
    need = requirement("/ws/v2/producer/persistent/pub%6cic/default/t", {})
    assert need.namespaces == (PUBLIC,)


def test_parse_actions() -> None:
    assert parse_actions(["produce", "consume", "produce"]) == ["consume", "produce"]
    assert parse_actions([]) == []
    for bad in ("produce", {"produce": True}, ["produce", "write"], [1], None):
        with pytest.raises(ValueError):
            parse_actions(bad)


def test_admin_roles_of_tenant_info() -> None:
    info = json.dumps({"adminRoles": ["alice", "bob"], "allowedClusters": ["standalone"]})
    assert _admin_roles(info.encode()) == {"alice", "bob"}
    for raw in (None, b"not json", b"[]", b'{"adminRoles": "alice"}', b"{}"):
        assert _admin_roles(raw) == frozenset()


def test_permissions_hash() -> None:
    # as policy_store.stored_values decodes the HGETALL reply: role -> stored JSON
    raw = {"app": b'["produce"]', "bad": b"nope", "other": b'["consume", "produce"]'}
    assert _permissions(raw) == {
        "app": frozenset({"produce"}),
        "other": frozenset({"consume", "produce"}),
    }


def test_subscription_roles_value() -> None:
    assert _roles(b'["app", "ops"]') == {"app", "ops"}
    assert _roles(b'["app", 3]') == {"app"}
    for raw in (None, b"not json", b"{}", b'"app"'):
        assert _roles(raw) == frozenset()
