"""Multi-topic and regex subscriptions (pulsar-client 3.13): consumers on a list of topics
and on a pattern that discovers topics created later, and the GET_TOPICS_OF_NAMESPACE
answers they rely on."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import _pulsar
import pulsar
import pulsar.asyncio
import pytest
from pulsar.schema import BytesSchema

from pulsar_gateway.adapters.pulsar_binary.discovery import topics_hash
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import admin
from tests.conftest import TIMEOUT
from tests.helpers import receive_all
from tests.integration.admin.test_admin_topics import base
from tests.rawclient import raw

RECEIVE_MS = int(TIMEOUT * 1000)
Shared = pulsar.ConsumerType.Shared
Earliest = pulsar.InitialPosition.Earliest
T = pb.BaseCommand.Type


@pytest.fixture
def topic(topic: str) -> str:
    """A short prefix unique to the test, with no "-partition-" in it."""
    return topic.replace("-partition", "-part")[:60]


def full(name: str, domain: str = "persistent") -> str:
    return f"{domain}://public/default/{name}"


def send(client: Any, topic: str, *payloads: bytes) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for payload in payloads:
        producer.send(payload)
    producer.close()


def topics_of_namespace(gw: Any, mode: int = 0) -> pb.CommandGetTopicsOfNamespaceResponse:
    with raw(gw) as conn:
        conn.handshake()
        response = conn.request(
            T.GET_TOPICS_OF_NAMESPACE,
            T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
            namespace="public/default",
            mode=mode,
        )
        return response.getTopicsOfNamespaceResponse


def pattern_consumer(client: Any, pattern: str, subscription: str) -> Any:
    """A regex consumer that re-lists the namespace every second, starting new topics at
    Earliest. pulsar-client 3.13's ``Client.subscribe`` type-checks
    ``pattern_auto_discovery_period`` but never passes it on (always 60 s), so this builds
    the consumer through the client's own extension module, as ``subscribe`` does."""
    schema = BytesSchema()
    conf = _pulsar.ConsumerConfiguration()
    conf.consumer_type(Shared)
    conf.subscription_initial_position(Earliest)
    conf.pattern_auto_discovery_period(1)
    conf.schema(schema.schema_info())
    consumer = pulsar.Consumer()
    consumer._consumer = client._client.subscribe_pattern(pattern, subscription, conf)
    consumer._client = client
    consumer._schema = schema
    schema.attach_client(client._client)
    client._consumers.append(consumer)
    return consumer


# -- GET_TOPICS_OF_NAMESPACE ---------------------------------------------------------------


def test_topics_of_namespace_lists_partitions_and_hash(gateway, client, topic):
    assert admin("PUT", f"{base(gateway)}/{topic}-p/partitions", 2) == (204, None)
    send(client, f"{topic}-a", b"x")
    send(client, f"non-persistent://public/default/{topic}-np", b"x")
    persistent = [
        full(f"{topic}-a"),
        full(f"{topic}-p-partition-0"),
        full(f"{topic}-p-partition-1"),
    ]
    np = [full(f"{topic}-np", "non-persistent")]
    answer = topics_of_namespace(gateway, pb.CommandGetTopicsOfNamespace.PERSISTENT)
    assert list(answer.topics) == persistent
    # TopicList.calculateHash: CRC32C over the sorted names.
    assert answer.topics_hash == topics_hash(persistent)
    assert (
        list(topics_of_namespace(gateway, pb.CommandGetTopicsOfNamespace.NON_PERSISTENT).topics)
        == np
    )
    assert sorted(
        topics_of_namespace(gateway, pb.CommandGetTopicsOfNamespace.ALL).topics
    ) == sorted(persistent + np)


def test_deleted_topic_leaves_the_namespace_list(gateway, client, topic):
    send(client, f"{topic}-a", b"x")
    send(client, f"{topic}-b", b"x")
    assert admin("DELETE", f"{base(gateway)}/{topic}-a") == (204, None)
    assert list(topics_of_namespace(gateway).topics) == [full(f"{topic}-b")]


# -- a list of topics -----------------------------------------------------------------------


