"""HTTP topic lookup (``/lookup/v2/topic/...``), by aiohttp and by the official client
given an ``http://`` service URL (its HTTPLookupService)."""

from __future__ import annotations

import pytest

from tests.adminhttp import admin, admin_text, create_namespace
from tests.conftest import TIMEOUT

RECEIVE_MS = int(TIMEOUT * 1000)


@pytest.mark.parametrize("domain", ["persistent", "non-persistent"])
def test_lookup_answers_this_gateway(gateway, domain):
    status, data = admin("GET", f"{gateway.http_url}/lookup/v2/topic/{domain}/public/default/t")
    assert status == 200
    assert data == {
        "brokerUrl": gateway.url,
        "httpUrl": gateway.http_url,
        "nativeUrl": gateway.url,
        "brokerUrlSsl": "",
    }


def test_lookup_of_partition_bundle_and_legacy_name(gateway):
    create_namespace(gateway.http_url, "acme/ns")
    create_namespace(gateway.http_url, "acme/standalone/ns")
    base = f"{gateway.http_url}/lookup/v2"
    status, data = admin("GET", f"{base}/topic/persistent/acme/ns/t-partition-3")
    assert status == 200 and data["brokerUrl"] == gateway.url
    status, data = admin("GET", f"{base}/destination/persistent/acme/standalone/ns/t")
    assert status == 200 and data["brokerUrl"] == gateway.url
    assert admin_text("GET", f"{base}/topic/persistent/acme/ns/t/bundle") == (
        200,
        "0x00000000_0xffffffff",
    )


def test_lookup_follows_advertised_address(gateway_factory):
    gw = gateway_factory(advertised_address="gw.example.internal")
    data = admin("GET", f"{gw.http_url}/lookup/v2/topic/persistent/public/default/t")[1]
    port = gw.gateway.port
    assert data["brokerUrl"] == f"pulsar://gw.example.internal:{port}"
    assert data["httpUrl"] == f"http://gw.example.internal:{gw.gateway.http_port}"


def test_lookup_bad_names(gateway):
    base = f"{gateway.http_url}/lookup/v2/topic"
    status, body = admin("GET", f"{base}/persistent/bad%20tenant/ns/t")
    assert status == 412 and body == {"reason": "Topic name is not valid"}
    assert admin("GET", f"{base}/elsewhere/public/default/t")[0] == 404
    assert admin("GET", f"{base}/persistent/public/default/t")[0] == 200  # still serving


def test_official_client_over_http_lookup(gateway, client_factory, topic):
    # The client looks the topic up with GET /lookup/v2/topic/... and the partition count
    # with GET /admin/v2/.../partitions, then connects to the brokerUrl it was given.
    client = client_factory(gateway.http_url)
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic)
    producer.send(b"via-http-lookup")
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"via-http-lookup"
    admin("PUT", f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}-p/partitions", 2)
    parts = client.create_producer(f"{topic}-p")
    parts.send(b"partitioned")
    reader = client.subscribe(f"{topic}-p", "s2", initial_position=_earliest())
    assert reader.receive(timeout_millis=RECEIVE_MS).data() == b"partitioned"


def _earliest():
    import pulsar

    return pulsar.InitialPosition.Earliest
