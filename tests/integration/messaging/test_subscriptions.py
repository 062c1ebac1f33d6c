"""Subscription semantics through the gateway with the official client (pulsar-client 3.13).

Subscription types and their exclusivity rules, initial positions, flow control (proved from
the Redis side: a subscription is a consumer group, its pending-entries list is what has
been handed to consumers and not acked), acks, negative acks, ack timeout, redelivery when a
consumer leaves, unsubscribe and the last-message-id query.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any

import pulsar
import pytest

from tests.conftest import TIMEOUT, stream_key, wait_for
from tests.helpers import assert_nothing_more, produce

# The cluster pass of ./dev test runs this file on a Redis Cluster too: subscriptions:
# Exclusive and Shared (exclusivity, initial positions, flow permits, acks, ack timeout,
# handover when a consumer leaves, unsubscribe); negative acks
pytestmark = pytest.mark.cluster

RECEIVE_MS = int(TIMEOUT * 1000)
#: How long to let the gateway finish dispatching before checking that nothing more went out.
SETTLE = 0.5

Shared = pulsar.ConsumerType.Shared
Exclusive = pulsar.ConsumerType.Exclusive


# -- helpers ---------------------------------------------------------------------------------


def pending_count(redis: Any, topic: str, sub: str) -> int:
    """Entries of the subscription handed out and not acked (XPENDING summary count)."""
    return int(redis.xpending(stream_key(topic), sub)["pending"])


def pending_ids(redis: Any, topic: str, sub: str) -> list[str]:
    rows = redis.xpending_range(stream_key(topic), sub, "-", "+", 10_000)
    return [row["message_id"].decode() for row in rows]


def group_names(redis: Any, topic: str) -> list[str]:
    return [g["name"].decode() for g in redis.xinfo_groups(stream_key(topic))]


def entry_id(msg: Any) -> str:
    mid = msg.message_id()
    return f"{mid.ledger_id()}-{mid.entry_id()}"


def produce_batched(client: Any, topic: str, count: int, per_batch: int) -> list[Any]:
    """Send ``count`` messages in client batches of exactly ``per_batch`` (async + flush)."""
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=per_batch,
        batching_max_publish_delay_ms=60_000,
    )
    results: list[tuple[int, Any, Any]] = []
    lock = threading.Lock()

    def callback(i: int) -> Any:
        def done(res: Any, mid: Any) -> None:
            with lock:
                results.append((i, res, mid))

        return done

    for i in range(count):
        producer.send_async(f"b-{i}".encode(), callback(i))
    producer.flush()
    wait_for(lambda: len(results) == count)
    assert {r[1] for r in results} == {pulsar.Result.Ok}
    producer.close()
    return [r[2] for r in sorted(results, key=lambda r: r[0])]


def receive(consumer: Any, timeout_ms: int = RECEIVE_MS) -> Any:
    return consumer.receive(timeout_millis=timeout_ms)


def receive_n(consumer: Any, count: int, ack: bool = True) -> list[Any]:
    msgs = []
    for _ in range(count):
        msg = receive(consumer)
        if ack:
            consumer.acknowledge(msg)
        msgs.append(msg)
    return msgs


def receive_from_any(consumers: list[Any], count: int, timeout: float = TIMEOUT) -> list[list[Any]]:
    """Poll every consumer in turn until ``count`` messages arrived in all (acking them);
    returns the messages each consumer got."""
    got: list[list[Any]] = [[] for _ in consumers]
    deadline = time.monotonic() + timeout
    while sum(map(len, got)) < count:
        assert time.monotonic() < deadline, f"only {sum(map(len, got))} of {count} arrived"
        for i, consumer in enumerate(consumers):
            try:
                msg = consumer.receive(timeout_millis=20)
            except pulsar.Timeout:
                continue
            consumer.acknowledge(msg)
            got[i].append(msg)
    return got


# -- subscription types ----------------------------------------------------------------------


def test_exclusive_subscription_receives(client: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "ex", consumer_type=Exclusive)
    produce(client, topic, 3)
    assert [m.data() for m in receive_n(consumer, 3)] == [b"m-0", b"m-1", b"m-2"]
    assert consumer.subscription_name() == "ex"
    assert_nothing_more(consumer)


def test_shared_subscription_receives(client: Any, topic: str) -> None:
    first = client.subscribe(topic, "sh", consumer_type=Shared)
    second = client.subscribe(topic, "sh", consumer_type=Shared)
    produce(client, topic, 3)
    got = receive_from_any([first, second], 3)
    assert sorted(m.data() for m in got[0] + got[1]) == [b"m-0", b"m-1", b"m-2"]
    assert_nothing_more(first, 200)
    assert_nothing_more(second, 200)


def test_second_exclusive_consumer_is_busy(client: Any, topic: str) -> None:
    client.subscribe(topic, "ex", consumer_type=Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "ex", consumer_type=Exclusive)


def test_shared_consumer_on_live_exclusive_is_busy(client: Any, topic: str) -> None:
    client.subscribe(topic, "ex", consumer_type=Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "ex", consumer_type=Shared)


def test_exclusive_free_again_after_close(client: Any, topic: str) -> None:
    first = client.subscribe(topic, "ex", consumer_type=Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "ex", consumer_type=Exclusive)
    first.close()
    second = client.subscribe(topic, "ex", consumer_type=Exclusive)
    produce(client, topic, 1)
    assert receive(second).data() == b"m-0"


def test_exclusive_busy_across_gateways(
    gateway_factory: Any, client_factory: Any, topic: str
) -> None:
    one, two = gateway_factory(), gateway_factory()
    client_factory(one.url).subscribe(topic, "ex", consumer_type=Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client_factory(two.url).subscribe(topic, "ex", consumer_type=Exclusive)


def test_first_message_after_subscribe_is_prompt(client: Any, topic: str) -> None:
    """A message sent right after a new subscription's consumer is attached must be
    dispatched at once, not after the dispatcher's 1 s fallback poll."""
    for n in range(5):
        name = f"{topic}-{n}"
        consumer = client.subscribe(name, "prompt", consumer_type=Shared)
        producer = client.create_producer(name, batching_enabled=False)
        start = time.monotonic()
        producer.send(b"first")
        msg = receive(consumer, 5000)
        latency = time.monotonic() - start
        assert msg.data() == b"first"
        assert latency < 0.5, f"first message on {name} took {latency:.3f}s"
        # Once the notification channel is live, later messages are prompt too.
        start = time.monotonic()
        producer.send(b"second")
        assert receive(consumer, 5000).data() == b"second"
        assert time.monotonic() - start < 0.5


