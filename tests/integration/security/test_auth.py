"""Token authentication and authorization end to end: the official client with
``pulsar.AuthenticationToken``, the admin REST API with ``Authorization: Bearer``, WebSocket
handshakes (aiohttp), on a real redis-server. Tokens are signed here with PyJWT."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import jwt
import pulsar
import pytest
import redis

from pulsar_gateway.core.storage.keys import KeySchema
from tests.adminhttp import admin_as
from tests.conftest import TIMEOUT, GatewayThread

SECRET = b"integration-secret-0123456789abcdef"  # >= 32 bytes for HS256
SUPERUSER = "admin"
TENANT_ADMIN = "acme-admin"
PERMISSIONS = "/admin/v2/namespaces/{ns}/permissions"


def token(role: str, key: bytes = SECRET, **claims: Any) -> str:
    return jwt.encode({"sub": role, **claims}, key, algorithm="HS256")


@pytest.fixture
def secured(gateway_factory: Callable[..., GatewayThread]) -> GatewayThread:
    """A gateway with authentication and authorization on, one superuser, and a tenant
    ``acme`` (namespaces ns1, ns2) whose TenantInfo names an admin."""
    gw = gateway_factory(
        authentication_enabled=True,
        authorization_enabled=True,
        superuser_roles=(SUPERUSER,),
        token_secret_key="data:;base64," + base64.b64encode(SECRET).decode(),
    )
    info = {"adminRoles": [TENANT_ADMIN], "allowedClusters": ["standalone"]}
    su = token(SUPERUSER)
    assert admin_as(su, "PUT", gw.http_url + "/admin/v2/tenants/acme", info)[0] == 204
    for ns in ("ns1", "ns2"):
        assert admin_as(su, "PUT", gw.http_url + f"/admin/v2/namespaces/acme/{ns}")[0] == 204
    return gw


def refreshing(gateway_factory: Callable[..., GatewayThread]) -> GatewayThread:
    """A gateway with token authentication that checks tokens for expiry every second."""
    return gateway_factory(
        authentication_enabled=True,
        token_secret_key="data:;base64," + base64.b64encode(SECRET).decode(),
        authentication_refresh_check_seconds=1.0,
    )


def as_role(client_factory: Callable[..., Any], gw: GatewayThread, role: str, **kw: Any) -> Any:
    return client_factory(gw.url, authentication=pulsar.AuthenticationToken(token(role)), **kw)


def grant(gw: GatewayThread, namespace: str, role: str, actions: list[str]) -> None:
    url = gw.http_url + PERMISSIONS.format(ns=namespace) + f"/{role}"
    assert admin_as(token(SUPERUSER), "POST", url, actions) == (204, None)


def round_trip(client: Any, topic: str, sub: str = "s") -> None:
    consumer = client.subscribe(topic, sub)
    producer = client.create_producer(topic)
    producer.send(b"hello")
    message = consumer.receive(timeout_millis=int(TIMEOUT * 1000))
    assert message.data() == b"hello"
    consumer.acknowledge(message)


# -- binary protocol -------------------------------------------------------------------------


def test_superuser_token_produces_and_consumes(
    secured: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    round_trip(as_role(client_factory, secured, SUPERUSER), topic)


def test_bad_or_missing_token_is_refused(
    secured: GatewayThread,
    client_factory: Callable[..., Any],
    topic: str,
    redis_clean: redis.Redis,
) -> None:
    # The C++ client treats ERROR before CONNECTED as a disconnect and retries until the
    # operation timeout (docs/binary_protocol.md "Handshake and authentication"): it cannot
    # tell the user why.
    forged = pulsar.AuthenticationToken(token(SUPERUSER, key=b"not-the-secret-0123456789abcdef!"))
    expired = pulsar.AuthenticationToken(token(SUPERUSER, exp=1))
    for auth in (forged, expired, None):
        kw: dict[str, Any] = {"operation_timeout_seconds": 1}
        if auth is not None:
            kw["authentication"] = auth
        client = client_factory(secured.url, **kw)
        with pytest.raises((pulsar.Timeout, pulsar.ConnectError, pulsar.AuthenticationError)):
            client.create_producer(topic)
    # Each attempt was answered ERROR(AuthenticationError); no producer reached the topic.
    assert b'error="AuthenticationError"' in secured.gateway.services.metrics.render()
    assert not redis_clean.exists(KeySchema().topic(topic).producers)


def test_role_without_permission_is_refused_until_granted(
    secured: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    client = as_role(client_factory, secured, "app")
    with pytest.raises(pulsar.AuthorizationError):
        client.create_producer(topic)
    with pytest.raises(pulsar.AuthorizationError):
        client.subscribe(topic, "s")

    grant(secured, "public/default", "app", ["consume"])
    consumer = client.subscribe(topic, "s")  # consume is enough to look up and subscribe
    with pytest.raises(pulsar.AuthorizationError):
        client.create_producer(topic)

    grant(secured, "public/default", "app", ["produce", "consume"])
    producer = client.create_producer(topic)
    producer.send(b"granted")
    assert consumer.receive(timeout_millis=int(TIMEOUT * 1000)).data() == b"granted"


def test_produce_only_role_cannot_subscribe(
    secured: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    grant(secured, "public/default", "writer", ["produce"])
    client = as_role(client_factory, secured, "writer")
    client.create_producer(topic).send(b"x")
    with pytest.raises(pulsar.AuthorizationError):
        client.subscribe(topic, "s")


def test_revoke_refuses_new_producers(
    secured: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    grant(secured, "public/default", "app", ["produce"])
    client = as_role(client_factory, secured, "app")
    client.create_producer(topic)
    url = secured.http_url + PERMISSIONS.format(ns="public/default") + "/app"
    assert admin_as(token(SUPERUSER), "DELETE", url) == (204, None)
    with pytest.raises(pulsar.AuthorizationError):
        client.create_producer(topic)


def test_tenant_admin_produces_and_consumes_in_its_tenant_only(
    secured: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    client = as_role(client_factory, secured, TENANT_ADMIN)
    local = topic.rsplit("/", 1)[-1]
    round_trip(client, f"persistent://acme/ns1/{local}")
    with pytest.raises(pulsar.AuthorizationError):
        client.create_producer(f"persistent://public/default/{local}")


def test_permissions_are_per_namespace(
    secured: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    grant(secured, "acme/ns1", "app", ["produce", "consume"])
    client = as_role(client_factory, secured, "app")
    local = topic.rsplit("/", 1)[-1]
    round_trip(client, f"persistent://acme/ns1/{local}")
    with pytest.raises(pulsar.AuthorizationError):
        client.create_producer(f"persistent://acme/ns2/{local}")


def test_partitioned_topic_needs_the_same_permission(
    secured: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    url = f"{secured.http_url}/admin/v2/persistent/public/default/{topic}"
    assert admin_as(token(SUPERUSER), "PUT", url + "/partitions", 2) == (204, None)
    client = as_role(client_factory, secured, "app")
    with pytest.raises(pulsar.AuthorizationError):
        client.create_producer(topic)
    grant(secured, "public/default", "app", ["produce", "consume"])
    round_trip(client, topic)


# -- admin REST --------------------------------------------------------------------------------


def test_admin_api_needs_a_valid_token(secured: GatewayThread) -> None:
    url = secured.http_url + PERMISSIONS.format(ns="public/default")
    for credentials in (None, token(SUPERUSER, key=b"x" * 32), token(SUPERUSER, exp=1), "junk"):
        status, body = admin_as(credentials, "GET", url)
        assert (status, body) == (401, {"reason": "Authentication required"})
    assert admin_as(token(SUPERUSER), "GET", url) == (200, {})


def test_admin_api_authorization(secured: GatewayThread) -> None:
    acme = secured.http_url + PERMISSIONS.format(ns="acme/ns1")
    refused = {"reason": "Don't have permission to administrate resources on this tenant"}
    # A role with no admin rights on the tenant, even with produce/consume there.
    grant(secured, "acme/ns1", "app", ["produce", "consume"])
    assert admin_as(token("app"), "GET", acme) == (403, refused)
    assert admin_as(token("app"), "POST", acme + "/app", ["produce"]) == (403, refused)
    # The tenant's admin and a superuser may.
    expected = {"app": ["consume", "produce"]}
    assert admin_as(token(TENANT_ADMIN), "GET", acme) == (200, expected)
    assert admin_as(token(SUPERUSER), "GET", acme) == (200, expected)
    assert admin_as(token(TENANT_ADMIN), "POST", acme + "/other", ["consume"]) == (204, None)
    assert admin_as(token(TENANT_ADMIN), "DELETE", acme + "/app") == (204, None)
    assert admin_as(token(TENANT_ADMIN), "GET", acme) == (200, {"other": ["consume"]})
    # A tenant admin administers only its own tenant; tenants and clusters need a superuser.
    public = secured.http_url + PERMISSIONS.format(ns="public/default")
    assert admin_as(token(TENANT_ADMIN), "GET", public) == (403, refused)
    superuser_only = {"reason": "This operation requires super-user access"}
    for path in ("/admin/v2/tenants", "/admin/v2/tenants/acme", "/admin/v2/clusters"):
        assert admin_as(token(TENANT_ADMIN), "GET", secured.http_url + path) == (
            403,
            superuser_only,
        )


def test_grant_body_is_validated(secured: GatewayThread) -> None:
    url = secured.http_url + PERMISSIONS.format(ns="public/default") + "/app"
    for body in ("produce", ["produce", "write"], {"actions": ["produce"]}):
        status, reply = admin_as(token(SUPERUSER), "POST", url, body)
        assert status == 400 and "Invalid permissions" in reply["reason"]
    bad_ns = secured.http_url + PERMISSIONS.format(ns="public/bad%2Aname")
    status, reply = admin_as(token(SUPERUSER), "GET", bad_ns)
    assert (status, reply) == (412, {"reason": "Namespace name is not valid"})
    missing = secured.http_url + PERMISSIONS.format(ns="acme/missing")
    for method, url, body in (("GET", missing, None), ("POST", missing + "/app", ["produce"])):
        status, reply = admin_as(token(SUPERUSER), method, url, body)
        assert status == 404 and "does not exist" in reply["reason"]


def test_permissions_api_without_authentication(
    gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    """Off by default: no token asked anywhere; the permissions API still stores grants."""
    url = gateway.http_url + PERMISSIONS.format(ns="public/default")
    assert admin_as(None, "POST", url + "/app", ["produce"]) == (204, None)
    assert admin_as(None, "GET", url) == (200, {"app": ["produce"]})
    round_trip(client_factory(gateway.url), topic)


# -- metrics and health ----------------------------------------------------------------------


async def get_status(url: str, headers: dict[str, str] | None = None) -> int:
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url, headers=headers) as resp,
    ):
        await resp.read()
        return resp.status


def test_metrics_and_health_are_open_by_default(secured: GatewayThread) -> None:
    assert asyncio.run(get_status(secured.http_url + "/metrics")) == 200
    assert asyncio.run(get_status(secured.http_url + "/admin/v2/brokers/health")) == 200


def test_metrics_endpoint_can_require_a_token(
    gateway_factory: Callable[..., GatewayThread],
) -> None:
    gw = gateway_factory(
        authentication_enabled=True,
        token_secret_key=base64.b64encode(SECRET).decode(),
        authenticate_metrics_endpoint=True,
    )
    for path in ("/metrics", "/admin/v2/brokers/health"):
        assert asyncio.run(get_status(gw.http_url + path)) == 401
        headers = {"Authorization": f"Bearer {token('anyone')}"}
        assert asyncio.run(get_status(gw.http_url + path, headers)) == 200


def test_authentication_without_authorization_lets_any_valid_role_in(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    gw = gateway_factory(
        authentication_enabled=True, token_secret_key=base64.b64encode(SECRET).decode()
    )
    round_trip(as_role(client_factory, gw, "anyone"), topic)
    url = gw.http_url + PERMISSIONS.format(ns="public/default")
    assert admin_as(token("anyone"), "GET", url) == (200, {})
    assert admin_as(None, "GET", url)[0] == 401


# -- WebSocket and REST produce ----------------------------------------------------------------


async def ws_status(url: str, headers: dict[str, str] | None = None) -> int:
    """The handshake's status: 101 when upgraded, else the HTTP status it was refused with."""
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        try:
            ws = await session.ws_connect(url, headers=headers)
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status
        await ws.close()
        return 101


