"""Unload (topic, namespace, bundle) closes the topic's clients on every gateway of the
fleet, as Pulsar's unload closes them on the owning broker: CLOSE_PRODUCER and
CLOSE_CONSUMER, and the official client reconnects and carries on without loss."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulsar
import pytest

from pulsar_gateway.core.admin.unload import LOOK_INTERVAL
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import admin
from tests.conftest import GatewayThread
from tests.rawclient import raw

# The cluster pass of ./dev test runs this file on a Redis Cluster too: admin: unload and
# terminate announced to every gateway (a stream and channel outside any topic's slot), the
# terminated mark beside the ledger
pytestmark = pytest.mark.cluster

T = pb.BaseCommand.Type

FULL_BUNDLE = "0x00000000_0xffffffff"


def _raw_clients(gateway: GatewayThread, topic: str) -> Any:
    """A raw connection with one producer (id 1) and one consumer (id 2) on ``topic``."""
    conn = raw(gateway)
    conn.handshake()
    conn.create_producer(topic, producer_id=1)
    conn.request(
        T.SUBSCRIBE,
        T.SUCCESS,
        topic=topic,
        subscription="raw",
        subType=pb.CommandSubscribe.Shared,
        consumer_id=2,
    )
    return conn


@pytest.mark.parametrize(
    "path",
    [
        "/admin/v2/persistent/public/default/{name}/unload",
        "/admin/v2/namespaces/public/default/unload",
        f"/admin/v2/namespaces/public/default/{FULL_BUNDLE}/unload",
    ],
    ids=["topic", "namespace", "bundle"],
)
def test_unload_closes_the_clients_on_every_gateway(
    gateway_factory: Callable[..., GatewayThread], path: str, request: pytest.FixtureRequest
) -> None:
    name = f"unload-{request.node.callspec.id}"
    topic = f"persistent://public/default/{name}"
    other_topic = f"persistent://public/other-ns/{name}"
    first, second = gateway_factory(), gateway_factory()
    admin("PUT", f"{first.http_url}/admin/v2/namespaces/public/other-ns")
    here, there = _raw_clients(first, topic), _raw_clients(second, topic)
    bystander = _raw_clients(second, other_topic)
    with here, there, bystander:
        status, body = admin("PUT", first.http_url + path.format(name=name))
        assert status == 204, body
        for conn in (here, there):
            conn.expect(T.CLOSE_PRODUCER, lambda c: c.close_producer.producer_id == 1)
            conn.expect(T.CLOSE_CONSUMER, lambda c: c.close_consumer.consumer_id == 2)
            conn.assert_open()  # the connection stays; only the producer and consumer go
        # another namespace's clients are left alone
        assert not [c for c in bystander.drain() if c.type in (T.CLOSE_PRODUCER, T.CLOSE_CONSUMER)]


def test_a_partitioned_topic_unload_covers_its_partitions(gateway: GatewayThread) -> None:
    topic = "persistent://public/default/unload-partitioned"
    assert (
        admin(
            "PUT",
            f"{gateway.http_url}/admin/v2/persistent/public/default/unload-partitioned/partitions",
            2,
        )[0]
        == 204
    )
    with _raw_clients(gateway, f"{topic}-partition-1") as conn:
        status, _ = admin(
            "PUT",
            f"{gateway.http_url}/admin/v2/persistent/public/default/unload-partitioned/unload",
        )
        assert status == 204
        conn.expect(T.CLOSE_PRODUCER)
        conn.expect(T.CLOSE_CONSUMER)


def test_the_official_client_reconnects_and_loses_nothing(
    gateway_factory: Callable[..., GatewayThread], client_factory: Callable[..., Any]
) -> None:
    topic = "persistent://public/default/unload-official"
    first, second = gateway_factory(), gateway_factory()
    producer = client_factory(first.url).create_producer(topic, batching_enabled=False)
    consumer = client_factory(second.url).subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Failover
    )
    sent = []
    for i in range(20):
        sent.append(f"m-{i}".encode())
        producer.send(sent[-1])
    got = [consumer.receive(10_000) for _ in range(10)]
    for message in got[:5]:
        consumer.acknowledge(message)  # five acked, five received and not acked
    status, _ = admin(
        "PUT", f"{first.http_url}/admin/v2/persistent/public/default/unload-official/unload"
    )
    assert status == 204
    for i in range(20, 30):
        sent.append(f"m-{i}".encode())
        producer.send(sent[-1])  # the producer reconnected and sends on
    received = [m.data() for m in got[:5]]
    while len(received) < len(sent):
        message = consumer.receive(10_000)
        consumer.acknowledge(message)
        if message.data() not in received:
            received.append(message.data())
    # unacked messages came again, in order, and nothing was lost
    assert received == sent


def test_unload_answers_404_for_what_does_not_exist(gateway: GatewayThread) -> None:
    base = f"{gateway.http_url}/admin/v2"
    for path in (
        "/persistent/public/default/no-such-topic/unload",
        "/namespaces/public/no-such-ns/unload",
        "/namespaces/public/default/0x00000000_0x7fffffff/unload",
    ):
        status, body = admin("PUT", base + path)
        assert status == 404, (path, body)
        assert isinstance(body["reason"], str)


def test_unload_on_a_gateway_that_missed_the_announcement(
    gateway_factory: Callable[..., GatewayThread],
) -> None:
    """A gateway applies an unload it was not told of (its pub/sub connection was away) at
    its next periodic look at the unloads stream."""
    first, second = gateway_factory(), gateway_factory()
    core = second.gateway.core
    assert core is not None
    second.loop.call_soon_threadsafe(core.notifier.unsubscribe, KeySchema().unloads_channel)
    with _raw_clients(second, "persistent://public/default/unload-missed") as conn:
        status, _ = admin(
            "PUT", f"{first.http_url}/admin/v2/persistent/public/default/unload-missed/unload"
        )
        assert status == 204
        conn.expect(T.CLOSE_PRODUCER, timeout=LOOK_INTERVAL * 3)
        conn.expect(T.CLOSE_CONSUMER, timeout=LOOK_INTERVAL * 3)
