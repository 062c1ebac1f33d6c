"""Pulsar's authentication configuration moved over unchanged: the one the official Python
client's test service runs Pulsar with (apache/pulsar-client-python
``tests/test-conf/standalone-ssl.conf`` and
``build-support/start-test-service-inside-container.sh``):
TLS listeners, ``authenticationProviders`` = TLS, token and basic (Pulsar's class names),
``authorizationEnabled``, ``anonymousUserRole=anonymous``, ``superUserRoles=localhost,
superUser,admin``, the ``admin`` / ``123456`` user of its ``.htpasswd``, ``public`` with
``anonymous`` as tenant admin and ``private/auth`` granted to ``token-principal`` only.

End to end on a real redis-server with the official client (``pulsar.AuthenticationBasic``,
``AuthenticationToken``, ``AuthenticationTLS``), aiohttp for HTTP and WebSocket, and a raw
socket for what the C++ client hides (the ERROR's message)."""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import pulsar
import pytest

from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.conftest import TIMEOUT, GatewayThread
from tests.frames import command
from tests.rawclient import RawConnection
from tests.tlscerts import Authority, CertFiles, make_authority
from tests.wsclient import b64, connect, unb64

T = pb.BaseCommand.Type
RECEIVE_MS = int(TIMEOUT * 1000)
SECRET = b"basic-integration-secret-0123456789"
#: The Python client's test service's file, and a second user with a DES crypt hash of
#: "secret" (libc crypt(3)).
HTPASSWD = b"admin:$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.\napp:abNANd1rDfiNc\n"
PROVIDERS = ",".join(
    f"org.apache.pulsar.broker.authentication.AuthenticationProvider{name}"
    for name in ("Tls", "Token", "Basic")
)
#: The namespaces and who may do what there.
PUBLIC = "public/default"  # anonymous: tenant admin of public, and granted produce+consume
PRIVATE = "private/auth"  # token-principal: produce+consume; nobody else but superusers
OPEN = "private/open"  # anonymous: consume only


@dataclass
class Service:
    gw: GatewayThread
    authority: Authority
    cert: CertFiles  # a client certificate whose common name is a superuser ("superUser")

    @property
    def ca(self) -> str:
        return str(self.authority.cert_path)

    @property
    def tls_url(self) -> str:
        return f"pulsar+ssl://127.0.0.1:{self.gw.gateway.port_tls}"

    @property
    def https_url(self) -> str:
        return f"https://127.0.0.1:{self.gw.gateway.http_port_tls}"


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def bearer(role: str) -> dict[str, str]:
    return {"Authorization": "Bearer " + jwt.encode({"sub": role}, SECRET, algorithm="HS256")}


async def http(
    method: str,
    url: str,
    headers: dict[str, str] | None = None,
    body: Any = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, Any]:
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    connector = aiohttp.TCPConnector(ssl=context) if context is not None else None
    async with (
        aiohttp.ClientSession(timeout=timeout, connector=connector) as session,
        session.request(method, url, json=body, headers=headers or {}) as resp,
    ):
        text = await resp.text()
        try:
            return resp.status, await resp.json(content_type=None) if text else None
        except ValueError:
            return resp.status, text


def call(method: str, url: str, headers: dict[str, str] | None = None, body: Any = None) -> Any:
    return asyncio.run(http(method, url, headers, body))


