"""Failover subscriptions through the gateway with the official client (pulsar-client 3.13).

Only the active consumer receives. It is the live consumer with the highest priority (lowest
``priority_level``): on a partition, consumers sorted by name and the one at the partition
index modulo their count; on a non-partitioned topic, the earliest subscriber (Pulsar
``AbstractDispatcherSingleActiveConsumer``). When it leaves (close, or its gateway dies and
its lease expires) its unacked and later messages go to the next in line, in order. The
Python client cannot see ``ACTIVE_CONSUMER_CHANGE`` nor set ``priority_level``: those are
checked with the raw-socket client.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pulsar
import pulsar.asyncio
import pytest

from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.conftest import TIME_SCALE, TIMEOUT, stream_key, wait_for
from tests.frames import command
from tests.helpers import produce
from tests.rawclient import RawConnection

# The cluster pass of ./dev test runs this file on a Redis Cluster too: subscriptions:
# Failover (active consumer, handover on close and on a killed gateway)
pytestmark = pytest.mark.cluster

T = pb.BaseCommand.Type
Failover = pulsar.ConsumerType.Failover
RECEIVE_MS = int(TIMEOUT * 1000)
#: How long "nothing arrives" waits, ms.
QUIET_MS = 400
SUB = "fo"


# -- helpers ---------------------------------------------------------------------------------


def payloads(start: int, stop: int) -> list[bytes]:
    return [f"m-{i}".encode() for i in range(start, stop)]


def receive(consumer: Any, count: int, timeout_ms: int = RECEIVE_MS) -> list[Any]:
    return [consumer.receive(timeout_millis=timeout_ms) for _ in range(count)]


def assert_nothing(*consumers: Any) -> None:
    """None of ``consumers`` receives anything within a short quiet period."""
    for consumer in consumers:
        with pytest.raises(pulsar.Timeout):
            msg = consumer.receive(timeout_millis=QUIET_MS)
            pytest.fail(f"unexpected message {msg.data()!r}")


def pending(redis: Any, topic: str, sub: str = SUB) -> int:
    """The subscription's unacked entries (the consumer group's pending-entries list)."""
    return int(redis.xpending(stream_key(topic), sub)["pending"])


def consumer_uids(redis: Any, topic: str, sub: str = SUB) -> dict[str, str]:
    """Consumer name -> uid, from the consumer info hash ("<priority> <seq> <name>")."""
    info = redis.hgetall(KeySchema().topic(parse_topic_name(topic)).consumer_info(sub))
    return {v.decode().split(" ", 2)[2]: k.decode() for k, v in info.items()}


# -- only the active consumer receives -------------------------------------------------------


@pytest.mark.parametrize("gateways", [1, 3])
def test_only_the_earliest_subscriber_receives(gateway_factory, client_factory, topic, gateways):
    gws = [gateway_factory() for _ in range(gateways)]
    clients = [client_factory(gw.url) for gw in gws]
    consumers = [
        clients[i % gateways].subscribe(topic, SUB, consumer_type=Failover, consumer_name=name)
        for i, name in enumerate(["c", "a", "b"])  # names do not matter off partitions
    ]
    produce(clients[-1], topic, 10)
    got = receive(consumers[0], 10)
    assert [m.data() for m in got] == payloads(0, 10)
    assert_nothing(consumers[1], consumers[2])


@pytest.mark.parametrize("gateways", [1, 2])
def test_partition_active_consumer_is_chosen_by_name(
    gateway_factory, client_factory, topic, gateways
):
    """Each partition is its own topic here; consumers sorted by name, and the one at
    partition index mod count is active: "a" on partition 0, "b" on partition 1 (also
    when "b" subscribed first)."""
    gws = [gateway_factory() for _ in range(gateways)]
    client_b = client_factory(gws[0].url)
    client_a = client_factory(gws[-1].url)
    parts = [f"{topic}-partition-{i}" for i in range(2)]
    b = [client_b.subscribe(p, SUB, consumer_type=Failover, consumer_name="b") for p in parts]
    a = [client_a.subscribe(p, SUB, consumer_type=Failover, consumer_name="a") for p in parts]
    for p in parts:
        produce(client_b, p, 4)
    assert [m.data() for m in receive(a[0], 4)] == payloads(0, 4)
    assert [m.data() for m in receive(b[1], 4)] == payloads(0, 4)
    assert_nothing(b[0], a[1])


def test_consumer_sorting_first_on_a_partition_takes_over_unacked(
    gateway_factory, client_factory, topic
):
    """A newcomer that becomes active gets the old active consumer's unacked messages
    again, in order, then the later ones."""
    gw_a, gw_b = gateway_factory(), gateway_factory()
    part = f"{topic}-partition-0"
    b = client_factory(gw_a.url).subscribe(part, SUB, consumer_type=Failover, consumer_name="b")
    produce(client_factory(gw_a.url), part, 3)
    assert [m.data() for m in receive(b, 3)] == payloads(0, 3)  # held, not acked
    a = client_factory(gw_b.url).subscribe(part, SUB, consumer_type=Failover, consumer_name="a")
    assert [m.data() for m in receive(a, 3)] == payloads(0, 3)
    produce(client_factory(gw_b.url), part, 2, start=3)
    assert [m.data() for m in receive(a, 2)] == payloads(3, 5)
    assert_nothing(b)


# -- failover ------------------------------------------------------------------------------


@pytest.mark.parametrize("gateways", [1, 2])
def test_close_hands_unacked_and_later_messages_to_the_next_in_order(
    gateway_factory, client_factory, redis_clean, topic, gateways
):
    gws = [gateway_factory() for _ in range(gateways)]
    clients = [client_factory(gw.url) for gw in gws]
    active = clients[0].subscribe(topic, SUB, consumer_type=Failover, consumer_name="a")
    standby = clients[-1].subscribe(topic, SUB, consumer_type=Failover, consumer_name="b")
    third = clients[0].subscribe(topic, SUB, consumer_type=Failover, consumer_name="c")
    produce(clients[0], topic, 8)
    got = receive(active, 8)
    for m in got[:3]:
        active.acknowledge(m)
    wait_for(lambda: pending(redis_clean, topic) == 5)  # the acks reached Redis
    assert_nothing(standby, third)
    active.close()
    produce(clients[-1], topic, 2, start=8)
    again = receive(standby, 7)
    assert [m.data() for m in again] == payloads(3, 10)  # nothing acked comes back
    for m in again:
        standby.acknowledge(m)
    assert_nothing(standby, third)


def test_killed_gateway_hands_over_to_a_consumer_on_another_gateway(
    gateway_factory, gateway_process, client_factory, redis_clean, redis_url, topic
):
    """SIGKILL: nobody releases the active consumer; its lease expires, a surviving gateway
    reaps it and the standby becomes active, within lease + lease/2 + ~1 s."""
    lease = 1.5
    survivor = gateway_factory(consumer_lease_seconds=lease)
    doomed = gateway_process(
        "--redis-url", redis_url, "--consumer-lease-seconds", str(lease)
    ).wait_ready()
    client_doomed = client_factory(doomed.url)
    client_ok = client_factory(survivor.url)
    active = client_doomed.subscribe(topic, SUB, consumer_type=Failover, consumer_name="a")
    standby = client_ok.subscribe(topic, SUB, consumer_type=Failover, consumer_name="b")
    produce(client_ok, topic, 6)
    got = receive(active, 6)
    assert [m.data() for m in got] == payloads(0, 6)
    for m in got[:2]:
        active.acknowledge(m)
    wait_for(lambda: pending(redis_clean, topic) == 4)
    assert_nothing(standby)
    doomed.stop(sig=9)
    # expiry (<= lease) + the survivor's reap period (lease/2, polled each second) + slack
    bound_ms = int((lease + lease / 2 + 1.0 + 1.0) * TIME_SCALE * 1000)
    first = standby.receive(timeout_millis=bound_ms)
    produce(client_ok, topic, 2, start=6)
    again = [first, *receive(standby, 5)]
    assert [m.data() for m in again] == payloads(2, 8)
    for m in again:
        standby.acknowledge(m)
    wait_for(lambda: pending(redis_clean, topic) == 0)
    assert_nothing(standby)


def test_cumulative_ack_on_failover(gateway_factory, client_factory, redis_clean, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    active = client_factory(gw_a.url).subscribe(
        topic, SUB, consumer_type=Failover, consumer_name="a"
    )
    standby = client_factory(gw_b.url).subscribe(
        topic, SUB, consumer_type=Failover, consumer_name="b"
    )
    produce(client_factory(gw_a.url), topic, 6)
    got = receive(active, 6)
    active.acknowledge_cumulative(got[3])
    wait_for(lambda: pending(redis_clean, topic) == 2)
    active.close()
    again = receive(standby, 2)
    assert [m.data() for m in again] == payloads(4, 6)
    standby.acknowledge_cumulative(again[-1])
    wait_for(lambda: pending(redis_clean, topic) == 0)
    assert_nothing(standby)


async def test_asyncio_client_failover_on_close(gateway_factory, redis_clean, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client_a = pulsar.asyncio.Client(gw_a.url, operation_timeout_seconds=10)
    client_b = pulsar.asyncio.Client(gw_b.url, operation_timeout_seconds=10)
    try:
        active = await client_a.subscribe(topic, SUB, consumer_type=Failover, consumer_name="a")
        standby = await client_b.subscribe(topic, SUB, consumer_type=Failover, consumer_name="b")
        producer = await client_b.create_producer(topic, batching_enabled=False)
        for i in range(6):
            await producer.send(f"m-{i}".encode())
        got = [await asyncio.wait_for(active.receive(), TIMEOUT) for _ in range(6)]
        assert [m.data() for m in got] == payloads(0, 6)
        for m in got[:2]:
            await active.acknowledge(m)
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while pending(redis_clean, topic) != 4:
            assert asyncio.get_running_loop().time() < deadline, "acks never reached Redis"
            await asyncio.sleep(0.02)
        await active.close()
        again = [await asyncio.wait_for(standby.receive(), TIMEOUT) for _ in range(4)]
        assert [m.data() for m in again] == payloads(2, 6)
    finally:
        await client_a.close()
        await client_b.close()


# -- raw client: ACTIVE_CONSUMER_CHANGE and priority_level ---------------------------------


def raw_subscribe(
    conn: RawConnection, topic: str, name: str, priority: int = 0, permits: int = 100
) -> None:
    conn.handshake()
    conn.request(
        T.SUBSCRIBE,
        T.SUCCESS,
        topic=topic,
        subscription=SUB,
        subType=pb.CommandSubscribe.Failover,
        consumer_id=1,
        consumer_name=name,
        priority_level=priority,
        initialPosition=pb.CommandSubscribe.Earliest,
    )
    conn.send(command(T.FLOW, consumer_id=1, messagePermits=permits))


def expect_active(conn: RawConnection, is_active: bool) -> None:
    change = conn.expect(T.ACTIVE_CONSUMER_CHANGE).active_consumer_change
    assert change.consumer_id == 1
    assert change.is_active is is_active


def active_changes(conn: RawConnection) -> list[bool]:
    return [
        f.active_consumer_change.is_active
        for f in conn.drain()
        if f.type == T.ACTIVE_CONSUMER_CHANGE
    ]


def expect_messages(conn: RawConnection, ids: list[Any]) -> list[int]:
    """The next MESSAGE frames carry exactly ``ids`` in order; returns redelivery counts."""
    counts = []
    for mid in ids:
        msg = conn.expect(T.MESSAGE).message
        assert (msg.message_id.ledgerId, msg.message_id.entryId) == (
            mid.ledger_id(),
            mid.entry_id(),
        )
        counts.append(msg.redelivery_count)
    return counts


def full(topic: str) -> str:
    return f"persistent://public/default/{topic}"


@pytest.mark.parametrize("gateways", [1, 2])
def test_active_consumer_change_frames(gateway_factory, topic, gateways):
    gws = [gateway_factory() for _ in range(gateways)]
    with RawConnection(gws[0]) as first, RawConnection(gws[-1]) as second:
        raw_subscribe(first, full(topic), "a")
        expect_active(first, True)
        raw_subscribe(second, full(topic), "b")
        expect_active(second, False)
        assert active_changes(first) == []  # still active: no news
        first.request(T.CLOSE_CONSUMER, T.SUCCESS, consumer_id=1)
        expect_active(second, True)


def test_priority_level_picks_the_active_consumer(gateway_factory, client_factory, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    producer_client = client_factory(gw_a.url)
    with (
        RawConnection(gw_a) as low_a,
        RawConnection(gw_b) as high,
        RawConnection(gw_a) as low_c,
    ):
        raw_subscribe(low_a, full(topic), "a", priority=1)
        expect_active(low_a, True)
        ids = produce(producer_client, topic, 3)
        assert expect_messages(low_a, ids) == [0, 0, 0]  # held, not acked
        # priority level 0 beats 1: "b" becomes active and gets "a"'s unacked messages
        raw_subscribe(high, full(topic), "b", priority=0)
        expect_active(high, True)
        expect_active(low_a, False)
        expect_messages(high, ids)
        raw_subscribe(low_c, full(topic), "c", priority=1)
        expect_active(low_c, False)
        more = produce(producer_client, topic, 2, start=3)
        expect_messages(high, more)
        assert not [f for f in low_a.drain() if f.type == T.MESSAGE]
        assert not [f for f in low_c.drain() if f.type == T.MESSAGE]
        # "b" leaves: among priority 1 the earliest subscriber, "a", takes everything over
        high.request(T.CLOSE_CONSUMER, T.SUCCESS, consumer_id=1)
        expect_active(low_a, True)
        expect_messages(low_a, ids + more)
        assert active_changes(low_c) == []