# -- initial position ------------------------------------------------------------------------


def test_initial_position_latest(client: Any, topic: str) -> None:
    produce(client, topic, 3, prefix="before")
    consumer = client.subscribe(topic, "latest", initial_position=pulsar.InitialPosition.Latest)
    assert_nothing_more(consumer)
    produce(client, topic, 2, prefix="after")
    assert [m.data() for m in receive_n(consumer, 2)] == [b"after-0", b"after-1"]
    assert_nothing_more(consumer)


def test_initial_position_earliest(client: Any, topic: str) -> None:
    produce(client, topic, 3, prefix="before")
    consumer = client.subscribe(topic, "earliest", initial_position=pulsar.InitialPosition.Earliest)
    produce(client, topic, 2, prefix="after")
    assert [m.data() for m in receive_n(consumer, 5)] == [
        b"before-0",
        b"before-1",
        b"before-2",
        b"after-0",
        b"after-1",
    ]
    assert_nothing_more(consumer)


def test_initial_position_applies_only_when_created(client: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Latest)
    produce(client, topic, 2)
    consumer.close()
    # The subscription exists: Earliest does not rewind it, the backlog is delivered once.
    again = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    assert [m.data() for m in receive_n(again, 2)] == [b"m-0", b"m-1"]
    assert_nothing_more(again)


