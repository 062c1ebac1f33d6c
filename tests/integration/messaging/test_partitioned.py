"""Partitioned topics with the official client (pulsar-client 3.13): routing modes, consumers
and readers over every partition, message ids with partition indexes, per-partition last
message ids, partition increases, and a fleet of two gateways."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pulsar
import pulsar.asyncio
import pytest

from tests.conftest import TIMEOUT, stream_key
from tests.helpers import receive_all
from tests.integration.admin.test_admin_topics import admin, base

# The cluster pass of ./dev test runs this file on a Redis Cluster too: partitioned topics
# (produce, consume, two gateways, routers)
pytestmark = pytest.mark.cluster

RECEIVE_MS = int(TIMEOUT * 1000)
Shared = pulsar.ConsumerType.Shared
Exclusive = pulsar.ConsumerType.Exclusive


@pytest.fixture
def topic(topic: str) -> str:
    """The shared fixture's name, minus any "-partition-" a test name puts in it."""
    return topic.replace("-partition", "-part")


def create(gw: Any, topic: str, count: int) -> None:
    assert admin("PUT", f"{base(gw)}/{topic}/partitions", count) == (204, None)


def partition_of(msg_id: Any) -> int:
    return int(msg_id.partition())


# -- routing --------------------------------------------------------------------------------


def test_round_robin_spreads_over_partitions(gateway, client, topic, redis_clean):
    create(gateway, topic, 3)
    consumer = client.subscribe(topic, "sub", consumer_type=Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(b"m-%d" % i) for i in range(9)]
    # RoundRobinDistribution without a key and without batching: the next partition per
    # message, so 9 messages are 3 per partition.
    assert Counter(partition_of(i) for i in ids) == {0: 3, 1: 3, 2: 3}
    for p in range(3):
        assert redis_clean.xlen(stream_key(f"{topic}-partition-{p}")) == 3
    msgs = receive_all(consumer, 9)
    assert sorted(m.data() for m in msgs) == sorted(b"m-%d" % i for i in range(9))
    for msg in msgs:
        # The MESSAGE id carries the partition index, and the client names the partition.
        p = partition_of(msg.message_id())
        assert msg.topic_name() == f"persistent://public/default/{topic}-partition-{p}"
        assert str(msg.message_id()) in {str(i) for i in ids}


def test_keyed_messages_stick_to_one_partition(gateway, client, topic):
    create(gateway, topic, 4)
    producer = client.create_producer(topic, batching_enabled=False)
    for key in ("alpha", "beta", "gamma"):
        parts = {partition_of(producer.send(b"x", partition_key=key)) for _ in range(5)}
        assert len(parts) == 1


def test_single_partition_routing(gateway, client, topic):
    create(gateway, topic, 4)
    producer = client.create_producer(
        topic,
        batching_enabled=False,
        message_routing_mode=pulsar.PartitionsRoutingMode.UseSinglePartition,
    )
    assert len({partition_of(producer.send(b"x")) for _ in range(10)}) == 1


def test_custom_message_router(gateway, client, topic):
    create(gateway, topic, 3)

    def router(msg: Any, num_partitions: int) -> int:
        return int(msg.data()) % num_partitions

    producer = client.create_producer(topic, batching_enabled=False, message_router=router)
    consumer = client.subscribe(topic, "sub", consumer_type=Shared)
    for i in range(6):
        assert partition_of(producer.send(b"%d" % i)) == i % 3
    for msg in receive_all(consumer, 6):
        assert partition_of(msg.message_id()) == int(msg.data()) % 3


def test_batching_producer_on_partitions(gateway, client, topic):
    create(gateway, topic, 2)
    consumer = client.subscribe(topic, "sub", consumer_type=Shared)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
    done: list[Any] = []
    for i in range(20):
        producer.send_async(b"b-%d" % i, lambda res, mid: done.append((res, mid)))
    producer.flush()
    assert len(done) == 20
    assert all(res == pulsar.Result.Ok for res, _ in done)
    msgs = receive_all(consumer, 20)
    assert sorted(m.data() for m in msgs) == sorted(b"b-%d" % i for i in range(20))


# -- consumers and readers ------------------------------------------------------------------


def test_exclusive_subscription_over_partitions(gateway, client, topic):
    create(gateway, topic, 3)
    consumer = client.subscribe(
        topic, "sub", consumer_type=Exclusive, initial_position=pulsar.InitialPosition.Earliest
    )
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub", consumer_type=Exclusive)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(6):
        producer.send(b"%d" % i)
    assert sorted(int(m.data()) for m in receive_all(consumer, 6)) == list(range(6))


