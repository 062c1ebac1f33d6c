"""Subscription permissions and ``subscriptionAuthMode`` (Pulsar's
``auth_policies.subscription_auth_roles`` and ``PulsarAuthorizationProvider.canConsumeAsync``):
the admin API that lists, grants and revokes the roles of a subscription, and their
enforcement on the official client's SUBSCRIBE and on WebSocket handshakes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pulsar
import pytest

from tests.adminhttp import admin_as
from tests.conftest import TIMEOUT, GatewayThread
from tests.integration.security.test_auth import (
    SUPERUSER,
    TENANT_ADMIN,
    as_role,
    grant,
    secured,
    token,
    ws_status,
)
from tests.wsclient import refused, ws_url

__all__ = ["secured"]  # the fixture, imported for these tests

NS = "/admin/v2/namespaces/acme/ns1"
TOPIC = "persistent://acme/ns1/orders"


def _grant_subscription(gw: GatewayThread, subscription: str, roles: list[str]) -> None:
    url = f"{gw.http_url}{NS}/permissions/subscription/{subscription}"
    assert admin_as(token(SUPERUSER), "POST", url, roles) == (204, None)


def round_trip(client: Any, topic: str, subscription: str) -> None:
    """Subscribe, produce one message, receive and acknowledge it, close the consumer."""
    consumer = client.subscribe(topic, subscription)
    client.create_producer(topic).send(subscription.encode())
    message = consumer.receive(timeout_millis=int(TIMEOUT * 1000))
    assert message.data() == subscription.encode()
    consumer.acknowledge(message)
    consumer.close()


def _subscription_roles(gw: GatewayThread) -> Any:
    status, body = admin_as(token(SUPERUSER), "GET", f"{gw.http_url}{NS}/permissions/subscription")
    assert status == 200, body
    return body


def test_grant_list_and_revoke_subscription_roles(secured: GatewayThread) -> None:
    su = token(SUPERUSER)
    assert _subscription_roles(secured) == {}
    _grant_subscription(secured, "billing", ["app", "ops", "app"])
    _grant_subscription(secured, "audit", ["auditor"])
    assert _subscription_roles(secured) == {"audit": ["auditor"], "billing": ["app", "ops"]}
    # the namespace's Policies document shows them (auth_policies.subscription_auth_roles)
    status, policies = admin_as(su, "GET", secured.http_url + NS)
    assert status == 200
    assert policies["auth_policies"]["subscription_auth_roles"] == _subscription_roles(secured)
    # a grant replaces the subscription's roles
    _grant_subscription(secured, "audit", ["auditor", "ops"])
    assert _subscription_roles(secured)["audit"] == ["auditor", "ops"]
    # revoke one role: Pulsar's path (the admin client's), and the one beside the grant's
    url = f"{secured.http_url}{NS}/permissions"
    assert admin_as(su, "DELETE", f"{url}/billing/app") == (204, None)
    assert admin_as(su, "DELETE", f"{url}/subscription/audit/ops") == (204, None)
    assert _subscription_roles(secured) == {"audit": ["auditor"], "billing": ["ops"]}
    # the last role gone, the subscription stays listed with none (it restricts nothing)
    assert admin_as(su, "DELETE", f"{url}/billing/ops") == (204, None)
    assert _subscription_roles(secured)["billing"] == []
    assert admin_as(su, "DELETE", f"{url}/nowhere/app") == (
        404,
        {"reason": "couldn't find subscription"},
    )


def test_subscription_role_admin_needs_a_tenant_admin_and_a_list(secured: GatewayThread) -> None:
    url = f"{secured.http_url}{NS}/permissions/subscription/billing"
    assert admin_as(token("app"), "POST", url, ["app"])[0] == 403
    assert (
        admin_as(token("app"), "GET", f"{secured.http_url}{NS}/permissions/subscription")[0] == 403
    )
    assert admin_as(token(TENANT_ADMIN), "POST", url, ["app"]) == (204, None)
    for bad in ("app", {"app": True}, [1], None):
        status, body = admin_as(token(SUPERUSER), "POST", url, bad)
        assert status == 400 and "Invalid roles" in body["reason"], (bad, status, body)
    missing = f"{secured.http_url}/admin/v2/namespaces/acme/no-ns/permissions/subscription"
    assert admin_as(token(SUPERUSER), "GET", missing)[0] == 404
    assert admin_as(token(SUPERUSER), "POST", f"{missing}/billing", ["app"])[0] == 404


def test_only_listed_roles_consume_a_subscription(
    secured: GatewayThread, client_factory: Callable[..., Any]
) -> None:
    for role in ("app", "billing"):
        grant(secured, "acme/ns1", role, ["produce", "consume"])
    _grant_subscription(secured, "orders-sub", ["billing"])
    app = as_role(client_factory, secured, "app")
    with pytest.raises(pulsar.AuthorizationError):
        app.subscribe(TOPIC, "orders-sub")
    round_trip(app, TOPIC, "app-own")  # other subscriptions are not restricted
    round_trip(as_role(client_factory, secured, "billing"), TOPIC, "orders-sub")
    # superusers and tenant admins are never restricted (allowTopicOperationAsync)
    for role in (SUPERUSER, TENANT_ADMIN):
        as_role(client_factory, secured, role).subscribe(TOPIC, "orders-sub").close()
    # the roles listed still need the consume grant
    _grant_subscription(secured, "orders-sub", ["billing", "stranger"])
    with pytest.raises(pulsar.AuthorizationError):
        as_role(client_factory, secured, "stranger").subscribe(TOPIC, "orders-sub")
    # an empty list restricts nothing
    _grant_subscription(secured, "orders-sub", [])
    app.subscribe(TOPIC, "orders-sub").close()


def test_prefix_mode_needs_subscriptions_named_after_the_role(
    secured: GatewayThread, client_factory: Callable[..., Any]
) -> None:
    grant(secured, "acme/ns1", "app", ["produce", "consume"])
    mode = f"{secured.http_url}{NS}/subscriptionAuthMode"
    assert admin_as(token(SUPERUSER), "POST", mode, "Prefix") == (204, None)
    app = as_role(client_factory, secured, "app")
    with pytest.raises(pulsar.AuthorizationError):
        app.subscribe(TOPIC, "orders")
    round_trip(app, TOPIC, "app-orders")
    # a tenant admin is not held to it
    as_role(client_factory, secured, TENANT_ADMIN).subscribe(TOPIC, "orders").close()
    # the mode applies only in its namespace
    grant(secured, "acme/ns2", "app", ["produce", "consume"])
    round_trip(app, "persistent://acme/ns2/orders", "orders")
    assert admin_as(token(SUPERUSER), "POST", mode, "None") == (204, None)
    app.subscribe(TOPIC, "orders").close()


def test_websocket_consumers_are_checked_before_the_upgrade(secured: GatewayThread) -> None:
    grant(secured, "acme/ns1", "app", ["consume"])
    _grant_subscription(secured, "billing", ["billing"])

    def consumer(subscription: str) -> str:
        path = f"/ws/v2/consumer/persistent/acme/ns1/orders/{subscription}"
        return ws_url(secured, path, token=token("app"))

    assert asyncio.run(refused(consumer("billing"))) == (403, {"reason": "Not authorized"})
    v3 = ws_url(secured, "/ws/v3/consumer/billing", topics=TOPIC, token=token("app"))
    assert asyncio.run(refused(v3)) == (403, {"reason": "Not authorized"})
    assert asyncio.run(ws_status(consumer("mine"))) == 101
    mode = f"{secured.http_url}{NS}/subscriptionAuthMode"
    assert admin_as(token(SUPERUSER), "POST", mode, "Prefix") == (204, None)
    status, body = asyncio.run(refused(consumer("mine")))
    assert status == 403
    assert body["reason"] == (
        "Failed to create consumer - The subscription name needs to be prefixed by the"
        f" authentication role, like app-xxxx for topic: {TOPIC}"
    )
    assert asyncio.run(ws_status(consumer("app-mine"))) == 101


def test_a_deleted_namespace_forgets_its_subscription_roles(secured: GatewayThread) -> None:
    su, ns = token(SUPERUSER), f"{secured.http_url}/admin/v2/namespaces/acme/ns3"
    assert admin_as(su, "PUT", ns)[0] == 204
    assert admin_as(su, "POST", f"{ns}/permissions/subscription/s", ["app"])[0] == 204
    assert admin_as(su, "GET", f"{ns}/permissions/subscription") == (200, {"s": ["app"]})
    assert admin_as(su, "DELETE", ns)[0] == 204
    assert admin_as(su, "PUT", ns)[0] == 204
    assert admin_as(su, "GET", f"{ns}/permissions/subscription") == (200, {})