@pytest.fixture
def service(gateway_factory: Callable[..., GatewayThread], tmp_path: Path) -> Service:
    authority = make_authority(tmp_path / "ca")
    server = authority.issue("localhost", server=True)
    conf = tmp_path / ".htpasswd"
    conf.write_bytes(HTPASSWD)
    gw = gateway_factory(
        tls_certificate_file_path=str(server.cert),
        tls_key_file_path=str(server.key),
        tls_trust_certs_file_path=str(authority.cert_path),
        port_tls=0,
        http_port_tls=0,
        authentication_enabled=True,
        authentication_providers=PROVIDERS,
        authorization_enabled=True,
        anonymous_user_role="anonymous",
        superuser_roles="localhost,superUser,admin",
        token_secret_key="data:;base64," + base64.b64encode(SECRET).decode(),
        basic_auth_conf=str(conf),
    )
    # start-test-service-inside-container.sh, as the superuser (here by token, as there)
    su = bearer("superUser")
    admin = gw.http_url + "/admin/v2"
    for tenant, admins in (("public", ["anonymous"]), ("private", [])):
        info = {"adminRoles": admins, "allowedClusters": ["standalone"]}
        status, _ = call("PUT", f"{admin}/tenants/{tenant}", su, info)
        if status == 409:  # public exists from the start
            status, _ = call("POST", f"{admin}/tenants/{tenant}", su, info)
        assert status == 204
    for namespace, role, actions in (
        (PUBLIC, "anonymous", ["produce", "consume"]),
        (PRIVATE, "token-principal", ["produce", "consume"]),
        (OPEN, "anonymous", ["consume"]),
    ):
        status, _ = call("PUT", f"{admin}/namespaces/{namespace}", su)
        assert status in (204, 409)
        url = f"{admin}/namespaces/{namespace}/permissions/{role}"
        assert call("POST", url, su, actions)[0] == 204
    return Service(gw, authority, authority.issue("superUser", server=False))


