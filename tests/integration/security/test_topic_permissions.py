"""Topic-level permissions (``PersistentTopics.grantPermissionsOnTopic``): a grant on one
topic lets a role produce or consume there, with the official client, over REST produce
and WebSocket, and nowhere else in the namespace; a partitioned topic's grant covers its
partitions; GET answers the namespace's grants with the topic's own added."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulsar
import pytest

from tests.adminhttp import admin_as
from tests.conftest import TIMEOUT, GatewayThread
from tests.integration.security.test_auth import SUPERUSER, as_role, grant, secured, token

__all__ = ["secured"]  # the fixture, imported for these tests

_TOPIC_PERMISSIONS = "/admin/v2/persistent/acme/ns1/{topic}/permissions"


def _grant_topic(gw: GatewayThread, topic: str, role: str, actions: list[str]) -> None:
    url = gw.http_url + _TOPIC_PERMISSIONS.format(topic=topic) + f"/{role}"
    assert admin_as(token(SUPERUSER), "POST", url, actions) == (204, None)


def test_a_topic_grant_allows_that_topic_only(
    secured: GatewayThread, client_factory: Callable[..., Any]
) -> None:
    client = as_role(client_factory, secured, "app")
    granted, other = "persistent://acme/ns1/granted", "persistent://acme/ns1/other"
    with pytest.raises(pulsar.AuthorizationError):
        client.create_producer(granted)
    _grant_topic(secured, "granted", "app", ["produce", "consume"])
    consumer = client.subscribe(granted, "s")
    client.create_producer(granted).send(b"topic grant")
    assert consumer.receive(timeout_millis=int(TIMEOUT * 1000)).data() == b"topic grant"
    with pytest.raises(pulsar.AuthorizationError):
        client.create_producer(other)  # the grant is on one topic, not the namespace


def test_get_answers_namespace_and_topic_grants_and_revoke_takes_effect(
    secured: GatewayThread, client_factory: Callable[..., Any]
) -> None:
    su = token(SUPERUSER)
    url = secured.http_url + _TOPIC_PERMISSIONS.format(topic="t1")
    grant(secured, "acme/ns1", "reader", ["consume"])
    _grant_topic(secured, "t1", "writer", ["produce"])
    _grant_topic(secured, "t1", "reader", ["produce"])
    assert admin_as(su, "GET", url) == (
        200,
        {"reader": ["consume", "produce"], "writer": ["produce"]},
    )
    assert admin_as(su, "DELETE", url + "/writer") == (204, None)
    assert admin_as(su, "GET", url) == (200, {"reader": ["consume", "produce"]})
    with pytest.raises(pulsar.AuthorizationError):
        as_role(client_factory, secured, "writer").create_producer("persistent://acme/ns1/t1")


def test_a_partitioned_topic_grant_covers_its_partitions(
    secured: GatewayThread, client_factory: Callable[..., Any]
) -> None:
    su = token(SUPERUSER)
    base = secured.http_url + "/admin/v2/persistent/acme/ns1/parts"
    assert admin_as(su, "PUT", base + "/partitions", 2)[0] == 204
    _grant_topic(secured, "parts", "app", ["produce", "consume"])
    client = as_role(client_factory, secured, "app")
    consumer = client.subscribe("persistent://acme/ns1/parts", "s")
    producer = client.create_producer("persistent://acme/ns1/parts")
    for i in range(4):
        producer.send(f"p{i}".encode(), partition_key=str(i))
    got = sorted(consumer.receive(timeout_millis=int(TIMEOUT * 1000)).data() for _ in range(4))
    assert got == [b"p0", b"p1", b"p2", b"p3"]


def test_rest_produce_honours_a_topic_grant(secured: GatewayThread) -> None:
    url = secured.http_url + "/topics/persistent/acme/ns1/rest-granted"
    body = {"messages": [{"payload": "aGk="}]}
    refused = {"reason": "Client is not authorized to Produce"}
    assert admin_as(token("app"), "POST", url, body) == (403, refused)
    _grant_topic(secured, "rest-granted", "app", ["produce"])
    status, answer = admin_as(token("app"), "POST", url, body)
    assert status == 200, answer
    other = secured.http_url + "/topics/persistent/acme/ns1/rest-other"
    assert admin_as(token("app"), "POST", other, body) == (403, refused)


def test_topic_grants_need_a_tenant_admin_and_valid_actions(secured: GatewayThread) -> None:
    url = secured.http_url + _TOPIC_PERMISSIONS.format(topic="t2") + "/app"
    assert admin_as(token("app"), "POST", url, ["produce"])[0] == 403
    status, body = admin_as(token(SUPERUSER), "POST", url, ["fly"])
    assert status == 400 and "Invalid permissions" in body["reason"]
    missing = secured.http_url + "/admin/v2/persistent/acme/no-ns/t/permissions"
    assert admin_as(token(SUPERUSER), "GET", missing)[0] == 404