# -- flow control ----------------------------------------------------------------------------


def test_flow_permits_honoured_exactly(client: Any, redis_clean: Any, topic: str) -> None:
    produce(client, topic, 50)
    first = client.subscribe(
        topic,
        "flow",
        consumer_type=Shared,
        receiver_queue_size=5,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    wait_for(lambda: pending_count(redis_clean, topic, "flow") >= 5)
    time.sleep(SETTLE)
    assert pending_count(redis_clean, topic, "flow") == 5

    second = client.subscribe(
        topic,
        "flow",
        consumer_type=Shared,
        receiver_queue_size=3,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    wait_for(lambda: pending_count(redis_clean, topic, "flow") >= 8)
    time.sleep(SETTLE)
    assert pending_count(redis_clean, topic, "flow") == 8
    # The pending entries are the first 8 of the stream, handed out in order.
    stream_ids = [eid.decode() for eid, _ in redis_clean.xrange(stream_key(topic), count=8)]
    assert pending_ids(redis_clean, topic, "flow") == stream_ids
    assert first.subscription_name() == second.subscription_name() == "flow"


def test_flow_permits_with_batches(client: Any, redis_clean: Any, topic: str) -> None:
    produce_batched(client, topic, 50, per_batch=10)
    assert redis_clean.xlen(stream_key(topic)) == 5
    client.subscribe(
        topic,
        "flow",
        consumer_type=Shared,
        receiver_queue_size=5,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    wait_for(lambda: pending_count(redis_clean, topic, "flow") >= 1)
    time.sleep(SETTLE)
    # 5 permits: a whole entry of 10 goes out while permits remain, then nothing more.
    assert pending_count(redis_clean, topic, "flow") == 1

    client.subscribe(
        topic,
        "flow",
        consumer_type=Shared,
        receiver_queue_size=3,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    wait_for(lambda: pending_count(redis_clean, topic, "flow") >= 2)
    time.sleep(SETTLE)
    assert pending_count(redis_clean, topic, "flow") == 2


def test_flow_refill_delivers_whole_backlog(client: Any, topic: str) -> None:
    produce(client, topic, 40)
    consumer = client.subscribe(
        topic,
        "flow",
        consumer_type=Shared,
        receiver_queue_size=4,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    assert [m.data() for m in receive_n(consumer, 40)] == [b"m-%d" % i for i in range(40)]
    assert_nothing_more(consumer)


# -- shared dispatch -------------------------------------------------------------------------


def test_shared_consumers_split_messages(client: Any, redis_clean: Any, topic: str) -> None:
    consumers = [
        client.subscribe(topic, "split", consumer_type=Shared, receiver_queue_size=10)
        for _ in range(2)
    ]
    produce(client, topic, 200)
    got = [[m.data() for m in msgs] for msgs in receive_from_any(consumers, 200, 2 * TIMEOUT)]
    assert got[0] and got[1], [len(g) for g in got]
    everything = got[0] + got[1]
    assert len(everything) == 200
    assert set(everything) == {b"m-%d" % i for i in range(200)}
    for consumer in consumers:
        assert_nothing_more(consumer, 200)
    wait_for(lambda: pending_count(redis_clean, topic, "split") == 0)


# -- acknowledgement -------------------------------------------------------------------------


def test_individual_ack_and_restart(client: Any, redis_clean: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "acks", consumer_type=Shared)
    produce(client, topic, 10)
    msgs = receive_n(consumer, 10, ack=False)
    assert [m.data() for m in msgs] == [b"m-%d" % i for i in range(10)]
    assert pending_count(redis_clean, topic, "acks") == 10
    for m in msgs[::2]:
        consumer.acknowledge(m)
    unacked = {entry_id(m) for m in msgs[1::2]}
    wait_for(lambda: set(pending_ids(redis_clean, topic, "acks")) == unacked)
    consumer.close()

    restarted = client.subscribe(topic, "acks", consumer_type=Shared)
    again = receive_n(restarted, 5)
    assert [m.data() for m in again] == [b"m-%d" % i for i in range(1, 10, 2)]
    assert [m.redelivery_count() for m in again] == [1] * 5
    assert_nothing_more(restarted)
    wait_for(lambda: pending_count(redis_clean, topic, "acks") == 0)


def test_acknowledge_by_message_id(client: Any, redis_clean: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "acks", consumer_type=Shared)
    produce(client, topic, 3)
    msgs = receive_n(consumer, 3, ack=False)
    consumer.acknowledge(msgs[1].message_id())
    wait_for(
        lambda: pending_ids(redis_clean, topic, "acks") == [entry_id(msgs[0]), entry_id(msgs[2])]
    )


def test_acknowledge_cumulative_exclusive(client: Any, redis_clean: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "cumul", consumer_type=Exclusive)
    produce(client, topic, 10)
    msgs = receive_n(consumer, 10, ack=False)
    assert pending_count(redis_clean, topic, "cumul") == 10
    consumer.acknowledge_cumulative(msgs[5])
    wait_for(lambda: pending_ids(redis_clean, topic, "cumul") == [entry_id(m) for m in msgs[6:]])
    consumer.acknowledge_cumulative(msgs[-1])
    wait_for(lambda: pending_count(redis_clean, topic, "cumul") == 0)
    consumer.close()
    again = client.subscribe(topic, "cumul", consumer_type=Exclusive)
    assert_nothing_more(again)


def test_acknowledge_cumulative_batched(client: Any, redis_clean: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "cumul", consumer_type=Exclusive)
    produce_batched(client, topic, 20, per_batch=5)
    msgs = receive_n(consumer, 20, ack=False)
    assert pending_count(redis_clean, topic, "cumul") == 4
    consumer.acknowledge_cumulative(msgs[-1])
    wait_for(lambda: pending_count(redis_clean, topic, "cumul") == 0)


# -- negative ack, ack timeout ---------------------------------------------------------------


def test_negative_ack_shared_counts_redeliveries(client: Any, topic: str) -> None:
    consumer = client.subscribe(
        topic, "nack", consumer_type=Shared, negative_ack_redelivery_delay_ms=100
    )
    produce(client, topic, 1)
    counts = []
    msg = None
    for _ in range(3):
        msg = receive(consumer, 5000)
        assert msg.data() == b"m-0"
        counts.append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
    assert counts == [0, 1, 2]
    msg = receive(consumer, 5000)
    assert msg.redelivery_count() == 3
    consumer.acknowledge(msg)
    assert_nothing_more(consumer, 500)


def test_negative_ack_exclusive_redelivers_with_count_zero(
    client: Any, redis_clean: Any, topic: str
) -> None:
    consumer = client.subscribe(
        topic, "nack", consumer_type=Exclusive, negative_ack_redelivery_delay_ms=100
    )
    produce(client, topic, 1)
    first = receive(consumer, 5000)
    consumer.negative_acknowledge(first)
    second = receive(consumer, 5000)
    assert second.data() == b"m-0"
    assert str(second.message_id()) == str(first.message_id())
    assert (first.redelivery_count(), second.redelivery_count()) == (0, 0)
    consumer.acknowledge(second)
    wait_for(lambda: pending_count(redis_clean, topic, "nack") == 0)


def test_negative_ack_only_named_message_shared(client: Any, topic: str) -> None:
    consumer = client.subscribe(
        topic, "nack", consumer_type=Shared, negative_ack_redelivery_delay_ms=100
    )
    produce(client, topic, 3)
    msgs = receive_n(consumer, 3, ack=False)
    consumer.acknowledge(msgs[0])
    consumer.acknowledge(msgs[2])
    consumer.negative_acknowledge(msgs[1])
    again = receive(consumer, 5000)
    assert (again.data(), again.redelivery_count()) == (b"m-1", 1)
    consumer.acknowledge(again)
    assert_nothing_more(consumer, 500)


def test_ack_timeout_redelivers(client: Any, topic: str) -> None:
    consumer = client.subscribe(
        topic, "timeout", consumer_type=Shared, unacked_messages_timeout_ms=10_000
    )
    produce(client, topic, 1)
    first = receive(consumer, 5000)
    assert first.redelivery_count() == 0
    start = time.monotonic()
    second = receive(consumer, 20_000)
    elapsed = time.monotonic() - start
    assert second.data() == b"m-0"
    assert second.redelivery_count() == 1
    assert str(second.message_id()) == str(first.message_id())
    assert 8.0 <= elapsed <= 15.0, elapsed
    consumer.acknowledge(second)


# -- consumers leaving -----------------------------------------------------------------------


def test_close_hands_unacked_to_other_consumer(client: Any, redis_clean: Any, topic: str) -> None:
    holder = client.subscribe(topic, "sh", consumer_type=Shared, receiver_queue_size=5)
    produce(client, topic, 5)
    held = receive_n(holder, 5, ack=False)
    other = client.subscribe(topic, "sh", consumer_type=Shared)
    assert_nothing_more(other)
    holder.close()
    got = receive_n(other, 5)
    assert [m.data() for m in got] == [m.data() for m in held]
    assert [m.redelivery_count() for m in got] == [1] * 5
    wait_for(lambda: pending_count(redis_clean, topic, "sh") == 0)


def test_dropped_connection_hands_unacked_to_other_consumer(
    gateway: Any, client: Any, redis_clean: Any, topic: str
) -> None:
    doomed_client = pulsar.Client(
        gateway.url,
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        holder = doomed_client.subscribe(topic, "sh", consumer_type=Shared, receiver_queue_size=5)
        produce(client, topic, 5)
        held = receive_n(holder, 5, ack=False)
        other = client.subscribe(topic, "sh", consumer_type=Shared)
        assert_nothing_more(other)
    finally:
        doomed_client.close()
    got = receive_n(other, 5)
    assert [m.data() for m in got] == [m.data() for m in held]
    assert [m.redelivery_count() for m in got] == [1] * 5
    wait_for(lambda: pending_count(redis_clean, topic, "sh") == 0)


_KILLED_CONSUMER = """
import sys, pulsar
client = pulsar.Client(sys.argv[1], logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
consumer = client.subscribe(sys.argv[2], "sh", consumer_type=pulsar.ConsumerType.Shared,
                            receiver_queue_size=5)
print("subscribed", flush=True)
for _ in range(5):
    print(consumer.receive(timeout_millis=10000).data().decode(), flush=True)
sys.stdin.read()  # hold the messages, unacked, until killed
"""


def test_killed_client_hands_unacked_to_other_consumer(
    gateway: Any, client: Any, redis_clean: Any, topic: str
) -> None:
    """A client process killed with SIGKILL sends nothing: the gateway sees the TCP
    connection drop and must hand the unacked messages on."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_CONSUMER, gateway.url, topic],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "subscribed"
        produce(client, topic, 5)
        held = [proc.stdout.readline().strip() for _ in range(5)]
        assert held == [f"m-{i}" for i in range(5)]
        other = client.subscribe(topic, "sh", consumer_type=Shared)
        assert_nothing_more(other)
    finally:
        proc.kill()
        proc.wait(TIMEOUT)
        if proc.stdin is not None:
            proc.stdin.close()
        if proc.stdout is not None:
            proc.stdout.close()
    got = receive_n(other, 5)
    assert [m.data().decode() for m in got] == held
    assert [m.redelivery_count() for m in got] == [1] * 5
    wait_for(lambda: pending_count(redis_clean, topic, "sh") == 0)


def test_redelivery_across_close_keeps_everything(
    client: Any, redis_clean: Any, topic: str
) -> None:
    consumer_a = client.subscribe(topic, "keep", consumer_type=Shared)
    produce(client, topic, 100)
    first_30 = receive_n(consumer_a, 30, ack=False)
    # Everything the gateway handed to A (its 30 plus whatever it prefetched).
    wait_for(lambda: pending_count(redis_clean, topic, "keep") == 100)
    dispatched_to_a = set(pending_ids(redis_clean, topic, "keep"))
    consumer_a.close()

    consumer_b = client.subscribe(topic, "keep", consumer_type=Shared)
    got = receive_n(consumer_b, 100)
    assert_nothing_more(consumer_b)
    payloads = [m.data() for m in got]
    assert len(payloads) == len(set(payloads)) == 100
    assert set(payloads) == {b"m-%d" % i for i in range(100)}
    counts = {m.data(): m.redelivery_count() for m in got}
    assert all(counts[m.data()] == 1 for m in first_30)
    # Prefetched-but-unread messages were dispatched to A too, so they count as redelivered.
    assert {entry_id(m) for m in got if m.redelivery_count() == 1} == dispatched_to_a
    wait_for(lambda: pending_count(redis_clean, topic, "keep") == 0)


# -- unsubscribe -----------------------------------------------------------------------------


def test_unsubscribe_deletes_subscription(client: Any, redis_clean: Any, topic: str) -> None:
    consumer = client.subscribe(
        topic, "gone", consumer_type=Shared, initial_position=pulsar.InitialPosition.Earliest
    )
    produce(client, topic, 3, prefix="old")
    receive_n(consumer, 1)
    assert "gone" in group_names(redis_clean, topic)
    consumer.unsubscribe()
    assert "gone" not in group_names(redis_clean, topic)

    # Recreated fresh at Latest: none of the old messages.
    latest = client.subscribe(
        topic, "gone", consumer_type=Shared, initial_position=pulsar.InitialPosition.Latest
    )
    assert_nothing_more(latest)
    produce(client, topic, 1, prefix="new")
    assert receive(latest).data() == b"new-0"
    latest.unsubscribe()

    # Recreated fresh at Earliest: everything, including the message acked before.
    earliest = client.subscribe(
        topic, "gone", consumer_type=Exclusive, initial_position=pulsar.InitialPosition.Earliest
    )
    assert [m.data() for m in receive_n(earliest, 4)] == [b"old-0", b"old-1", b"old-2", b"new-0"]
    assert_nothing_more(earliest)


def test_unsubscribe_refused_with_other_consumer(client: Any, redis_clean: Any, topic: str) -> None:
    first = client.subscribe(topic, "two", consumer_type=Shared)
    second = client.subscribe(topic, "two", consumer_type=Shared)
    with pytest.raises(pulsar.ConsumerBusy):
        first.unsubscribe()
    assert "two" in group_names(redis_clean, topic)
    # Both consumers are still attached and served.
    produce(client, topic, 1)
    got = receive_from_any([first, second], 1)
    assert [m.data() for m in got[0] + got[1]] == [b"m-0"]
    second.close()
    first.unsubscribe()
    assert "two" not in group_names(redis_clean, topic)


# -- last message id -------------------------------------------------------------------------


def test_get_last_message_id(client: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "last")
    if not hasattr(consumer, "get_last_message_id"):
        # Not in this client version: checked explicitly rather than skipped.
        assert not hasattr(pulsar.Consumer, "get_last_message_id")
        return
    empty = consumer.get_last_message_id()
    assert (empty.ledger_id(), empty.entry_id()) == (-1, -1)

    ids = produce(client, topic, 3)
    last = consumer.get_last_message_id()
    assert (last.ledger_id(), last.entry_id(), last.batch_index()) == (
        ids[-1].ledger_id(),
        ids[-1].entry_id(),
        -1,
    )

    batch_ids = produce_batched(client, topic, 4, per_batch=4)
    last = consumer.get_last_message_id()
    assert (last.ledger_id(), last.entry_id(), last.batch_index()) == (
        batch_ids[-1].ledger_id(),
        batch_ids[-1].entry_id(),
        3,
    )
    assert str(last) == str(batch_ids[-1])