def round_trip(client: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "my-sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    producer.send(b"hello")
    msg = consumer.receive(RECEIVE_MS)
    assert msg.data() == b"hello"
    consumer.acknowledge(msg)


# -- binary protocol ---------------------------------------------------------------------------


def test_basic_user_produces_and_consumes(
    service: Service, client_factory: Callable[..., Any]
) -> None:
    """The Python client's ``test_basic_auth`` and ``test_tls_encryption_with_other_auth``:
    ``admin`` (a superuser, apr1 hash) over plain, TLS, and an HTTP service URL (lookups
    over HTTP with the ``Authorization: Basic`` header); ``app`` (DES crypt) once granted."""
    admin = pulsar.AuthenticationBasic("admin", "123456")
    round_trip(client_factory(service.gw.url, authentication=admin), f"persistent://{PRIVATE}/b0")
    tls = client_factory(
        service.tls_url,
        authentication=pulsar.AuthenticationBasic("admin", "123456", "basic"),
        tls_trust_certs_file_path=service.ca,
        tls_private_key_file_path=str(service.cert.key),
        tls_certificate_file_path=str(service.cert.cert),
    )
    round_trip(tls, f"persistent://{PRIVATE}/b1")
    over_http = client_factory(service.gw.http_url, authentication=admin)
    round_trip(over_http, f"persistent://{PRIVATE}/b2")

    app = client_factory(service.gw.url, authentication=pulsar.AuthenticationBasic("app", "secret"))
    with pytest.raises(pulsar.AuthorizationError):
        app.create_producer(f"persistent://{PRIVATE}/b3")
    url = f"{service.gw.http_url}/admin/v2/namespaces/{PRIVATE}/permissions/app"
    assert call("POST", url, basic("admin", "123456"), ["produce", "consume"])[0] == 204
    round_trip(app, f"persistent://{PRIVATE}/b3")


def test_wrong_password_is_refused_not_made_anonymous(
    service: Service, client_factory: Callable[..., Any]
) -> None:
    """A basic CONNECT with a wrong password or an unknown user: ERROR(AuthenticationError,
    "Failed to authenticate") and close (``ServerCnx.authenticationFailed``), even though
    ``public/default`` is open to the anonymous role."""
    for data in (b"admin:wrong", b"invalid:123456", b"admin"):
        with RawConnection(service.gw) as raw:
            cmd = command(T.CONNECT, client_version="raw", protocol_version=20)
            cmd.connect.auth_method_name = "basic"
            cmd.connect.auth_data = data
            raw.send(cmd)
            error = raw.expect(T.ERROR)
            assert error.error.error == pb.AuthenticationError
            assert error.error.message == "Failed to authenticate"
            raw.drain()
            assert raw.eof
            assert not any(f.command.type == T.CONNECTED for f in raw.received)
    # The C++ client retries a refused CONNECT until its operation timeout
    # (the Python client's test_invalid_basic_auth expects ConnectError).
    for auth in (
        pulsar.AuthenticationBasic("admin", "wrong"),
        pulsar.AuthenticationBasic("invalid", "123456"),
    ):
        client = client_factory(service.gw.url, authentication=auth, operation_timeout_seconds=1)
        with pytest.raises((pulsar.ConnectError, pulsar.Timeout, pulsar.AuthenticationError)):
            client.create_producer(f"persistent://{PUBLIC}/refused")


def test_an_unknown_method_is_anonymous(
    service: Service, client_factory: Callable[..., Any]
) -> None:
    """The Python client's ``test_basic_auth_method``: method ``unknown`` has no provider,
    so the connection is anonymous (``ServerCnx.handleConnect``) and ``private/auth`` is
    refused by authorization, while ``public/default`` works."""
    auth = pulsar.AuthenticationBasic("admin", "123456", "unknown")
    client = client_factory(service.gw.url, authentication=auth)
    with pytest.raises(pulsar.AuthorizationError):
        client.create_producer(f"persistent://{PRIVATE}/unknown")
    round_trip(client, f"persistent://{PUBLIC}/unknown")


def test_anonymous_client_gets_what_the_namespace_grants(
    service: Service, client_factory: Callable[..., Any]
) -> None:
    plain = client_factory(service.gw.url)
    tls = client_factory(service.tls_url, tls_trust_certs_file_path=service.ca)
    for client, name in ((plain, "plain"), (tls, "tls")):
        round_trip(client, f"persistent://{PUBLIC}/anon-{name}")
        # consume only on private/open
        client.subscribe(f"persistent://{OPEN}/anon-{name}", "s")
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer(f"persistent://{OPEN}/anon-{name}")
        # nothing on private/auth
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer(f"persistent://{PRIVATE}/anon-{name}")
        with pytest.raises(pulsar.AuthorizationError):
            client.subscribe(f"persistent://{PRIVATE}/anon-{name}", "s")


def test_token_and_certificate_beside_basic(
    service: Service, client_factory: Callable[..., Any]
) -> None:
    token = bearer("token-principal")["Authorization"].removeprefix("Bearer ")
    client = client_factory(service.gw.url, authentication=pulsar.AuthenticationToken(token))
    round_trip(client, f"persistent://{PRIVATE}/token")
    certificate = client_factory(
        service.tls_url,
        tls_trust_certs_file_path=service.ca,
        authentication=pulsar.AuthenticationTLS(str(service.cert.cert), str(service.cert.key)),
    )
    round_trip(certificate, f"persistent://{PRIVATE}/cert")


# -- HTTP admin ----------------------------------------------------------------------------------


def test_admin_with_basic_header_and_anonymous(service: Service) -> None:
    base = service.gw.http_url + "/admin/v2"
    admin = basic("admin", "123456")
    status, tenants = call("GET", f"{base}/tenants", admin)
    assert status == 200 and {"public", "private"} <= set(tenants)
    # the superuser over HTTPS, by password
    context = ssl.create_default_context(cafile=service.ca)
    status, _ = asyncio.run(
        http("GET", service.https_url + "/admin/v2/tenants", admin, None, context)
    )
    assert status == 200
    # a user that is no superuser, and no header at all (anonymous): not a superuser
    refusal = {"reason": "This operation requires super-user access"}
    assert call("GET", f"{base}/tenants", basic("app", "secret")) == (403, refusal)
    assert call("GET", f"{base}/tenants") == (403, refusal)
    # anonymous is tenant admin of public, as the test service makes it
    status, namespaces = call("GET", f"{base}/namespaces/public")
    assert status == 200 and "public/default" in namespaces
    status, _ = call("GET", f"{base}/namespaces/{PRIVATE}/permissions")
    assert status == 403
    # a wrong password naming its method (as the Java client does): 401
    named = basic("admin", "wrong") | {"X-Pulsar-Auth-Method-Name": "basic"}
    assert call("GET", f"{base}/tenants", named) == (401, {"reason": "Authentication required"})
    unknown = admin | {"X-Pulsar-Auth-Method-Name": "digest"}
    assert call("GET", f"{base}/tenants", unknown)[0] == 401
    # naming none, credentials no provider accepts are no credentials: anonymous
    # (AuthenticationService.authenticateHttpRequest)
    assert call("GET", f"{base}/tenants", basic("admin", "wrong")) == (403, refusal)
    assert call("GET", f"{base}/namespaces/public", basic("admin", "wrong"))[0] == 200


def test_admin_without_an_anonymous_role_refuses_no_credentials(
    gateway_factory: Callable[..., GatewayThread], tmp_path: Path
) -> None:
    conf = tmp_path / ".htpasswd"
    conf.write_bytes(HTPASSWD)
    gw = gateway_factory(
        authentication_enabled=True,
        authentication_providers="basic",
        authorization_enabled=True,
        superuser_roles="admin",
        basic_auth_conf="data:;base64," + base64.b64encode(HTPASSWD).decode(),
    )
    url = gw.http_url + "/admin/v2/tenants"
    assert call("GET", url, basic("admin", "123456"))[0] == 200
    for headers in (None, basic("admin", "wrong"), basic("nobody", "123456")):
        assert call("GET", url, headers) == (401, {"reason": "Authentication required"})


# -- WebSocket -----------------------------------------------------------------------------------


def ws(service: Service, path: str) -> str:
    return service.gw.http_url.replace("http://", "ws://") + path


def test_websocket_with_basic_header(service: Service) -> None:
    topic = f"persistent/{PRIVATE}/ws"
    producer_url = ws(service, f"/ws/v2/producer/{topic}")
    consumer_url = ws(service, f"/ws/v2/consumer/{topic}/sub")
    admin = basic("admin", "123456")

    async def produce_and_consume() -> bytes:
        async with (
            connect(consumer_url, headers=admin) as consumer,
            connect(producer_url, headers=admin) as producer,
        ):
            ack = await producer.produce(b"over websocket")
            assert ack["result"] == "ok"
            message = await consumer.receive()
            await consumer.ack(message)
            return unb64(message["payload"])

    assert asyncio.run(produce_and_consume()) == b"over websocket"

    # AbstractWebSocketHandler.checkAuth's answers
    named = basic("admin", "wrong") | {"X-Pulsar-Auth-Method-Name": "basic"}
    failed = (401, {"reason": "Failed to authenticate"})
    assert asyncio.run(handshake(producer_url, named)) == failed
    # anonymous: private/auth refused; private/open consume only
    not_authorized = (403, {"reason": "Not authorized"})
    assert asyncio.run(handshake(producer_url)) == not_authorized
    assert asyncio.run(handshake(producer_url, basic("admin", "wrong"))) == not_authorized
    open_producer = ws(service, f"/ws/v2/producer/persistent/{OPEN}/ws")
    open_consumer = ws(service, f"/ws/v2/consumer/persistent/{OPEN}/ws/sub")
    assert asyncio.run(handshake(open_producer)) == not_authorized
    assert asyncio.run(handshake(open_consumer))[0] == 101


async def handshake(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """A WebSocket upgrade request: (101, None) when upgraded, else the refusal's status
    and JSON body."""
    upgrade = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": b64(os.urandom(16)),
    }
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url.replace("ws://", "http://", 1), headers=upgrade | (headers or {})) as r,
    ):
        if r.status == 101:
            return 101, None
        return r.status, await r.json(content_type=None)