def ws_url(gw: GatewayThread, path: str) -> str:
    return gw.http_url.replace("http://", "ws://") + path


def test_websocket_handshake_is_refused_before_upgrade(secured: GatewayThread) -> None:
    producer = ws_url(secured, "/ws/v2/producer/persistent/public/default/t")
    consumer = ws_url(secured, "/ws/v2/consumer/persistent/public/default/t/sub")
    bearer = {"Authorization": f"Bearer {token('app')}"}
    assert asyncio.run(ws_status(producer)) == 401
    assert asyncio.run(ws_status(producer, {"Authorization": "Bearer junk"})) == 401
    assert asyncio.run(ws_status(producer, bearer)) == 403
    assert asyncio.run(ws_status(consumer, bearer)) == 403
    # Browsers pass the token as a query parameter, with or without "Bearer ".
    assert asyncio.run(ws_status(producer + f"?token={token('app')}")) == 403
    assert asyncio.run(ws_status(producer + "?token=junk")) == 401
    grant(secured, "public/default", "app", ["consume"])
    assert asyncio.run(ws_status(producer, bearer)) == 403
    # Permitted: past the middleware (upgraded where the WebSocket API is served).
    assert asyncio.run(ws_status(consumer, bearer)) not in (401, 403)
    assert asyncio.run(ws_status(consumer + f"?token=Bearer%20{token('app')}")) not in (401, 403)


