"""Advertised listeners (Pulsar's ``advertisedListeners``): a lookup that names a listener
(the official client's ``listener_name``, ``CommandLookupTopic.advertised_listener_name``,
or ``listenerName`` over HTTP) is answered with that listener's URLs; a name the gateway
does not have is refused as Pulsar refuses it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp
import pulsar
import pytest

from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import call
from tests.conftest import TIMEOUT, GatewayThread, free_port
from tests.rawclient import RawConnection

T = pb.BaseCommand.Type
TOPIC = "persistent://public/default/listeners"


@pytest.fixture
def listening(gateway_factory: Callable[..., GatewayThread]) -> GatewayThread:
    """A gateway on a known port whose listener "internal" names it as localhost (the
    default URLs say 127.0.0.1), and "external" names a load balancer's addresses."""
    port = free_port()
    return gateway_factory(
        port=port,
        advertised_listeners=(
            f"internal:pulsar://localhost:{port},"
            "external:pulsar://lb.example:6650,external:pulsar+ssl://lb.example:6651,"
            "external:https://lb.example:8443"
        ),
    )


def lookup(gw: GatewayThread, listener: str | None) -> pb.CommandLookupTopicResponse:
    fields: dict[str, Any] = {"topic": TOPIC}
    if listener is not None:
        fields["advertised_listener_name"] = listener
    with RawConnection(gw) as conn:
        conn.handshake()
        return conn.request(T.LOOKUP, T.LOOKUP_RESPONSE, **fields).lookupTopicResponse


def test_binary_lookup_answers_the_named_listener(listening: GatewayThread) -> None:
    port = listening.gateway.port
    default = lookup(listening, None)
    assert default.brokerServiceUrl == f"pulsar://127.0.0.1:{port}"
    internal = lookup(listening, "internal")
    assert internal.response == pb.CommandLookupTopicResponse.Connect
    assert internal.brokerServiceUrl == f"pulsar://localhost:{port}"
    external = lookup(listening, "external")
    assert external.brokerServiceUrl == "pulsar://lb.example:6650"
    assert external.brokerServiceUrlTls == "pulsar+ssl://lb.example:6651"


def test_binary_lookup_of_a_listener_the_gateway_does_not_have(listening: GatewayThread) -> None:
    r = lookup(listening, "nope")
    assert r.response == pb.CommandLookupTopicResponse.Failed
    assert r.error == pb.ServiceNotReady  # what Pulsar answers; clients retry it
    assert r.message == "the broker do not have nope listener"


def test_official_client_with_a_listener_name(
    listening: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    """The client connects where the listener says (localhost) and works there; a client
    asking for a listener the gateway does not have gets no producer."""
    client = client_factory(listening.url, listener_name="internal")
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic)
    producer.send(b"via internal")
    message = consumer.receive(timeout_millis=int(TIMEOUT * 1000))
    assert message.data() == b"via internal"
    lost = client_factory(listening.url, listener_name="nope", operation_timeout_seconds=3)
    with pytest.raises(pulsar.PulsarException):
        lost.create_producer(topic)


async def test_http_lookup_with_a_listener_name(listening: GatewayThread) -> None:
    base = f"{listening.http_url}/lookup/v2/topic/persistent/public/default/listeners"
    status, data = await call("GET", base + "?listenerName=external")
    assert status == 200
    assert data["brokerUrl"] == "pulsar://lb.example:6650"
    assert data["brokerUrlTls"] == "pulsar+ssl://lb.example:6651"
    assert data["httpUrl"] == listening.http_url  # the listener names no http:// URL
    assert data["httpUrlTls"] == "https://lb.example:8443"
    status, data = await call("GET", base + "?listenerName=nope")
    assert status == 400
    assert data == {"reason": "the broker do not have nope listener"}
    status, data = await call("GET", base)
    assert (status, data["brokerUrl"]) == (200, listening.url)
    # the header Pulsar's clients may send instead
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    headers = {"X-Pulsar-ListenerName": "internal"}
    async with (
        aiohttp.ClientSession(timeout=timeout) as http,
        http.get(base, headers=headers) as r,
    ):
        assert r.status == 200
        assert (await r.json())["brokerUrl"] == f"pulsar://localhost:{listening.gateway.port}"
