"""Readers, GET_LAST_MESSAGE_ID and SEEK through the gateway (docs/binary_protocol.md
"Consuming, acknowledging, seeking" and "Message ids").

Readers are non-durable Exclusive subscriptions positioned by SUBSCRIBE.start_message_id;
``has_message_available`` is answered from GET_LAST_MESSAGE_ID (last entry and the
subscription's mark-delete position). SEEK repositions a subscription by message id
(inclusive on the server; the client drops the id itself unless inclusive) or by publish
time (from the first entry published at or after it, Pulsar's PersistentMessageFinder),
then the gateway closes every consumer of the subscription and the clients re-subscribe.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pulsar
import pulsar.asyncio as pulsar_asyncio
import pytest

from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.entry_codec import parse_blob
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.conftest import TIMEOUT, stream_key, wait_for
from tests.frames import command
from tests.helpers import assert_nothing_more, produce
from tests.rawclient import RawConnection

# The cluster pass of ./dev test runs this file on a Redis Cluster too: readers and seek (by
# id and publish time, across gateways)
pytestmark = pytest.mark.cluster

RECEIVE_MS = int(TIMEOUT * 1000)
T = pb.BaseCommand.Type

Shared = pulsar.ConsumerType.Shared
Exclusive = pulsar.ConsumerType.Exclusive
EARLIEST = pulsar.MessageId.earliest
LATEST = pulsar.MessageId.latest


# -- helpers ---------------------------------------------------------------------------------


def pending_ids(redis: Any, topic: str, sub: str) -> list[str]:
    rows = redis.xpending_range(stream_key(topic), sub, "-", "+", 10_000)
    return [row["message_id"].decode() for row in rows]


def consumer_uids(redis: Any, topic: str, sub: str) -> set[bytes]:
    key = KeySchema().topic(parse_topic_name(topic)).consumers(sub)
    return set(redis.zrange(key, 0, -1))


def publish_time(redis: Any, topic: str, message_id: Any) -> int:
    """The ``MessageMetadata.publish_time`` the producer stored with ``message_id``."""
    sid = f"{message_id.ledger_id()}-{message_id.entry_id()}"
    ((_, fields),) = redis.xrange(stream_key(topic), sid, sid)
    return int(parse_blob(fields[b"m"]).metadata.publish_time)


def produce_across_a_millisecond(client: Any, redis: Any, topic: str) -> tuple[list[Any], int, int]:
    """Send ``m-0``, ``m-1``, ... until an entry is published in a later millisecond than
    the one before it, then two more. Returns the ids, the index ``k`` of that first entry
    of a new millisecond and its publish time: seeking to that time must restart exactly at
    ``m-k`` (Pulsar restarts after the newest entry published before the time,
    PersistentMessageFinder)."""
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(b"m-0"), producer.send(b"m-1")]
    times = [publish_time(redis, topic, i) for i in ids]
    while times[-1] == times[-2] or len(ids) < 4:
        ids.append(producer.send(f"m-{len(ids)}".encode()))
        times.append(publish_time(redis, topic, ids[-1]))
    k = len(ids) - 1
    for _ in range(2):
        ids.append(producer.send(f"m-{len(ids)}".encode()))
    producer.close()
    return ids, k, times[k]


def produce_batched(client: Any, topic: str, count: int, per_batch: int) -> list[Any]:
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=per_batch,
        batching_max_publish_delay_ms=60_000,
    )
    results: dict[int, Any] = {}
    lock = threading.Lock()

    def callback(i: int) -> Any:
        def done(res: Any, mid: Any) -> None:
            with lock:
                results[i] = (res, mid)

        return done

    for i in range(count):
        producer.send_async(f"b-{i}".encode(), callback(i))
    producer.flush()
    wait_for(lambda: len(results) == count)
    producer.close()
    assert {r for r, _ in results.values()} == {pulsar.Result.Ok}
    return [results[i][1] for i in range(count)]


def names(count: int, start: int = 0, prefix: str = "m") -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(start, count)]


def read_n(reader: Any, count: int) -> list[bytes]:
    return [reader.read_next(timeout_millis=RECEIVE_MS).data() for _ in range(count)]


def receive_n(consumer: Any, count: int, ack: bool = True) -> list[bytes]:
    out = []
    for _ in range(count):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        if ack:
            consumer.acknowledge(msg)
        out.append(msg.data())
    return out


def assert_nothing_read(reader: Any, timeout_ms: int = 300) -> None:
    with pytest.raises(pulsar.Timeout):
        reader.read_next(timeout_millis=timeout_ms)


def same_id(a: Any, b: Any) -> bool:
    return (a.ledger_id(), a.entry_id(), a.batch_index()) == (
        b.ledger_id(),
        b.entry_id(),
        b.batch_index(),
    )


# -- readers ---------------------------------------------------------------------------------


def test_reader_from_earliest(client: Any, topic: str) -> None:
    produce(client, topic, 3)
    reader = client.create_reader(topic, EARLIEST)
    assert reader.has_message_available()
    assert read_n(reader, 3) == names(3)
    assert not reader.has_message_available()  # all read
    assert_nothing_read(reader)
    produce(client, topic, 1, prefix="n")
    assert reader.has_message_available()
    assert read_n(reader, 1) == [b"n-0"]


def test_reader_on_empty_topic(client: Any, topic: str) -> None:
    reader = client.create_reader(topic, EARLIEST)
    assert not reader.has_message_available()
    assert_nothing_read(reader)
    produce(client, topic, 2)
    assert reader.has_message_available()
    assert read_n(reader, 2) == names(2)
    assert not reader.has_message_available()


def test_reader_from_latest(client: Any, topic: str) -> None:
    produce(client, topic, 3)
    reader = client.create_reader(topic, LATEST)
    assert not reader.has_message_available()  # needs the mark-delete position
    assert_nothing_read(reader)
    produce(client, topic, 2, prefix="n")
    assert reader.has_message_available()
    assert read_n(reader, 2) == names(2, prefix="n")
    assert not reader.has_message_available()


def test_reader_from_latest_inclusive_reads_the_last_message(client: Any, topic: str) -> None:
    """With start_message_id_inclusive, has_message_available() seeks the reader to the
    last message id (a reader SEEK by id), which is then read."""
    produce(client, topic, 3)
    reader = client.create_reader(topic, LATEST, start_message_id_inclusive=True)
    assert reader.has_message_available()
    assert read_n(reader, 1) == [b"m-2"]
    assert not reader.has_message_available()
    assert_nothing_read(reader)


@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_reader_from_message_id(client: Any, topic: str, inclusive: bool) -> None:
    ids = produce(client, topic, 5)
    reader = client.create_reader(topic, ids[2], start_message_id_inclusive=inclusive)
    assert reader.has_message_available()
    first = 2 if inclusive else 3
    assert read_n(reader, 5 - first) == names(5, first)
    assert not reader.has_message_available()
    assert_nothing_read(reader)


@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_reader_from_id_inside_a_batch(client: Any, topic: str, inclusive: bool) -> None:
    produce_batched(client, topic, 8, per_batch=4)
    # An id built by the user from a received batched message id (index 1 of batch 0).
    scout = client.create_reader(topic, EARLIEST)
    received = scout.read_next(timeout_millis=RECEIVE_MS)
    received = scout.read_next(timeout_millis=RECEIVE_MS)
    scout.close()
    got = received.message_id()
    assert got.batch_index() == 1
    start = pulsar.MessageId(got.partition(), got.ledger_id(), got.entry_id(), got.batch_index())

    reader = client.create_reader(topic, start, start_message_id_inclusive=inclusive)
    assert reader.has_message_available()
    first = 1 if inclusive else 2
    assert read_n(reader, 8 - first) == names(8, first, prefix="b")
    assert not reader.has_message_available()
    assert_nothing_read(reader)


def test_get_last_message_id(client: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "last")
    empty = consumer.get_last_message_id()
    assert (empty.ledger_id(), empty.entry_id()) == (-1, -1)
    ids = produce(client, topic, 2)
    assert same_id(consumer.get_last_message_id(), ids[-1])
    batch = produce_batched(client, topic, 3, per_batch=3)
    last = consumer.get_last_message_id()
    assert same_id(last, batch[-1])
    assert last.batch_index() == 2


# -- seek on durable subscriptions -----------------------------------------------------------


@pytest.mark.parametrize("sub_type", [Shared, Exclusive], ids=["shared", "exclusive"])
def test_seek_by_message_id(client: Any, redis_clean: Any, topic: str, sub_type: Any) -> None:
    consumer = client.subscribe(topic, "seek", consumer_type=sub_type)
    ids = produce(client, topic, 8)
    assert receive_n(consumer, 8) == names(8)
    wait_for(lambda: pending_ids(redis_clean, topic, "seek") == [])
    consumer.seek(ids[3])
    # The gateway restarts at m-3 inclusive; the client drops the seek id itself.
    assert receive_n(consumer, 4) == names(8, 4)
    assert_nothing_more(consumer)


def test_seek_forward_acks_what_precedes(client: Any, redis_clean: Any, topic: str) -> None:
    consumer = client.subscribe(
        topic, "seek", consumer_type=Shared, initial_position=pulsar.InitialPosition.Earliest
    )
    ids = produce(client, topic, 8)
    consumer.seek(ids[5])
    assert receive_n(consumer, 2, ack=False) == names(8, 6)
    assert_nothing_more(consumer)
    wait_for(
        lambda: (
            pending_ids(redis_clean, topic, "seek")
            == [f"{i.ledger_id()}-{i.entry_id()}" for i in ids[5:]]
        )
    )
    consumer.close()
    consumer = client.subscribe(topic, "seek", consumer_type=Shared)
    # Only what was delivered after the seek comes back (m-5 went out, the client dropped it).
    assert sorted(receive_n(consumer, 3)) == names(8, 5)
    assert_nothing_more(consumer)


@pytest.mark.parametrize("sub_type", [Shared, Exclusive], ids=["shared", "exclusive"])
def test_seek_by_publish_time(client: Any, redis_clean: Any, topic: str, sub_type: Any) -> None:
    consumer = client.subscribe(topic, "seek", consumer_type=sub_type)
    ids, k, at = produce_across_a_millisecond(client, redis_clean, topic)
    assert receive_n(consumer, len(ids)) == names(len(ids))
    consumer.seek(at)
    assert receive_n(consumer, len(ids) - k) == names(len(ids), k)
    assert_nothing_more(consumer)


def test_seek_to_earliest_and_latest(client: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "seek", consumer_type=Exclusive)
    produce(client, topic, 4)
    assert receive_n(consumer, 4) == names(4)
    consumer.seek(EARLIEST)
    assert receive_n(consumer, 4) == names(4)
    assert_nothing_more(consumer)
    consumer.seek(EARLIEST)
    consumer.seek(LATEST)
    assert_nothing_more(consumer)
    produce(client, topic, 1, prefix="n")
    assert receive_n(consumer, 1) == [b"n-0"]


def test_seek_closes_every_consumer_across_gateways(
    gateway_factory: Any, client_factory: Any, redis_clean: Any, topic: str
) -> None:
    gw_a, gw_b = gateway_factory(), gateway_factory()
    c1 = client_factory(gw_a.url).subscribe(topic, "seek", consumer_type=Shared)
    c2 = client_factory(gw_b.url).subscribe(topic, "seek", consumer_type=Shared)
    produce(client_factory(gw_a.url), topic, 10)
    got: list[bytes] = []
    collect(got, [c1, c2], 10)
    assert sorted(got) == sorted(names(10))
    wait_for(lambda: pending_ids(redis_clean, topic, "seek") == [])
    before = consumer_uids(redis_clean, topic, "seek")
    assert len(before) == 2

    c1.seek(EARLIEST)
    # Both consumers were closed by their gateways and subscribed again (new uids).
    wait_for(
        lambda: len(after := consumer_uids(redis_clean, topic, "seek")) == 2 and not after & before
    )
    again: list[bytes] = []
    collect(again, [c1, c2], 10)
    assert sorted(again) == sorted(names(10))  # redelivery restarted at the seek position
    for c in (c1, c2):
        assert_nothing_more(c)


def collect(into: list[bytes], consumers: list[Any], count: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while len(into) < count:
        assert time.monotonic() < deadline, f"only {len(into)} of {count} arrived"
        for consumer in consumers:
            try:
                msg = consumer.receive(timeout_millis=20)
            except pulsar.Timeout:
                continue
            consumer.acknowledge(msg)
            into.append(msg.data())


# -- seek on readers -------------------------------------------------------------------------


@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_reader_seek_by_message_id(client: Any, topic: str, inclusive: bool) -> None:
    ids = produce(client, topic, 5)
    reader = client.create_reader(topic, EARLIEST, start_message_id_inclusive=inclusive)
    assert read_n(reader, 5) == names(5)
    reader.seek(ids[1])
    assert reader.has_message_available()
    first = 1 if inclusive else 2
    assert read_n(reader, 5 - first) == names(5, first)
    assert not reader.has_message_available()
    assert_nothing_read(reader)


def test_reader_seek_by_time_continues_from_there(
    client: Any, redis_clean: Any, topic: str
) -> None:
    """A reader re-subscribes after a seek by time without start_message_id:
    the gateway keeps the non-durable cursor it just positioned."""
    ids, k, at = produce_across_a_millisecond(client, redis_clean, topic)
    reader = client.create_reader(topic, EARLIEST)
    assert read_n(reader, len(ids)) == names(len(ids))
    reader.seek(at)
    assert reader.has_message_available()
    assert read_n(reader, len(ids) - k) == names(len(ids), k)
    assert not reader.has_message_available()
    assert_nothing_read(reader)
    produce(client, topic, 1, prefix="n")
    assert read_n(reader, 1) == [b"n-0"]


def test_reader_seek_to_earliest_and_latest(client: Any, topic: str) -> None:
    produce(client, topic, 3)
    reader = client.create_reader(topic, EARLIEST)
    assert read_n(reader, 3) == names(3)
    reader.seek(EARLIEST)
    assert read_n(reader, 3) == names(3)
    reader.seek(LATEST)
    assert not reader.has_message_available()
    assert_nothing_read(reader)
    produce(client, topic, 1, prefix="n")
    assert read_n(reader, 1) == [b"n-0"]


# -- asyncio API -----------------------------------------------------------------------------


async def _read(reader: Any) -> bytes:
    msg = await asyncio.wait_for(reader.read_next(), TIMEOUT)
    return bytes(msg.data())


async def _receive(consumer: Any) -> Any:
    return await asyncio.wait_for(consumer.receive(), TIMEOUT)


async def test_async_reader_and_seek(gateway: Any, redis_clean: Any, topic: str) -> None:
    client = pulsar_asyncio.Client(gateway.url, operation_timeout_seconds=10)
    try:
        producer = await client.create_producer(topic, batching_enabled=False)
        # As produce_across_a_millisecond: ids[k] is the first entry of a new millisecond.
        ids = [await producer.send(b"m-0"), await producer.send(b"m-1")]
        times = [publish_time(redis_clean, topic, i) for i in ids]
        while times[-1] == times[-2] or len(ids) < 4:
            ids.append(await producer.send(f"m-{len(ids)}".encode()))
            times.append(publish_time(redis_clean, topic, ids[-1]))
        k, total = len(ids) - 1, len(ids)

        reader = await client.create_reader(topic, EARLIEST)
        assert await reader.has_message_available()
        assert [await _read(reader) for _ in range(total)] == names(total)
        assert not await reader.has_message_available()

        await reader.seek(ids[1])  # exclusive: continues after m-1
        assert [await _read(reader) for _ in range(total - 2)] == names(total, 2)
        await reader.seek(times[k])  # by time: from the first entry published then
        assert await reader.has_message_available()
        assert [await _read(reader) for _ in range(total - k)] == names(total, k)
        assert not await reader.has_message_available()
        await reader.close()

        from_id = await client.create_reader(topic, ids[2], start_message_id_inclusive=True)
        assert [await _read(from_id) for _ in range(total - 2)] == names(total, 2)
        assert not await from_id.has_message_available()
        await from_id.close()
    finally:
        await client.close()


async def test_async_consumer_seek_and_last_message_id(gateway: Any, topic: str) -> None:
    client = pulsar_asyncio.Client(gateway.url, operation_timeout_seconds=10)
    try:
        consumer = await client.subscribe(topic, "seek", consumer_type=Shared)
        empty = await consumer.get_last_message_id()
        assert (empty.ledger_id(), empty.entry_id()) == (-1, -1)
        producer = await client.create_producer(topic, batching_enabled=False)
        ids = [await producer.send(f"m-{i}".encode()) for i in range(5)]
        last = await consumer.get_last_message_id()
        assert (last.ledger_id(), last.entry_id()) == (ids[-1].ledger_id(), ids[-1].entry_id())

        for expected in names(5):
            msg = await _receive(consumer)
            assert msg.data() == expected
            await consumer.acknowledge(msg)
        await consumer.seek(ids[2])
        for expected in names(5, 3):
            msg = await _receive(consumer)
            assert msg.data() == expected
            await consumer.acknowledge(msg)
        # The asyncio API takes only pulsar.MessageId; its default (-1, -1, -1, -1) is
        # MessageId.earliest.
        await consumer.seek(pulsar.MessageId())
        assert (await _receive(consumer)).data() == b"m-0"
        await consumer.close()
    finally:
        await client.close()


# -- the wire sequence -----------------------------------------------------------------------


def _raw_subscribe(conn: RawConnection, topic: str) -> None:
    conn.request(
        T.SUBSCRIBE,
        T.SUCCESS,
        topic=f"persistent://public/default/{topic}",
        subscription="raw",
        subType=1,  # Shared
        consumer_id=1,
        initialPosition=1,  # Earliest
    )
    conn.send(command(T.FLOW, consumer_id=1, messagePermits=100))


@pytest.mark.parametrize("by", ["id", "time"])
def test_raw_seek_sequence_and_exact_position(
    gateway: Any, client: Any, redis_clean: Any, topic: str, by: str
) -> None:
    """SEEK: CLOSE_CONSUMER to the consumer, then SUCCESS (Java's order,
    ``ServerCnx.handleSeek``); after re-subscribing, the first MESSAGE is exactly the seek
    position (by id: that entry, inclusive; by time: the first entry published at or after
    it), with nothing before it."""
    ids, k, at = produce_across_a_millisecond(client, redis_clean, topic)
    with RawConnection(gateway) as conn:
        conn.handshake()
        _raw_subscribe(conn, topic)
        for _ in ids:
            conn.expect(T.MESSAGE)
        target = ids[k]
        if by == "id":
            seek = command(T.SEEK, consumer_id=1, request_id=conn.request_id())
            seek.seek.message_id.ledgerId = target.ledger_id()
            seek.seek.message_id.entryId = target.entry_id()
        else:
            seek = command(
                T.SEEK,
                consumer_id=1,
                request_id=conn.request_id(),
                message_publish_time=at,
            )
        conn.send(seek)
        conn.expect(T.SUCCESS, lambda c: c.success.request_id == seek.seek.request_id)
        order = [f.command.type for f in conn.received]
        close_at = order.index(T.CLOSE_CONSUMER)
        assert close_at < len(order) - 1  # CLOSE_CONSUMER came before the SUCCESS
        assert conn.received[close_at].command.close_consumer.consumer_id == 1

        _raw_subscribe(conn, topic)
        got = [conn.expect(T.MESSAGE).message.message_id for _ in ids[k:]]
        assert [(m.ledgerId, m.entryId) for m in got] == [
            (i.ledger_id(), i.entry_id()) for i in ids[k:]
        ]
        assert not [f for f in conn.drain() if f.type == T.MESSAGE]
