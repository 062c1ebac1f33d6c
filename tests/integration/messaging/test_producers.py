"""Producer names and access modes across a fleet (docs/producers.md "Producer names" and
"Access modes (PIP-68)").

Real gateways on one real Redis, driven by the official client (pulsar-client 3.13, sync
and asyncio APIs) and, where the frames themselves matter (producer_ready, topic_epoch),
by the raw test client.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pulsar
import pulsar.asyncio
import pytest

from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.conftest import TIMEOUT, free_port, wait_for
from tests.frames import command
from tests.rawclient import RawConnection

T = pb.BaseCommand.Type
RECEIVE_MS = int(TIMEOUT * 1000)
Mode = pulsar.ProducerAccessMode


def producer_keys(topic: str) -> Any:
    return KeySchema().topic(parse_topic_name(topic))


def raw_producer(
    conn: RawConnection,
    topic: str,
    producer_id: int,
    *,
    mode: int = 0,
    name: str | None = None,
    **fields: Any,
) -> int:
    """Send PRODUCER; return its request id (answers are read by the caller)."""
    rid = conn.request_id()
    if name is not None:
        fields["producer_name"] = name
    conn.send(
        command(
            T.PRODUCER,
            topic=f"persistent://public/default/{topic}",
            producer_id=producer_id,
            request_id=rid,
            producer_access_mode=mode,
            **fields,
        )
    )
    return rid


def answer(conn: RawConnection, rid: int) -> pb.BaseCommand:
    """The next PRODUCER_SUCCESS or ERROR for request ``rid``."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for f in conn.drain(quiet=0.05):
            if f.type == T.PRODUCER_SUCCESS and f.producer_success.request_id == rid:
                return f
            if f.type == T.ERROR and f.error.request_id == rid:
                return f
    raise AssertionError(f"no answer to request {rid}")


# -- names ---------------------------------------------------------------------------------


