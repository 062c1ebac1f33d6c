"""Non-persistent topics with the official client (pulsar-client 3.13): live delivery over
Redis Pub/Sub, nothing stored, subscription rules across a fleet of gateways, permits and
drops, partitioned and regex use."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from typing import Any

import pulsar
import pulsar.asyncio
import pytest

from tests.adminhttp import admin
from tests.conftest import TIMEOUT, data_keys, wait_for
from tests.integration.admin.test_admin_topics import base

# The cluster pass of ./dev test runs this file on a Redis Cluster too: non-persistent
# topics (sharded pub/sub on a cluster; partitioned, every type)
pytestmark = pytest.mark.cluster

RECEIVE_MS = int(TIMEOUT * 1000)
Shared = pulsar.ConsumerType.Shared
Exclusive = pulsar.ConsumerType.Exclusive
Failover = pulsar.ConsumerType.Failover


@pytest.fixture
def np_topic(topic: str) -> str:
    return "non-persistent://public/default/" + topic.replace("-partition", "-part")


def drain(consumer: Any, quiet_ms: int = 400) -> list[Any]:
    """Receive (and ack) until nothing arrives for ``quiet_ms``."""
    msgs = []
    while True:
        try:
            msg = consumer.receive(quiet_ms)
        except pulsar.Timeout:
            return msgs
        consumer.acknowledge(msg)
        msgs.append(msg)


def send(client: Any, topic: str, count: int, **kwargs: Any) -> list[Any]:
    kwargs.setdefault("batching_enabled", False)
    producer = client.create_producer(topic, **kwargs)
    ids = [producer.send(b"%d" % i) for i in range(count)]
    producer.close()
    return ids


def dropped_metric(gw: Any) -> float:
    with urllib.request.urlopen(f"{gw.http_url}/metrics", timeout=TIMEOUT) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("pulsar_gateway_non_persistent_msg_dropped_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_live_delivery_and_nothing_stored(gateway, client, np_topic, redis_clean):
    send(client, np_topic, 3)  # nobody listening: gone
    consumer = client.subscribe(np_topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    ids = send(client, np_topic, 5)
    assert len({str(i) for i in ids}) == 5  # distinct ids, accepted by the client
    msgs = [consumer.receive(RECEIVE_MS) for _ in range(5)]
    assert [m.data() for m in msgs] == [b"%d" % i for i in range(5)]
    assert [str(m.message_id()) for m in msgs] == [str(i) for i in ids]
    assert all(m.topic_name() == np_topic for m in msgs)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(300)  # the 3 sent before the subscription never arrive
    # Acks, negative acks and redelivery requests are accepted and change nothing.
    consumer.acknowledge(msgs[0])
    consumer.acknowledge_cumulative(msgs[1])
    consumer.negative_acknowledge(msgs[2])
    consumer.redeliver_unacknowledged_messages()
    with pytest.raises(pulsar.Timeout):
        consumer.receive(300)
    # Nothing but the namespace's topic list and the live-consumer registry is in Redis.
    keys = data_keys(redis_clean)
    assert keys == [
        "pgw:ns:{public/default}:topics",
        f"pgw:{{{np_topic}}}:np-consumers:sub",
        f"pgw:{{{np_topic}}}:subs",
    ]
    consumer.close()
    wait_for(lambda: data_keys(redis_clean) == ["pgw:ns:{public/default}:topics"])


def test_admin_delete_sees_non_persistent_consumers(gateway, client, np_topic, redis_clean):
    name = np_topic.rsplit("/", 1)[1]
    url = f"{base(gateway, 'non-persistent')}/{name}"
    consumer = client.subscribe(np_topic, "sub")
    status, body = admin("DELETE", url)
    assert (status, body) == (412, {"reason": "Topic has active producers/subscriptions"})
    consumer.close()
    assert admin("DELETE", url) == (204, None)
    assert data_keys(redis_clean) == []


def test_batches_and_compression(gateway, client, np_topic):
    consumer = client.subscribe(np_topic, "sub", consumer_type=Shared)
    producer = client.create_producer(
        np_topic,
        batching_enabled=True,
        batching_max_publish_delay_ms=5,
        compression_type=pulsar.CompressionType.LZ4,
    )
    for i in range(10):
        producer.send_async(b"b-%d" % i, None)
    producer.flush()
    assert sorted(m.data() for m in drain(consumer)) == sorted(b"b-%d" % i for i in range(10))


def test_last_message_id_reads_empty(gateway, client, np_topic):
    consumer = client.subscribe(np_topic, "sub")
    send(client, np_topic, 2)
    last = consumer.get_last_message_id()
    assert (last.ledger_id(), last.entry_id()) == (-1, -1)
    reader = client.create_reader(np_topic, pulsar.MessageId.latest)
    assert not reader.has_message_available()


def test_exclusive_rule_holds_across_gateways(gateway_factory, client_factory, np_topic):
    a, b = gateway_factory(), gateway_factory()
    consumer = client_factory(a.url).subscribe(np_topic, "sub", consumer_type=Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client_factory(b.url).subscribe(np_topic, "sub", consumer_type=Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client_factory(b.url).subscribe(np_topic, "sub", consumer_type=Shared)
    send(client_factory(b.url), np_topic, 4)
    assert [m.data() for m in drain(consumer)] == [b"0", b"1", b"2", b"3"]
    consumer.close()
    # Once it is gone the subscription is free again.
    client_factory(b.url).subscribe(np_topic, "sub", consumer_type=Exclusive)


def test_shared_delivers_each_message_once_across_gateways(
    gateway_factory, client_factory, np_topic
):
    a, b = gateway_factory(), gateway_factory()
    c1 = client_factory(a.url).subscribe(np_topic, "sub", consumer_type=Shared)
    c2 = client_factory(b.url).subscribe(np_topic, "sub", consumer_type=Shared)
    other = client_factory(b.url).subscribe(np_topic, "other", consumer_type=Shared)
    # Both gateways must have read the two-consumer registry (refreshed every second).
    wait_for(lambda: all(len(s) == 2 for s in _np_subs(a, "sub") + _np_subs(b, "sub")))
    send(client_factory(a.url), np_topic, 40)
    got1, got2 = drain(c1), drain(c2)
    assert sorted(int(m.data()) for m in got1 + got2) == list(range(40))
    assert got1 and got2  # spread over both (a hash of the id picks the consumer)
    # Every subscription gets every message.
    assert sorted(int(m.data()) for m in drain(other)) == list(range(40))


def _np_subs(gw: Any, name: str) -> list[list[str]]:
    """The fleet's consumers of local subscriptions ``name``, as the gateway last read them."""
    members: list[list[str]] = gw.gateway.core.non_persistent.members(name)
    return members


