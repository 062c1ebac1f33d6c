"""A topic is usable only in a namespace that exists, as in Pulsar: ``public/default`` from
the start (a standalone's default), others once the admin API creates them, at once on every
gateway. A client naming a topic elsewhere gets TopicNotFound (binary) or 404 (HTTP,
WebSocket), and nothing of the topic is written to Redis."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pulsar
import pytest
import redis

from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import admin, create_namespace
from tests.conftest import TIMEOUT, GatewayThread, data_keys
from tests.rawclient import RawConnection
from tests.wsclient import refused, ws_url

T = pb.BaseCommand.Type
MISSING = "persistent://nowhere/ns/t"
RECEIVE_MS = int(TIMEOUT * 1000)


def _short_client(client_factory: Callable[..., Any], gw: GatewayThread) -> Any:
    # The client retries nothing on TopicNotFound; a short operation timeout keeps a
    # regression (a retry loop) from hanging the test.
    return client_factory(gw.url, operation_timeout_seconds=5)


def test_public_default_is_usable_on_a_fresh_redis(gateway, client_factory, redis_clean):
    registry = KeySchema()
    assert redis_clean.sismember(registry.tenant_namespaces("public"), "public/default")
    client = client_factory(gateway.url)
    producer = client.create_producer("persistent://public/default/fresh")
    consumer = client.subscribe("persistent://public/default/fresh", "s")
    producer.send(b"x")
    assert consumer.receive(RECEIVE_MS).data() == b"x"


@pytest.mark.parametrize("domain", ["persistent", "non-persistent"])
def test_official_client_gets_topic_not_found(gateway, client_factory, redis_clean, domain):
    client = _short_client(client_factory, gateway)
    topic = f"{domain}://nowhere/ns/t"
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer(topic)
    with pytest.raises(pulsar.TopicNotFound):
        client.subscribe(topic, "s")
    with pytest.raises(pulsar.TopicNotFound):
        client.create_reader(topic, pulsar.MessageId.earliest)
    # A tenant that exists does not make its missing namespaces usable.
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer(f"{domain}://public/missing/t")
    assert data_keys(redis_clean) == []
    assert not redis_clean.hexists(KeySchema().tenants, "nowhere")
    # The connection is still good for topics that exist.
    client.create_producer(f"{domain}://public/default/t").send(b"ok")


def test_raw_protocol_answers(gateway):
    with RawConnection(gateway) as conn:
        conn.handshake()
        meta = conn.request(T.PARTITIONED_METADATA, T.PARTITIONED_METADATA_RESPONSE, topic=MISSING)
        answer = meta.partitionMetadataResponse
        assert answer.response == pb.CommandPartitionedTopicMetadataResponse.Failed
        assert answer.error == pb.TopicNotFound
        assert answer.message == "Namespace nowhere/ns not found"
        lookup = conn.request(T.LOOKUP, T.LOOKUP_RESPONSE, topic=MISSING).lookupTopicResponse
        assert lookup.response == pb.CommandLookupTopicResponse.Failed
        assert lookup.error == pb.TopicNotFound
        rid = conn.request_id()
        conn.send(command_producer(MISSING, rid))
        error = conn.expect(T.ERROR, lambda c: c.error.request_id == rid).error
        assert error.error == pb.TopicNotFound
        conn.assert_open()


def command_producer(topic: str, request_id: int) -> pb.BaseCommand:
    cmd = pb.BaseCommand(type=T.PRODUCER)
    cmd.producer.topic = topic
    cmd.producer.producer_id = 1
    cmd.producer.request_id = request_id
    return cmd


def test_http_fronts_answer_404(gateway, redis_clean):
    base = gateway.http_url
    status, body = admin("GET", f"{base}/lookup/v2/topic/persistent/nowhere/ns/t")
    assert status == 404 and body == {"reason": "Namespace nowhere/ns not found"}
    status, body = admin("POST", f"{base}/topics/persistent/nowhere/ns/t", {"messages": []})
    assert status == 404, body
    status, body = admin("GET", f"{base}/admin/v2/persistent/nowhere/ns/t/partitions")
    assert status == 404, body
    status, body = admin("PUT", f"{base}/admin/v2/persistent/nowhere/ns/t")
    assert status == 404, body
    status, body = admin("PUT", f"{base}/admin/v2/persistent/nowhere/ns/p/partitions", 2)
    assert status == 404, body
    for path in (
        "/ws/v2/producer/persistent/nowhere/ns/t",
        "/ws/v2/consumer/persistent/nowhere/ns/t/s",
        "/ws/v2/reader/persistent/nowhere/ns/t",
    ):
        status, body = asyncio.run(refused(ws_url(gateway, path)))
        assert status == 404, (path, body)
    assert data_keys(redis_clean) == []


def test_admin_creation_is_usable_at_once_on_every_gateway(
    gateway_factory: Callable[..., GatewayThread], client_factory: Callable[..., Any]
) -> None:
    first, second = gateway_factory(), gateway_factory()
    topic = "persistent://acme/orders/t"
    client = _short_client(client_factory, second)
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer(topic)
    create_namespace(first.http_url, "acme/orders")
    # No wait: the second gateway asks Redis on every attach.
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "s")
    producer.send(b"after create")
    assert consumer.receive(RECEIVE_MS).data() == b"after create"
    producer.close()
    consumer.close()
    status, body = admin("DELETE", f"{first.http_url}/admin/v2/namespaces/acme/orders?force=true")
    assert status == 204, body
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer(topic)


def test_legacy_names_need_a_v1_namespace(gateway, client_factory, redis_clean):
    topic = "persistent://acme/standalone/old/t"
    client = _short_client(client_factory, gateway)
    create_namespace(gateway.http_url, "acme/new")  # the tenant
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer(topic)
    status, body = admin("PUT", f"{gateway.http_url}/admin/namespaces/acme/elsewhere/old")
    assert status == 412 and body == {"reason": "Cluster elsewhere does not exist."}
    status, body = admin("PUT", f"{gateway.http_url}/admin/namespaces/acme/standalone/old")
    assert status == 204, body
    assert admin("PUT", f"{gateway.http_url}/admin/namespaces/acme/standalone/old")[0] == 409
    client.create_producer(topic).send(b"v1")
    assert admin("GET", f"{gateway.http_url}/admin/v2/namespaces/acme") == (
        200,
        ["acme/new", "acme/standalone/old"],
    )
    url = f"{gateway.http_url}/admin/namespaces/acme/standalone/old"
    assert admin("DELETE", url)[0] == 409  # it has a topic
    assert admin("DELETE", f"{url}?force=true")[0] == 204
    assert admin("GET", f"{gateway.http_url}/admin/v2/namespaces/acme") == (200, ["acme/new"])


def test_missing_tenant_refuses_namespace_creation(gateway):
    status, body = admin("PUT", f"{gateway.http_url}/admin/v2/namespaces/nobody/ns")
    assert status == 404 and body == {"reason": "Tenant does not exist"}
    status, body = admin("PUT", f"{gateway.http_url}/admin/namespaces/nobody/standalone/ns")
    assert status == 404 and body == {"reason": "Tenant does not exist"}


def test_redis_keys_of_a_refused_topic(gateway, redis_clean: redis.Redis) -> None:
    """The namespace check comes before any write: not even the topic set appears."""
    with RawConnection(gateway) as conn:
        conn.handshake()
        for i in range(3):
            rid = conn.request_id()
            conn.send(command_producer(f"persistent://nowhere/ns/t{i}", rid))
            conn.expect(T.ERROR, lambda c, rid=rid: c.error.request_id == rid)
    assert redis_clean.keys("*nowhere*") == []