def test_websocket_refusal_reasons(secured: GatewayThread) -> None:
    async def refusal(headers: dict[str, str] | None) -> tuple[int, Any]:
        url = secured.http_url + "/ws/v2/producer/persistent/public/default/t"
        ws_headers = {"Connection": "Upgrade", "Upgrade": "websocket"} | (headers or {})
        async with (
            aiohttp.ClientSession() as session,
            session.get(url, headers=ws_headers) as resp,
        ):
            return resp.status, await resp.json()

    assert asyncio.run(refusal(None)) == (401, {"reason": "Failed to authenticate"})
    bearer = {"Authorization": f"Bearer {token('app')}"}
    assert asyncio.run(refusal(bearer)) == (403, {"reason": "Not authorized"})


def test_rest_produce_needs_produce_permission(secured: GatewayThread) -> None:
    url = secured.http_url + "/topics/persistent/public/default/t"
    body = {"producerName": "rest", "messages": [{"payload": "aGk="}]}
    assert admin_as(None, "POST", url, body) == (401, {"reason": "Authentication required"})
    refused = {"reason": "Client is not authorized to Produce"}
    assert admin_as(token("app"), "POST", url, body) == (403, refused)
    grant(secured, "public/default", "app", ["produce"])
    assert admin_as(token("app"), "POST", url, body)[0] not in (401, 403)