def test_failover_sends_to_the_active_consumer_only(gateway_factory, client_factory, np_topic):
    a, b = gateway_factory(), gateway_factory()
    active = client_factory(a.url).subscribe(
        np_topic, "sub", consumer_type=Failover, consumer_name="a-first"
    )
    standby = client_factory(b.url).subscribe(
        np_topic, "sub", consumer_type=Failover, consumer_name="b-second"
    )
    wait_for(lambda: all(len(s) == 2 for s in _np_subs(a, "sub") + _np_subs(b, "sub")))
    send(client_factory(b.url), np_topic, 6)
    assert [int(m.data()) for m in drain(active)] == list(range(6))
    assert drain(standby, 200) == []
    active.close()
    wait_for(lambda: all(len(s) == 1 for s in _np_subs(b, "sub")))
    send(client_factory(b.url), np_topic, 3)
    assert [int(m.data()) for m in drain(standby)] == [0, 1, 2]


def test_messages_without_permits_are_dropped_and_counted(gateway, client, np_topic):
    consumer = client.subscribe(np_topic, "sub", receiver_queue_size=5)
    send(client, np_topic, 30)
    received = drain(consumer)
    assert 0 < len(received) < 30
    assert dropped_metric(gateway) == 30 - len(received)


def test_key_shared_is_refused(gateway, client, np_topic):
    with pytest.raises(pulsar.NotAllowedError):
        client.subscribe(np_topic, "sub", consumer_type=pulsar.ConsumerType.KeyShared)
    # The gateway keeps serving.
    client.subscribe(np_topic, "sub2", consumer_type=Shared).close()


def test_partitioned_non_persistent_topic(gateway, client, topic):
    topic = topic.replace("-partition", "-part")
    name = f"non-persistent://public/default/{topic}"
    assert admin("PUT", f"{base(gateway, 'non-persistent')}/{topic}/partitions", 3) == (204, None)
    consumer = client.subscribe(name, "sub", consumer_type=Shared)
    ids = send(client, name, 9)
    assert {i.partition() for i in ids} == {0, 1, 2}
    msgs = drain(consumer)
    assert sorted(int(m.data()) for m in msgs) == list(range(9))
    assert {m.message_id().partition() for m in msgs} == {0, 1, 2}


def test_regex_non_persistent_only(gateway, client, topic):
    prefix = topic.replace("-partition", "-part")[:50]
    client.create_producer(f"non-persistent://public/default/{prefix}-a").close()
    client.create_producer(f"persistent://public/default/{prefix}-p").close()
    consumer = client.subscribe(
        re.compile(f"public/default/{re.escape(prefix)}-.*"),
        "sub",
        regex_subscription_mode=pulsar.RegexSubscriptionMode.NonPersistentOnly,
    )
    send(client, f"non-persistent://public/default/{prefix}-a", 2)
    send(client, f"persistent://public/default/{prefix}-p", 2)
    assert [m.topic_name() for m in drain(consumer)] == [
        f"non-persistent://public/default/{prefix}-a"
    ] * 2


def test_asyncio_api(gateway, np_topic):
    async def run() -> list[bytes]:
        client = pulsar.asyncio.Client(gateway.url, operation_timeout_seconds=10)
        try:
            consumer = await client.subscribe(np_topic, "sub", consumer_type=Shared)
            producer = await client.create_producer(np_topic, batching_enabled=False)
            for i in range(3):
                await producer.send(b"%d" % i)
            got = []
            for _ in range(3):
                msg = await asyncio.wait_for(consumer.receive(), TIMEOUT)
                await consumer.acknowledge(msg)
                got.append(msg.data())
            return got
        finally:
            await client.close()

    assert asyncio.run(run()) == [b"0", b"1", b"2"]