def test_shared_consumers_split_partitions_messages(gateway, client, topic):
    create(gateway, topic, 3)
    c1 = client.subscribe(topic, "sub", consumer_type=Shared, receiver_queue_size=1)
    c2 = client.subscribe(topic, "sub", consumer_type=Shared, receiver_queue_size=1)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(12):
        producer.send(b"%d" % i)
    got: list[int] = []
    for consumer in (c1, c2) * 6:
        msg = consumer.receive(RECEIVE_MS)
        consumer.acknowledge(msg)
        got.append(int(msg.data()))
    assert sorted(got) == list(range(12))


def test_reader_over_partitions(gateway, client, topic):
    create(gateway, topic, 3)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(6):
        producer.send(b"%d" % i)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got = sorted(int(reader.read_next(RECEIVE_MS).data()) for _ in range(6))
    assert got == list(range(6))
    assert not reader.has_message_available()
    producer.send(b"6")
    assert reader.has_message_available()
    assert reader.read_next(RECEIVE_MS).data() == b"6"
    reader.close()


def test_last_message_id_per_partition(gateway, client, topic):
    create(gateway, topic, 2)
    producer = client.create_producer(
        topic, batching_enabled=False, message_router=lambda msg, n: int(msg.data()) % n
    )
    last = {}
    for i in range(5):
        last[i % 2] = producer.send(b"%d" % i)
    # GET_LAST_MESSAGE_ID goes per partition consumer, with that partition's index.
    for p in range(2):
        consumer = client.subscribe(f"{topic}-partition-{p}", f"sub-{p}")
        got = consumer.get_last_message_id()
        assert (got.ledger_id(), got.entry_id(), got.partition()) == (
            last[p].ledger_id(),
            last[p].entry_id(),
            p,
        )
        consumer.close()


# -- partition increase ---------------------------------------------------------------------


def test_new_partitions_get_existing_subscriptions(gateway, client, topic):
    """The client re-reads the count only once a minute (not settable from Python); Pulsar
    copies partition 0's subscriptions to new partitions at the earliest position so that
    messages routed there meanwhile are not skipped. Proven with a consumer that joins
    after the increase at the Latest position."""
    create(gateway, topic, 2)
    consumer = client.subscribe(topic, "sub", consumer_type=Shared)
    consumer.close()
    assert admin("POST", f"{base(gateway)}/{topic}/partitions", 4) == (204, None)
    producer = client.create_producer(
        topic, batching_enabled=False, message_router=lambda msg, n: int(msg.data()) % n
    )
    ids = [producer.send(b"%d" % i) for i in range(8)]
    assert {partition_of(i) for i in ids} == {0, 1, 2, 3}
    consumer = client.subscribe(
        topic, "sub", consumer_type=Shared, initial_position=pulsar.InitialPosition.Latest
    )
    assert sorted(int(m.data()) for m in receive_all(consumer, 8)) == list(range(8))


def test_new_producer_and_consumer_see_increased_count(gateway, client, topic):
    create(gateway, topic, 2)
    assert admin("POST", f"{base(gateway)}/{topic}/partitions", 3) == (204, None)
    producer = client.create_producer(topic, batching_enabled=False)
    assert {partition_of(producer.send(b"x")) for _ in range(6)} == {0, 1, 2}
    assert len(client.get_topic_partitions(topic)) == 3


# -- asyncio API and fleet -------------------------------------------------------------------


def test_asyncio_api_on_partitioned_topic(gateway, topic):
    create(gateway, topic, 3)

    async def run() -> list[int]:
        client = pulsar.asyncio.Client(gateway.url, operation_timeout_seconds=10)
        try:
            consumer = await client.subscribe(topic, "sub", consumer_type=Shared)
            producer = await client.create_producer(topic, batching_enabled=False)
            ids = [await producer.send(b"%d" % i) for i in range(6)]
            assert {partition_of(i) for i in ids} == {0, 1, 2}
            got = []
            for _ in range(6):
                msg = await asyncio.wait_for(consumer.receive(), TIMEOUT)
                await consumer.acknowledge(msg)
                got.append(int(msg.data()))
            assert len(await client.get_topic_partitions(topic)) == 3
            return sorted(got)
        finally:
            await client.close()

    assert asyncio.run(run()) == list(range(6))


def test_two_gateways_on_one_partitioned_topic(gateway_factory, client_factory, topic):
    a, b = gateway_factory(), gateway_factory()
    create(a, topic, 3)
    consumer_a = client_factory(a.url).subscribe(topic, "sub", consumer_type=Shared)
    consumer_b = client_factory(b.url).subscribe(topic, "sub", consumer_type=Shared)
    producer = client_factory(b.url).create_producer(topic, batching_enabled=False)
    for i in range(30):
        producer.send(b"%d" % i)
    got: list[int] = []
    for consumer in (consumer_a, consumer_b):
        while True:
            try:
                msg = consumer.receive(500)
            except pulsar.Timeout:
                break
            consumer.acknowledge(msg)
            got.append(int(msg.data()))
    assert sorted(got) == list(range(30))