def test_internal_configuration_is_for_superusers(secured: GatewayThread, redis_url: str) -> None:
    # Pulsar's BrokersBase.getInternalConfigurationData: where storage is, superusers only
    url = secured.http_url + "/admin/v2/brokers/internal-configuration"
    assert admin_as(None, "GET", url)[0] == 401
    assert admin_as(token(TENANT_ADMIN), "GET", url)[0] == 403
    status, body = admin_as(token(SUPERUSER), "GET", url)
    assert status == 200
    assert body["metadataStoreUrl"] == redis_url
    assert body["ledgersRootPath"] == "pgw"


# -- token refresh ---------------------------------------------------------------------------


def test_a_long_lived_client_keeps_its_connection_across_token_expiries(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    """The official client with a token supplier: each token lives 3 s, the gateway checks
    every second and sends AUTH_CHALLENGE before a token lapses, the client answers with
    its supplier's current token. Over 8 s (three tokens' lives) producing and consuming
    go on on the one connection the client opened."""
    gw = refreshing(gateway_factory)
    issued: list[float] = []

    def supplier() -> str:
        now = time.time()
        issued.append(now)
        return token(SUPERUSER, exp=int(now) + 3)

    client = client_factory(gw.url, authentication=pulsar.AuthenticationToken(supplier))
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic)
    opened = gw.call(_connections_opened(gw))
    deadline = time.monotonic() + 8
    sent = 0
    while time.monotonic() < deadline:
        producer.send(b"m-%d" % sent)
        message = consumer.receive(timeout_millis=int(TIMEOUT * 1000))
        assert message.data() == b"m-%d" % sent
        consumer.acknowledge(message)
        sent += 1
        time.sleep(0.2)
    assert gw.call(_connections_opened(gw)) == opened  # no reconnection
    assert len(issued) >= 3  # the first token and at least two refreshes
    assert sent >= 20


def test_refreshed_credentials_of_another_role_close_the_connection(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    gw = refreshing(gateway_factory)
    start = time.time()

    def supplier() -> str:  # "app" while connecting, "intruder" when asked to refresh
        now = time.time()
        # Four to five seconds of life: the challenge comes at the check that finds two
        # seconds or less left, so a check that runs late on a loaded machine still sees
        # the token unexpired and the answer (another role) is what closes the connection.
        return token("app" if now - start < 1.0 else "intruder", exp=int(now) + 5)

    client = client_factory(gw.url, authentication=pulsar.AuthenticationToken(supplier))
    client.create_producer(topic)
    binary = gw.gateway._binary
    assert binary is not None
    [connection] = list(binary.connections)
    assert connection.conn.authenticated is not None
    assert connection.conn.authenticated.role == "app"
    # the refresh hands "intruder": the gateway closes that connection
    deadline = time.monotonic() + TIMEOUT
    while not connection.closed.done():
        assert time.monotonic() < deadline, "the connection was not closed"
        time.sleep(0.1)
    assert "name role 'intruder', not 'app'" in connection.conn.close_reason


async def _connections_opened(gw: GatewayThread) -> float:
    counter = gw.gateway.services.metrics.connections_opened.labels("binary")
    return float(counter._value.get())