def test_generated_names_are_unique_and_adopted(gateway_factory, client_factory, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    producers = [client_factory(gw.url).create_producer(topic) for gw in (gw_a, gw_a, gw_b, gw_b)]
    names = [p.producer_name() for p in producers]
    assert len(set(names)) == 4
    consumer = client_factory(gw_a.url).subscribe(topic, "s")
    producers[2].send(b"x")
    assert consumer.receive(timeout_millis=RECEIVE_MS).producer_name() == names[2]


def test_same_name_is_busy_on_any_gateway_until_released(gateway_factory, client_factory, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client_a, client_b = client_factory(gw_a.url), client_factory(gw_b.url)
    first = client_a.create_producer(topic, producer_name="orders")
    with pytest.raises(pulsar.ProducerBusy):
        client_b.create_producer(topic, producer_name="orders")
    with pytest.raises(pulsar.ProducerBusy):
        client_factory(gw_a.url).create_producer(topic, producer_name="orders")
    # The same name on another topic is another producer.
    client_b.create_producer(topic + "-other", producer_name="orders").close()
    first.close()
    second = client_b.create_producer(topic, producer_name="orders")
    second.send(b"ok")


def test_name_is_free_as_soon_as_the_connection_drops(
    gateway_factory, client_factory, redis_clean, topic
):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client_a = client_factory(gw_a.url)
    client_a.create_producer(topic, producer_name="p")
    assert redis_clean.zrange(producer_keys(topic).producers, 0, -1) == [b"p"]
    client_a.close()  # closes the socket; the gateway releases at once
    wait_for(lambda: not redis_clean.zrange(producer_keys(topic).producers, 0, -1))
    client_factory(gw_b.url).create_producer(topic, producer_name="p").send(b"ok")


def test_killed_gateway_stops_blocking_the_name_after_its_lease(
    gateway_factory, gateway_process, client_factory, redis_url, topic
):
    lease = 1.0
    survivor = gateway_factory(consumer_lease_seconds=lease)
    doomed = gateway_process(
        "--redis-url", redis_url, "--consumer-lease-seconds", str(lease)
    ).wait_ready()
    client_factory(doomed.url).create_producer(topic, producer_name="p")
    client_ok = client_factory(survivor.url)
    with pytest.raises(pulsar.ProducerBusy):
        client_ok.create_producer(topic, producer_name="p")
    doomed.stop(sig=9)

    def created() -> Any:
        try:
            return client_ok.create_producer(topic, producer_name="p")
        except pulsar.ProducerBusy:
            return None

    producer = wait_for(created, timeout=lease * 4 + TIMEOUT, interval=0.2)
    producer.send(b"after the lease")


def test_reconnect_supersedes_its_own_registration_left_by_a_killed_gateway(
    gateway_process, client_factory, redis_url, topic
):
    """A killed gateway leaves the producer's name registered for a whole lease; the
    client's reconnection (same generated name, higher epoch) takes it over at once."""
    port = free_port()
    args = ("--redis-url", redis_url, "--consumer-lease-seconds", "60", "--port", str(port))
    first = gateway_process(*args).wait_ready()
    url = f"pulsar://127.0.0.1:{port}"
    client = client_factory(url)
    producer = client.create_producer(topic, send_timeout_millis=int(TIMEOUT * 3000))
    name = producer.producer_name()
    producer.send(b"before")
    first.stop(sig=9)
    gateway_process(*args).wait_ready()
    producer.send(b"after")  # reconnects with epoch 1 while the old lease still runs
    assert producer.producer_name() == name
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(timeout_millis=RECEIVE_MS).data() for _ in range(2)]
    assert got == [b"before", b"after"]


def test_user_provided_name_is_not_taken_over(gateway, topic):
    with RawConnection(gateway) as a, RawConnection(gateway) as b:
        a.handshake()
        b.handshake()
        rid = raw_producer(a, topic, 1, name="mine", epoch=0)
        assert answer(a, rid).type == T.PRODUCER_SUCCESS
        # Another connection claiming the same user-chosen name, even with a higher epoch.
        rid = raw_producer(b, topic, 1, name="mine", epoch=5, user_provided_producer_name=True)
        r = answer(b, rid)
        assert r.type == T.ERROR and r.error.error == pb.ProducerBusy
        a.assert_open()
        b.assert_open()


# -- access modes --------------------------------------------------------------------------


def test_exclusive_refuses_others_across_gateways(gateway_factory, client_factory, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client_a, client_b = client_factory(gw_a.url), client_factory(gw_b.url)
    holder = client_a.create_producer(topic, access_mode=Mode.Exclusive)
    with pytest.raises(pulsar.ProducerFenced):
        client_b.create_producer(topic, access_mode=Mode.Exclusive)
    with pytest.raises(pulsar.ProducerBusy):
        client_b.create_producer(topic, access_mode=Mode.Shared)
    holder.send(b"still mine")
    holder.close()
    client_b.create_producer(topic, access_mode=Mode.Exclusive).send(b"now mine")


def test_exclusive_is_refused_while_shared_producers_exist(gateway_factory, client_factory, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    shared = client_factory(gw_a.url).create_producer(topic)
    with pytest.raises(pulsar.ProducerFenced):
        client_factory(gw_b.url).create_producer(topic, access_mode=Mode.Exclusive)
    shared.close()
    client_factory(gw_b.url).create_producer(topic, access_mode=Mode.Exclusive)


def test_topic_epoch_grows_with_each_exclusive_holder(gateway, topic):
    with RawConnection(gateway) as conn:
        conn.handshake()
        rid = raw_producer(conn, topic, 1, mode=0)
        r = answer(conn, rid).producer_success
        assert not r.HasField("topic_epoch")  # the topic never had an exclusive producer
        conn.request(T.CLOSE_PRODUCER, T.SUCCESS, producer_id=1)
        epochs = []
        for pid in (2, 3):
            rid = raw_producer(conn, topic, pid, mode=1)
            epochs.append(answer(conn, rid).producer_success.topic_epoch)
            conn.request(T.CLOSE_PRODUCER, T.SUCCESS, producer_id=pid)
        assert epochs == [0, 1]
        # A reconnect echoing an older topic epoch is fenced (the topic moved on).
        rid = raw_producer(conn, topic, 4, mode=1, topic_epoch=0)
        r = answer(conn, rid)
        assert r.type == T.ERROR and r.error.error == pb.ProducerFenced
        # Echoing the current one is the same holder coming back.
        rid = raw_producer(conn, topic, 5, mode=1, topic_epoch=1)
        assert answer(conn, rid).producer_success.topic_epoch == 1


def test_wait_for_exclusive_is_queued_then_ready_across_gateways(gateway_factory, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    with RawConnection(gw_a) as a, RawConnection(gw_b) as b:
        a.handshake()
        b.handshake()
        holder = raw_producer(a, topic, 1, mode=1)
        assert answer(a, holder).type == T.PRODUCER_SUCCESS
        rid = raw_producer(b, topic, 7, mode=2)
        queued = answer(b, rid).producer_success
        assert queued.producer_ready is False
        # While one waits, Shared is busy and Exclusive fenced (Pulsar's waiting queue).
        r = answer(b, raw_producer(b, topic, 8, mode=0))
        assert r.error.error == pb.ProducerBusy
        a.request(T.CLOSE_PRODUCER, T.SUCCESS, producer_id=1)
        ready = answer(b, rid).producer_success
        assert ready.producer_ready is True
        assert ready.topic_epoch == 1
        r = answer(a, raw_producer(a, topic, 2, mode=1))
        assert r.error.error == pb.ProducerFenced


def test_wait_for_exclusive_with_the_official_client(gateway_factory, client_factory, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    holder = client_factory(gw_a.url).create_producer(topic, access_mode=Mode.Exclusive)
    created: list[Any] = []
    waiter = threading.Thread(
        target=lambda: created.append(
            client_factory(gw_b.url).create_producer(topic, access_mode=Mode.WaitForExclusive)
        )
    )
    waiter.start()
    time.sleep(0.5)
    assert not created  # still queued
    holder.close()
    waiter.join(TIMEOUT)
    assert created
    created[0].send(b"mine now")
    consumer = client_factory(gw_a.url).subscribe(
        topic, "s", initial_position=pulsar.InitialPosition.Earliest
    )
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"mine now"


def test_waiter_takes_over_when_the_holders_gateway_is_killed(
    gateway_factory, gateway_process, client_factory, redis_url, topic
):
    lease = 1.0
    survivor = gateway_factory(consumer_lease_seconds=lease)
    doomed = gateway_process(
        "--redis-url", redis_url, "--consumer-lease-seconds", str(lease)
    ).wait_ready()
    client_factory(doomed.url).create_producer(topic, access_mode=Mode.Exclusive)
    created: list[Any] = []
    waiter = threading.Thread(
        target=lambda: created.append(
            client_factory(survivor.url).create_producer(topic, access_mode=Mode.WaitForExclusive)
        )
    )
    waiter.start()
    time.sleep(0.3)
    assert not created
    doomed.stop(sig=9)
    waiter.join(lease * 4 + TIMEOUT)  # found by the survivor's lease-renewal poll
    assert created


def test_exclusive_with_fencing_closes_the_holder_on_another_gateway(
    gateway_factory, client_factory, topic
):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    old = client_factory(gw_a.url).create_producer(
        topic, access_mode=Mode.Exclusive, send_timeout_millis=int(TIMEOUT * 1000)
    )
    old.send(b"old")
    new = client_factory(gw_b.url).create_producer(topic, access_mode=Mode.ExclusiveWithFencing)
    new.send(b"new")

    def fenced() -> bool:
        try:
            old.send(b"late")
        except pulsar.ProducerFenced:
            return True
        return False

    wait_for(fenced)
    consumer = client_factory(gw_a.url).subscribe(
        topic, "s", initial_position=pulsar.InitialPosition.Earliest
    )
    got = [consumer.receive(timeout_millis=RECEIVE_MS).data() for _ in range(2)]
    assert got == [b"old", b"new"]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)


def test_fencing_closes_shared_producers_and_fails_waiters(gateway_factory, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    with RawConnection(gw_a) as a, RawConnection(gw_b) as b:
        a.handshake()
        b.handshake()
        assert answer(a, raw_producer(a, topic, 1, mode=1)).type == T.PRODUCER_SUCCESS
        waiting = raw_producer(a, topic, 2, mode=2)
        assert answer(a, waiting).producer_success.producer_ready is False
        r = answer(b, raw_producer(b, topic, 5, mode=3)).producer_success
        assert r.topic_epoch == 1
        a.expect(T.CLOSE_PRODUCER, lambda c: c.close_producer.producer_id == 1)
        r = answer(a, waiting)
        assert r.type == T.ERROR and r.error.error == pb.ProducerFenced
        # The fenced holder's reconnection carries its old topic epoch: fenced for good.
        r = answer(a, raw_producer(a, topic, 1, mode=1, topic_epoch=0, epoch=1))
        assert r.type == T.ERROR and r.error.error == pb.ProducerFenced
        a.assert_open()


def test_access_modes_with_the_asyncio_client(gateway_factory, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()

    async def run() -> None:
        client_a = pulsar.asyncio.Client(gw_a.url, operation_timeout_seconds=10)
        client_b = pulsar.asyncio.Client(gw_b.url, operation_timeout_seconds=10)
        try:
            holder = await client_a.create_producer(topic, access_mode=Mode.Exclusive)
            with pytest.raises(pulsar.asyncio.PulsarException) as busy:
                await client_b.create_producer(topic, access_mode=Mode.Shared)
            assert busy.value.error() == pulsar.Result.ProducerBusy
            waiting = asyncio.ensure_future(
                client_b.create_producer(topic, access_mode=Mode.WaitForExclusive)
            )
            await asyncio.sleep(0.3)
            assert not waiting.done()
            await holder.close()
            producer = await asyncio.wait_for(waiting, TIMEOUT)
            await producer.send(b"async exclusive")
        finally:
            await client_a.close()
            await client_b.close()

    asyncio.run(run())


# -- null values ---------------------------------------------------------------------------


def test_null_value_messages_round_trip(gateway, client_factory, topic):
    """``send(None)`` sets MessageMetadata.null_value (a tombstone for compaction); the
    consumer sees has_null_value() and an empty payload."""
    client = client_factory(gateway.url)
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic)
    producer.send(None, partition_key="k1")
    producer.send(b"")
    producer.send(b"value", partition_key="k1")
    tombstone, empty, value = (consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(3))
    assert tombstone.has_null_value()
    assert tombstone.data() == b""
    assert tombstone.partition_key() == "k1"
    assert not empty.has_null_value() and empty.data() == b""
    assert not value.has_null_value() and value.data() == b"value"


def test_null_values_in_a_batch(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_publish_delay_ms=50
    )
    producer.send_async(b"a", None)
    producer.send_async(None, None)
    producer.send_async(b"c", None)
    producer.flush()
    got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(3)]
    assert [m.has_null_value() for m in got] == [False, True, False]
    assert [m.data() for m in got] == [b"a", b"", b"c"]
