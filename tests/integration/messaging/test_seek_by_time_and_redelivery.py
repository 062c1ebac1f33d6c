"""Two binary-protocol rules pinned against Pulsar's broker.

Seek and reset by time. Pulsar's ``PersistentSubscription.resetCursor(timestamp)`` (what
``ServerCnx.handleSeek`` runs for ``message_publish_time`` and the admin API's
``resetcursor/{timestamp}`` runs) asks ``PersistentMessageFinder`` for the newest entry
published before the timestamp (``MessageImpl.isEntryPublishedEarlierThan``: publish time <
timestamp) and restarts at the entry after it: a message published in the very millisecond
of the timestamp is delivered again, the one before it is not, and the time compared is the
producer's ``MessageMetadata.publish_time``, not when the broker stored the entry. A raw
producer sets publish times freely here, far from the Redis clock, so only a search by
publish time finds the position.

Redelivery. ``ServerCnx.handleRedeliverUnacknowledged`` honours the message ids of
REDELIVER_UNACKNOWLEDGED_MESSAGES only on Shared and Key_Shared subscriptions
(``Subscription.isIndividualAckMode``); on Exclusive and Failover every unacknowledged
message of the consumer comes again, in order.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pulsar
import pulsar.asyncio as pulsar_asyncio
import pytest

from pulsar_gateway.core.model.entry import BROKER_TIME, PUBLISH_TIME
from pulsar_gateway.entry_codec import make_blob, parse_blob
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread, stream_key
from tests.frames import command
from tests.helpers import assert_nothing_more, receive_payloads
from tests.rawclient import RawConnection

# The cluster pass of ./dev test runs this file on a Redis Cluster too: seek and reset by
# publish time (the search over a topic's stream), REDELIVER with ids
pytestmark = pytest.mark.cluster

T = pb.BaseCommand.Type

#: Publish times far from the Redis clock (2001): the stored entries' broker timestamps
#: say nothing of them.
BASE = 1_000_000_000_000
#: m-0 .. m-5 and their publish times: m-2 and m-3 share a millisecond.
PUBLISHED = [BASE, BASE + 10, BASE + 20, BASE + 20, BASE + 30, BASE + 40]


def full(topic: str) -> str:
    return f"persistent://public/default/{topic}"


def names(start: int, stop: int = len(PUBLISHED)) -> list[bytes]:
    return [f"m-{i}".encode() for i in range(start, stop)]


def produce_at(gateway: GatewayThread, topic: str, times: list[int]) -> None:
    """Send ``m-<i>`` with ``MessageMetadata.publish_time = times[i]``, one entry each."""
    with RawConnection(gateway) as conn:
        conn.handshake()
        name = conn.create_producer(full(topic))
        for seq, at in enumerate(times):
            metadata = pb.MessageMetadata(producer_name=name, sequence_id=seq, publish_time=at)
            blob = make_blob(metadata, f"m-{seq}".encode())
            conn.send_payload(command(T.SEND, producer_id=1, sequence_id=seq), blob)
            conn.expect(T.SEND_RECEIPT, lambda c, s=seq: c.send_receipt.sequence_id == s)


def reset_by_time(gateway: GatewayThread, topic: str, sub: str, at: int) -> None:
    url = f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/subscription/{sub}"
    assert admin("POST", f"{url}/resetcursor/{at}") == (204, None)


# -- seek and reset by publish time ------------------------------------------------------------


def test_the_append_stores_the_producers_publish_time(
    gateway: GatewayThread, redis_clean: Any, topic: str
) -> None:
    produce_at(gateway, topic, PUBLISHED)
    entries = redis_clean.xrange(stream_key(topic))
    assert [int(fields[PUBLISH_TIME]) for _, fields in entries] == PUBLISHED
    # what the search reads is what the producer wrote in the metadata
    stored = [parse_blob(fields[b"m"]).metadata.publish_time for _, fields in entries]
    assert stored == PUBLISHED


# (seek time, first message delivered again): restart after the newest entry published
# before the time, at the first entry when none is, nowhere when all are
CASES = [
    pytest.param(BASE + 20, 2, id="at-a-shared-millisecond-both-delivered"),
    pytest.param(BASE + 10, 1, id="at-exactly-that-one-delivered"),
    pytest.param(BASE + 15, 2, id="between"),
    pytest.param(BASE - 1, 0, id="before-all"),
    pytest.param(BASE, 0, id="at-the-first"),
    pytest.param(BASE + 40, 5, id="at-the-last"),
    pytest.param(BASE + 41, 6, id="after-the-last"),
]


@pytest.mark.parametrize(("at", "first"), CASES)
@pytest.mark.parametrize("how", ["seek", "admin-reset"])
def test_seek_by_time_restarts_after_the_newest_entry_published_before_it(
    gateway: GatewayThread, client: Any, topic: str, at: int, first: int, how: str
) -> None:
    consumer = client.subscribe(
        topic,
        "s",
        consumer_type=pulsar.ConsumerType.Exclusive,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    produce_at(gateway, topic, PUBLISHED)
    assert receive_payloads(consumer, len(PUBLISHED)) == names(0)
    if how == "seek":
        consumer.seek(at)
    else:
        reset_by_time(gateway, topic, "s", at)
    assert receive_payloads(consumer, len(PUBLISHED) - first) == names(first)
    assert_nothing_more(consumer)


def test_raw_seek_by_publish_time_first_message_is_exact(
    gateway: GatewayThread, topic: str
) -> None:
    """On the wire: after SEEK(message_publish_time=m-2's) and re-subscribing, the first
    MESSAGE is m-2 (m-2 and m-3 were published in that millisecond), with nothing before."""
    produce_at(gateway, topic, PUBLISHED)
    with RawConnection(gateway) as conn:
        conn.handshake()
        subscribe = {
            "topic": full(topic),
            "subscription": "raw",
            "subType": 0,  # Exclusive
            "consumer_id": 1,
            "initialPosition": 1,  # Earliest
        }
        conn.request(T.SUBSCRIBE, T.SUCCESS, **subscribe)
        conn.send(command(T.FLOW, consumer_id=1, messagePermits=100))
        ids = [conn.expect(T.MESSAGE).message.message_id for _ in PUBLISHED]
        conn.request(T.SEEK, T.SUCCESS, consumer_id=1, message_publish_time=BASE + 20)
        conn.request(T.SUBSCRIBE, T.SUCCESS, **subscribe)
        conn.send(command(T.FLOW, consumer_id=1, messagePermits=100))
        again = [conn.expect(T.MESSAGE).message.message_id for _ in ids[2:]]
        assert [(m.ledgerId, m.entryId) for m in again] == [
            (m.ledgerId, m.entryId) for m in ids[2:]
        ]
        assert not [f for f in conn.drain() if f.type == T.MESSAGE]


def test_reset_by_time_on_a_partitioned_topic_searches_each_partition(
    gateway: GatewayThread, client: Any, topic: str
) -> None:
    """Every partition is searched by its own entries' publish times."""
    base = f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}"
    assert admin("PUT", f"{base}/partitions", 2)[0] in (200, 204)
    for partition in range(2):
        produce_at(gateway, f"{topic}-partition-{partition}", PUBLISHED)
    consumer = client.subscribe(
        topic,
        "s",
        consumer_type=pulsar.ConsumerType.Exclusive,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    assert sorted(receive_payloads(consumer, 2 * len(PUBLISHED))) == sorted(names(0) * 2)
    reset_by_time(gateway, topic, "s", BASE + 20)
    assert sorted(receive_payloads(consumer, 2 * 4)) == sorted(names(2) * 2)
    assert_nothing_more(consumer)


def test_entries_stored_without_a_publish_time_fall_back_to_their_broker_timestamp(
    client: Any, redis_clean: Any, topic: str
) -> None:
    """An entry stored before the publish time was kept has only its broker timestamp,
    which then stands in for it (the blob's metadata is not read)."""
    stream = stream_key(topic)
    for i in range(3):
        metadata = pb.MessageMetadata(producer_name="old", sequence_id=i, publish_time=BASE)
        blob = make_blob(metadata, f"m-{i}".encode())
        redis_clean.xadd(stream, {b"m": blob, BROKER_TIME: 1000 + 10 * i}, id=f"500-{i}")
    consumer = client.subscribe(
        topic,
        "s",
        consumer_type=pulsar.ConsumerType.Exclusive,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    assert receive_payloads(consumer, 3) == names(0, 3)
    consumer.seek(1011)  # after m-1's broker timestamp: m-1 is skipped, m-2 comes again
    assert receive_payloads(consumer, 1) == names(2, 3)
    consumer.seek(1010)  # m-1's: m-1 comes again
    assert receive_payloads(consumer, 2) == names(1, 3)
    assert_nothing_more(consumer)


# -- the official client's asyncio test_seek_timestamp, with its exact expectation -------------


async def test_asyncio_seek_timestamp_as_the_official_suite(
    gateway: GatewayThread, topic: str
) -> None:
    """The official client's ``asyncio_test.py`` ``test_seek_timestamp``: 3 messages, take
    the time, 2 more, consume all, seek to the time: ``msg-3`` comes first. Its publish time
    is mostly in the very millisecond the time was taken (its batch leaves 10 ms later, so
    the broker timestamps are later still), and ``msg-2`` was often stored in it: only the
    publish time with Pulsar's rule (the first message published at or after the time)
    gives ``msg-3`` every time."""
    client = pulsar_asyncio.Client(gateway.url, operation_timeout_seconds=10)
    try:
        consumer = await client.subscribe(
            topic, "sub", initial_position=pulsar.InitialPosition.Earliest
        )
        producer = await client.create_producer(topic)
        for i in range(3):
            await producer.send(f"msg-{i}".encode())
        seek_time = int(time.time() * 1000)
        for i in range(3, 5):
            await producer.send(f"msg-{i}".encode())
        published = []
        for i in range(5):
            msg = await asyncio.wait_for(consumer.receive(), TIMEOUT)
            assert msg.data() == f"msg-{i}".encode()
            published.append(msg.publish_timestamp())
        await consumer.seek(seek_time)
        assert next(i for i, at in enumerate(published) if at >= seek_time) == 3
        msg = await asyncio.wait_for(consumer.receive(), TIMEOUT)
        assert msg.data() == b"msg-3"
    finally:
        await client.close()


# -- REDELIVER_UNACKNOWLEDGED_MESSAGES with message ids ----------------------------------------


def _subscribe_raw(conn: RawConnection, topic: str, sub_type: int) -> list[pb.MessageIdData]:
    conn.request(
        T.SUBSCRIBE,
        T.SUCCESS,
        topic=full(topic),
        subscription="redeliver",
        subType=sub_type,
        consumer_id=1,
        initialPosition=1,  # Earliest
    )
    conn.send(command(T.FLOW, consumer_id=1, messagePermits=100))
    return [conn.expect(T.MESSAGE).message.message_id for _ in range(5)]


def _redeliver(conn: RawConnection, ids: list[pb.MessageIdData]) -> None:
    cmd = command(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=1)
    for mid in ids:
        cmd.redeliverUnacknowledgedMessages.message_ids.add(
            ledgerId=mid.ledgerId, entryId=mid.entryId
        )
    conn.send(cmd)


def _key(mid: pb.MessageIdData) -> tuple[int, int]:
    return (mid.ledgerId, mid.entryId)


@pytest.mark.parametrize("sub_type", [0, 2], ids=["exclusive", "failover"])
def test_redeliver_with_ids_on_exclusive_and_failover_redelivers_every_unacked(
    gateway: GatewayThread, client: Any, topic: str, sub_type: int
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"m-{i}".encode())
    with RawConnection(gateway) as conn:
        conn.handshake()
        ids = _subscribe_raw(conn, topic, sub_type)
        # m-0 acknowledged; m-1..m-4 unacked; the command names only m-2 and m-4
        ack = command(T.ACK, consumer_id=1, ack_type=pb.CommandAck.Individual)
        ack.ack.message_id.add(ledgerId=ids[0].ledgerId, entryId=ids[0].entryId)
        conn.send(ack)
        _redeliver(conn, [ids[2], ids[4]])
        again = [conn.expect(T.MESSAGE).message for _ in range(4)]
        # every unacked message, in order, none twice
        assert [_key(m.message_id) for m in again] == [_key(i) for i in ids[1:]]
        assert not [f for f in conn.drain() if f.type == T.MESSAGE]
    producer.close()


def test_redeliver_with_ids_on_shared_redelivers_only_those(
    gateway: GatewayThread, client: Any, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"m-{i}".encode())
    with RawConnection(gateway) as conn:
        conn.handshake()
        ids = _subscribe_raw(conn, topic, 1)  # Shared
        _redeliver(conn, [ids[2], ids[4]])
        again = [conn.expect(T.MESSAGE).message for _ in range(2)]
        assert [_key(m.message_id) for m in again] == [_key(ids[2]), _key(ids[4])]
        assert [m.redelivery_count for m in again] == [1, 1]
        assert not [f for f in conn.drain() if f.type == T.MESSAGE]
    producer.close()


def test_redeliver_without_ids_on_exclusive_still_redelivers_every_unacked(
    gateway: GatewayThread, client: Any, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"m-{i}".encode())
    with RawConnection(gateway) as conn:
        conn.handshake()
        ids = _subscribe_raw(conn, topic, 0)
        _redeliver(conn, [])
        again = [conn.expect(T.MESSAGE).message for _ in range(5)]
        assert [_key(m.message_id) for m in again] == [_key(i) for i in ids]
        assert not [f for f in conn.drain() if f.type == T.MESSAGE]
    producer.close()