def test_subscribe_to_a_list_of_topics(gateway, client, topic):
    assert admin("PUT", f"{base(gateway)}/{topic}-p/partitions", 2) == (204, None)
    names = [f"{topic}-a", f"{topic}-b", f"{topic}-p"]
    consumer = client.subscribe(names, "sub", consumer_type=Shared)
    for name in names:
        send(client, name, *(f"{name}/{i}".encode() for i in range(3)))
    msgs = receive_all(consumer, 9)
    assert sorted(m.data().decode() for m in msgs) == sorted(
        f"{n}/{i}" for n in names for i in range(3)
    )
    for msg in msgs:
        # Each message names the topic (partition) it came from.
        name = msg.data().decode().split("/")[0]
        assert msg.topic_name().startswith(full(name))


# -- patterns -------------------------------------------------------------------------------


def test_pattern_discovers_topics_created_later(gateway, client, topic):
    send(client, f"{topic}-a", b"a0")
    send(client, f"other-{topic}", b"not matched")
    consumer = pattern_consumer(client, f"persistent://public/default/{re.escape(topic)}-.*", "sub")
    assert consumer.receive(RECEIVE_MS).data() == b"a0"
    # A topic created after the subscription, then a partitioned one created by the admin
    # API: both found within a discovery period or two, read from their start.
    send(client, f"{topic}-b", b"b0", b"b1")
    assert sorted(m.data() for m in receive_all(consumer, 2)) == [b"b0", b"b1"]
    assert admin("PUT", f"{base(gateway)}/{topic}-p/partitions", 2) == (204, None)
    send(client, f"{topic}-p", b"p0", b"p1", b"p2", b"p3")
    assert sorted(m.data() for m in receive_all(consumer, 4)) == [b"p0", b"p1", b"p2", b"p3"]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(300)  # never the unmatched topic


def test_pattern_with_regex_subscription_modes(gateway, client, topic):
    send(client, f"{topic}-a", b"persistent")
    send(client, f"non-persistent://public/default/{topic}-b", b"gone")  # nobody listening
    consumer = client.subscribe(
        re.compile(f"public/default/{re.escape(topic)}-.*"),
        "sub",
        initial_position=Earliest,
        regex_subscription_mode=pulsar.RegexSubscriptionMode.PersistentOnly,
    )
    assert consumer.receive(RECEIVE_MS).data() == b"persistent"
    consumer.close()


def test_asyncio_list_and_pattern(gateway, client, topic):
    send(client, f"{topic}-a", b"a")
    send(client, f"{topic}-b", b"b")

    async def run() -> tuple[list[bytes], list[bytes]]:
        aclient = pulsar.asyncio.Client(gateway.url, operation_timeout_seconds=10)
        try:
            listed = await aclient.subscribe(
                [f"{topic}-a", f"{topic}-b"], "list", initial_position=Earliest
            )
            pattern = await aclient.subscribe(
                f"persistent://public/default/{re.escape(topic)}-.*",
                "pattern",
                initial_position=Earliest,
                is_pattern_topic=True,
            )
            out = []
            for consumer in (listed, pattern):
                got = []
                for _ in range(2):
                    msg = await asyncio.wait_for(consumer.receive(), TIMEOUT)
                    await consumer.acknowledge(msg)
                    got.append(msg.data())
                out.append(sorted(got))
            return out[0], out[1]
        finally:
            await aclient.close()

    assert asyncio.run(run()) == ([b"a", b"b"], [b"a", b"b"])


def test_pattern_consumer_on_two_gateways(gateway_factory, client_factory, topic):
    a, b = gateway_factory(), gateway_factory()
    consumer = pattern_consumer(
        client_factory(a.url), f"persistent://public/default/{re.escape(topic)}-.*", "sub"
    )
    # Topics created through the other gateway are in the shared namespace list.
    producer_client = client_factory(b.url)
    send(producer_client, f"{topic}-x", b"x")
    send(producer_client, f"{topic}-y", b"y")
    assert sorted(m.data() for m in receive_all(consumer, 2)) == [b"x", b"y"]
