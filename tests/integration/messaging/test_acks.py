"""Acknowledgement modes through the gateway (ACK / ACK_RESPONSE; docs/binary_protocol.md
"Acknowledgement").

Cumulative ack on Exclusive and Failover, its refusal on Shared and Key_Shared, batch-index
ack (``batch_index_ack_enabled``: a partly acked batch comes back with ``MESSAGE.ack_set``
so only its unacked indexes are delivered again), ack receipts (ACK with a request_id, which
the Python client never sends, so driven with raw frames) and the ids that must be accepted
silently (unknown, duplicate, chunk ids). Redis is the witness: a subscription is a consumer
group, its pending-entries list the unacked entries, ``acksets:<sub>`` the partly acked
batches.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pulsar
import pytest

from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.conftest import TIMEOUT, stream_key, wait_for
from tests.frames import command
from tests.helpers import assert_nothing_more, produce
from tests.rawclient import RawConnection

T = pb.BaseCommand.Type
RECEIVE_MS = int(TIMEOUT * 1000)

Shared = pulsar.ConsumerType.Shared
Exclusive = pulsar.ConsumerType.Exclusive
Failover = pulsar.ConsumerType.Failover
KeyShared = pulsar.ConsumerType.KeyShared

#: Wire values of CommandSubscribe.SubType.
SUB_TYPE = {Exclusive: 0, Shared: 1, Failover: 2, KeyShared: 3}


# -- helpers ---------------------------------------------------------------------------------


def pending_ids(redis: Any, topic: str, sub: str) -> list[str]:
    rows = redis.xpending_range(stream_key(topic), sub, "-", "+", 10_000)
    return [row["message_id"].decode() for row in rows]


def pending_count(redis: Any, topic: str, sub: str) -> int:
    return int(redis.xpending(stream_key(topic), sub)["pending"])


def ack_sets(redis: Any, topic: str, sub: str) -> dict[str, str]:
    key = KeySchema().topic(parse_topic_name(topic)).ack_sets(sub)
    return {k.decode(): v.decode() for k, v in redis.hgetall(key).items()}


def entry_id(msg_or_id: Any) -> str:
    mid = msg_or_id.message_id() if hasattr(msg_or_id, "message_id") else msg_or_id
    return f"{mid.ledger_id()}-{mid.entry_id()}"


def produce_batched(client: Any, topic: str, count: int, per_batch: int) -> list[Any]:
    """``count`` messages ``b"b-<i>"`` in client batches of exactly ``per_batch``."""
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
            assert res == pulsar.Result.Ok
            with lock:
                results[i] = mid

        return done

    for i in range(count):
        producer.send_async(f"b-{i}".encode(), callback(i))
    producer.flush()
    wait_for(lambda: len(results) == count)
    producer.close()
    return [results[i] for i in range(count)]


def receive_n(consumer: Any, count: int) -> list[Any]:
    return [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(count)]


def raw_consumer(
    conn: RawConnection, topic: str, sub: str, sub_type: int, permits: int = 100
) -> None:
    conn.handshake()
    conn.request(
        T.SUBSCRIBE,
        T.SUCCESS,
        topic=f"persistent://public/default/{topic}",
        subscription=sub,
        subType=sub_type,
        consumer_id=1,
        initialPosition=1,  # Earliest
    )
    conn.send(command(T.FLOW, consumer_id=1, messagePermits=permits))


def raw_ack(
    conn: RawConnection,
    ids: list[tuple[int, int]],
    cumulative: bool = False,
    request_id: int | None = None,
    ack_set: list[int] | None = None,
) -> None:
    cmd = command(T.ACK, consumer_id=1, ack_type=1 if cumulative else 0)
    for ledger, entry in ids:
        m = cmd.ack.message_id.add()
        m.ledgerId, m.entryId = ledger % (1 << 64), entry % (1 << 64)
        if ack_set is not None:
            m.ack_set.extend(ack_set)
    if request_id is not None:
        cmd.ack.request_id = request_id
    conn.send(cmd)


def raw_messages(conn: RawConnection, count: int) -> list[pb.CommandMessage]:
    return [conn.expect(T.MESSAGE).message for _ in range(count)]


def wire_id(msg: pb.CommandMessage) -> tuple[int, int]:
    return msg.message_id.ledgerId, msg.message_id.entryId


def sid(msg: pb.CommandMessage) -> str:
    """The stream id of a raw MESSAGE."""
    return f"{msg.message_id.ledgerId}-{msg.message_id.entryId}"


# -- cumulative ack --------------------------------------------------------------------------


@pytest.mark.parametrize("sub_type", [Exclusive, Failover], ids=["exclusive", "failover"])
def test_cumulative_ack_acks_everything_up_to_the_id(
    gateway: Any, client: Any, redis_clean: Any, topic: str, sub_type: Any
) -> None:
    consumer = client.subscribe(topic, "cumul", consumer_type=sub_type)
    produce(client, topic, 10)
    msgs = receive_n(consumer, 10)
    consumer.acknowledge_cumulative(msgs[5])
    wait_for(lambda: pending_ids(redis_clean, topic, "cumul") == [entry_id(m) for m in msgs[6:]])
    consumer.close()

    # A new consumer (as after a reconnect) gets only what follows the cumulative ack.
    again = client.subscribe(topic, "cumul", consumer_type=sub_type)
    rest = receive_n(again, 4)
    assert [m.data() for m in rest] == [b"m-%d" % i for i in range(6, 10)]
    assert_nothing_more(again, quiet_ms=400)
    again.acknowledge_cumulative(rest[-1])
    wait_for(lambda: pending_count(redis_clean, topic, "cumul") == 0)


@pytest.mark.parametrize("sub_type", [Shared, KeyShared], ids=["shared", "key_shared"])
def test_cumulative_ack_refused_by_the_python_client(
    client: Any, redis_clean: Any, topic: str, sub_type: Any
) -> None:
    """The client itself refuses (CumulativeAcknowledgementNotAllowedError) on Shared and
    Key_Shared, and nothing is acked."""
    consumer = client.subscribe(topic, "cumul", consumer_type=sub_type)
    produce(client, topic, 3)
    msgs = receive_n(consumer, 3)
    with pytest.raises(pulsar.CumulativeAcknowledgementNotAllowedError):
        consumer.acknowledge_cumulative(msgs[-1])
    assert_nothing_more(consumer, 300)  # let any ACK that went out be applied
    assert pending_ids(redis_clean, topic, "cumul") == [entry_id(m) for m in msgs]


@pytest.mark.parametrize("sub_type", [Shared, KeyShared], ids=["shared", "key_shared"])
def test_cumulative_ack_refused_on_the_wire(
    gateway: Any, client: Any, redis_clean: Any, topic: str, sub_type: Any
) -> None:
    """A raw cumulative ACK with a request_id gets ACK_RESPONSE NotAllowedError; without
    one it is dropped silently. Either way nothing is acked and the consumer keeps working."""
    produce(client, topic, 3)
    with RawConnection(gateway) as conn:
        raw_consumer(conn, topic, "cumul", SUB_TYPE[sub_type])
        msgs = raw_messages(conn, 3)
        raw_ack(conn, [wire_id(msgs[-1])], cumulative=True, request_id=41)
        response = conn.expect(T.ACK_RESPONSE).ackResponse
        assert (response.consumer_id, response.request_id) == (1, 41)
        assert response.error == pb.NotAllowedError
        assert response.message

        raw_ack(conn, [wire_id(msgs[-1])], cumulative=True)
        conn.assert_open()  # PING/PONG after the ACK: it has been handled
        assert not [f for f in conn.drain() if f.type == T.ACK_RESPONSE]
        assert len(pending_ids(redis_clean, topic, "cumul")) == 3

        # Individual acks still work on the same consumer.
        raw_ack(conn, [wire_id(m) for m in msgs], request_id=42)
        ok = conn.expect(T.ACK_RESPONSE, lambda c: c.ackResponse.request_id == 42).ackResponse
        assert not ok.HasField("error")
        assert pending_count(redis_clean, topic, "cumul") == 0


# -- batch-index ack -------------------------------------------------------------------------


def _batch_consumer(client: Any, topic: str, sub_type: Any) -> Any:
    return client.subscribe(
        topic,
        "bia",
        consumer_type=sub_type,
        batch_index_ack_enabled=True,
        negative_ack_redelivery_delay_ms=100,
    )


@pytest.mark.parametrize(
    ("sub_type", "redeliver"),
    [(Shared, "nack"), (Shared, "reconnect"), (Exclusive, "reconnect"), (Exclusive, "nack")],
    ids=["shared-nack", "shared-reconnect", "exclusive-reconnect", "exclusive-nack"],
)
def test_batch_index_ack_redelivers_only_unacked_indexes(
    client: Any, redis_clean: Any, topic: str, sub_type: Any, redeliver: str
) -> None:
    consumer = _batch_consumer(client, topic, sub_type)
    ids = produce_batched(client, topic, 10, per_batch=5)
    assert len({entry_id(i) for i in ids}) == 2  # two entries of five messages
    msgs = receive_n(consumer, 10)
    assert [m.data() for m in msgs] == [b"b-%d" % i for i in range(10)]
    first_entry = entry_id(msgs[0])

    for i in (0, 2, 5, 6, 7, 8, 9):  # all of the second batch, indexes 0 and 2 of the first
        consumer.acknowledge(msgs[i])
    # The second entry is complete, the first partly acked: "1" = index still unacked.
    wait_for(lambda: pending_ids(redis_clean, topic, "bia") == [first_entry])
    wait_for(lambda: ack_sets(redis_clean, topic, "bia") == {first_entry: "01011"})

    if redeliver == "nack":
        consumer.negative_acknowledge(msgs[1])  # nacks the whole entry
    else:
        consumer.close()
        consumer = _batch_consumer(client, topic, sub_type)
    again = receive_n(consumer, 3)
    assert [m.data() for m in again] == [b"b-1", b"b-3", b"b-4"]
    assert [m.message_id().batch_index() for m in again] == [1, 3, 4]
    assert {entry_id(m) for m in again} == {first_entry}
    assert_nothing_more(consumer, quiet_ms=400)

    # Acking the remaining indexes releases the entry.
    for m in again:
        consumer.acknowledge(m)
    wait_for(lambda: pending_count(redis_clean, topic, "bia") == 0)
    assert ack_sets(redis_clean, topic, "bia") == {}
    consumer.close()
    assert_nothing_more(_batch_consumer(client, topic, sub_type), quiet_ms=400)


def test_batch_index_ack_by_message_id_then_cumulative(
    client: Any, redis_clean: Any, topic: str
) -> None:
    """A cumulative ack of a batch index acks everything before it; the rest of that batch
    stays (partly acked) and comes back alone after a reconnect."""
    consumer = _batch_consumer(client, topic, Exclusive)
    produce_batched(client, topic, 8, per_batch=4)
    msgs = receive_n(consumer, 8)
    consumer.acknowledge_cumulative(msgs[5])  # the first batch and indexes 0..1 of the second
    second = entry_id(msgs[4])
    wait_for(lambda: pending_ids(redis_clean, topic, "bia") == [second])
    wait_for(lambda: ack_sets(redis_clean, topic, "bia") == {second: "0011"})
    consumer.close()

    consumer = _batch_consumer(client, topic, Exclusive)
    again = receive_n(consumer, 2)
    assert [m.data() for m in again] == [b"b-6", b"b-7"]
    assert_nothing_more(consumer, quiet_ms=400)
    consumer.acknowledge_cumulative(again[-1])
    wait_for(lambda: pending_count(redis_clean, topic, "bia") == 0)
    assert ack_sets(redis_clean, topic, "bia") == {}


def test_raw_batch_index_ack_with_receipt(
    gateway: Any, client: Any, redis_clean: Any, topic: str
) -> None:
    """ACK with ack_set and a request_id: ACK_RESPONSE, the entry stays pending until the
    last index is acked, and a redelivery carries MESSAGE.ack_set."""
    produce_batched(client, topic, 3, per_batch=3)
    with RawConnection(gateway) as conn:
        raw_consumer(conn, topic, "bia", SUB_TYPE[Shared])
        (msg,) = raw_messages(conn, 1)
        assert not msg.ack_set
        raw_ack(conn, [wire_id(msg)], request_id=7, ack_set=[0b110])  # index 0 acked
        assert not conn.expect(T.ACK_RESPONSE).ackResponse.HasField("error")
        eid = sid(msg)
        assert pending_ids(redis_clean, topic, "bia") == [eid]
        assert ack_sets(redis_clean, topic, "bia") == {eid: "011"}

        redeliver = command(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=1)
        redeliver.redeliverUnacknowledgedMessages.message_ids.add().CopyFrom(msg.message_id)
        conn.send(redeliver)
        again = conn.expect(T.MESSAGE).message
        assert wire_id(again) == wire_id(msg)
        assert list(again.ack_set) == [0b110]
        assert again.redelivery_count == 1

        raw_ack(conn, [wire_id(msg)], request_id=8, ack_set=[0b100])  # index 1 acked
        conn.expect(T.ACK_RESPONSE, lambda c: c.ackResponse.request_id == 8)
        assert ack_sets(redis_clean, topic, "bia") == {eid: "001"}
        raw_ack(conn, [wire_id(msg)], request_id=9, ack_set=[0])  # index 2: all acked
        conn.expect(T.ACK_RESPONSE, lambda c: c.ackResponse.request_id == 9)
        assert pending_count(redis_clean, topic, "bia") == 0
        assert ack_sets(redis_clean, topic, "bia") == {}


# -- receipts and ids accepted silently ------------------------------------------------------


@pytest.mark.parametrize(
    ("sub_type", "cumulative"),
    [(Shared, False), (Exclusive, False), (Exclusive, True), (Failover, True)],
    ids=["shared-individual", "exclusive-individual", "exclusive-cumulative", "failover-cumul"],
)
def test_ack_receipt(
    gateway: Any, client: Any, redis_clean: Any, topic: str, sub_type: Any, cumulative: bool
) -> None:
    produce(client, topic, 4)
    with RawConnection(gateway) as conn:
        raw_consumer(conn, topic, "rcpt", SUB_TYPE[sub_type])
        msgs = raw_messages(conn, 4)
        ids = [wire_id(msgs[2])] if cumulative else [wire_id(m) for m in msgs[:3]]
        raw_ack(conn, ids, cumulative=cumulative, request_id=123)
        response = conn.expect(T.ACK_RESPONSE).ackResponse
        assert (response.consumer_id, response.request_id) == (1, 123)
        assert not response.HasField("error")
        # The receipt follows the ack's effect: no waiting needed.
        assert pending_ids(redis_clean, topic, "rcpt") == [sid(msgs[3])]


def test_unknown_and_duplicate_ids_accepted_silently(
    gateway: Any, client: Any, redis_clean: Any, topic: str
) -> None:
    produce(client, topic, 2)
    with RawConnection(gateway) as conn:
        raw_consumer(conn, topic, "dup", SUB_TYPE[Shared])
        msgs = raw_messages(conn, 2)
        first = wire_id(msgs[0])
        unknown = [(1, 1), (first[0] + 10_000_000, 0), (first[0], first[1] + 1000), (-1, -1)]
        raw_ack(conn, [first, first])  # duplicate within one ACK
        raw_ack(conn, [first])  # and again
        raw_ack(conn, unknown)  # never stored
        raw_ack(conn, unknown, cumulative=True)  # refused type: silently dropped
        conn.assert_open()
        assert not [f for f in conn.drain() if f.type in (T.ACK_RESPONSE, T.ERROR)]
        assert pending_ids(redis_clean, topic, "dup") == [sid(msgs[1])]

        # With receipts: success, not an error (Pulsar answers acks of gone ids with OK).
        raw_ack(conn, [first, *unknown[:3]], request_id=5)
        assert not conn.expect(T.ACK_RESPONSE).ackResponse.HasField("error")
        assert pending_ids(redis_clean, topic, "dup") == [sid(msgs[1])]


def test_python_client_double_ack_and_ack_of_previous_delivery(
    client: Any, redis_clean: Any, topic: str
) -> None:
    """Acking twice, and acking a message object from before a redelivery, is harmless."""
    consumer = client.subscribe(topic, "twice", consumer_type=Shared)
    produce(client, topic, 3)
    msgs = receive_n(consumer, 3)
    consumer.acknowledge(msgs[0])
    consumer.acknowledge(msgs[0])
    consumer.close()
    consumer = client.subscribe(topic, "twice", consumer_type=Shared)
    again = receive_n(consumer, 2)
    assert [m.data() for m in again] == [b"m-1", b"m-2"]
    consumer.acknowledge(msgs[1])  # the id from the first delivery
    consumer.acknowledge(again[1])
    consumer.acknowledge(again[1].message_id())
    wait_for(lambda: pending_count(redis_clean, topic, "twice") == 0)
    assert_nothing_more(consumer, quiet_ms=400)


# The client's max_message_size comes from CONNECTED and is process-global (static
# ``ClientConnection::maxMessageSize_`` in the C++ client), so
# chunking runs in its own process against a gateway announcing a small limit.
_CHUNKED = """
import sys, pulsar
client = pulsar.Client(sys.argv[1], logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
consumer = client.subscribe(sys.argv[2], "chunks", consumer_type=pulsar.ConsumerType.Shared)
producer = client.create_producer(sys.argv[2], chunking_enabled=True, batching_enabled=False)
payload = bytes(range(256)) * 20
msg_id = producer.send(payload)
msg = consumer.receive(timeout_millis=10000)
assert msg.data() == payload, "payload differs"
consumer.acknowledge(msg)
consumer.close()
print(msg_id, flush=True)
client.close()
"""


def test_chunked_message_ack_acks_every_chunk(
    gateway_factory: Any, redis_clean: Any, topic: str
) -> None:
    gw = gateway_factory(max_message_size=2000)
    out = subprocess.run(
        [sys.executable, "-c", _CHUNKED, gw.url, topic],
        capture_output=True,
        text=True,
        timeout=3 * TIMEOUT,
        check=True,
    ).stdout
    assert ";" in out  # a chunked id: "(first chunk);(last chunk)"
    assert redis_clean.xlen(stream_key(topic)) >= 3  # one entry per chunk
    assert pending_count(redis_clean, topic, "chunks") == 0
