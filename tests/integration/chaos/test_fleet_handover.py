"""A gateway killed with SIGKILL while its consumer holds unacked messages: the fleet
hands them over (as after a CLOSE_CONSUMER, Pulsar's ``Consumer.close``: unacked messages
return to the subscription).

Nobody releases a killed gateway's consumers: their leases expire (``--consumer-lease-seconds``)
and a surviving gateway's reaper (every half lease) returns their pending entries for
redelivery, which the survivors' dispatchers pick up (at the latest on their 1 s poll). So the
bound asserted here is lease + lease/2 + 1 s, with generous slack. What was acknowledged before
the kill must never come back, and nothing may be lost.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pulsar
import pytest

from tests.conftest import TIMEOUT, stream_key, wait_for

LEASE = 1.5
#: lease + reap interval (lease / 2) + dispatcher poll (1 s), with slack.
HANDOVER_BOUND = LEASE + LEASE / 2 + 1.0 + 3.0
RECEIVE_MS = int(TIMEOUT * 1000)

Shared = pulsar.ConsumerType.Shared
Exclusive = pulsar.ConsumerType.Exclusive


def pending_ids(redis: Any, topic: str, sub: str) -> set[str]:
    rows = redis.xpending_range(stream_key(topic), sub, "-", "+", 10_000)
    return {row["message_id"].decode() for row in rows}


def entry_id(msg: Any) -> str:
    mid = msg.message_id()
    return f"{mid.ledger_id()}-{mid.entry_id()}"


def start_gateway(gateway_process: Any, redis_url: str) -> Any:
    return gateway_process(
        "--redis-url", redis_url, "--consumer-lease-seconds", str(LEASE)
    ).wait_ready()


def produce(client: Any, topic: str, count: int, prefix: str = "m") -> list[bytes]:
    producer = client.create_producer(topic, batching_enabled=False)
    payloads = [f"{prefix}-{i}".encode() for i in range(count)]
    for p in payloads:
        producer.send(p)
    producer.close()
    return payloads


def test_shared_handover_after_sigkill(
    gateway_process: Any, client_factory: Any, redis_clean: Any, redis_url: str, topic: str
) -> None:
    doomed, survivor_a, survivor_b = (start_gateway(gateway_process, redis_url) for _ in range(3))
    # 30 permits: the holder is handed all 30 messages, and after reading 8 (below half its
    # queue) asks for no more, so later messages go to the survivors only.
    holder = client_factory(doomed.url).subscribe(
        topic, "s", consumer_type=Shared, receiver_queue_size=30
    )
    sent = produce(client_factory(survivor_a.url), topic, 30)
    wait_for(lambda: len(pending_ids(redis_clean, topic, "s")) == 30)
    held = [holder.receive(timeout_millis=RECEIVE_MS) for _ in range(8)]
    acked = held[:4]
    for msg in acked:
        holder.acknowledge(msg)
    acked_ids = {entry_id(m) for m in acked}
    wait_for(lambda: len(pending_ids(redis_clean, topic, "s")) == 26)
    held_unacked = pending_ids(redis_clean, topic, "s")
    assert not held_unacked & acked_ids

    survivors = [
        client_factory(gw.url).subscribe(topic, "s", consumer_type=Shared)
        for gw in (survivor_a, survivor_b)
    ]
    got: list[Any] = []

    def drain(count: int, until: float) -> None:
        while len(got) < count and time.monotonic() < until:
            for consumer in survivors:
                try:
                    msg = consumer.receive(timeout_millis=20)
                except pulsar.Timeout:
                    continue
                consumer.acknowledge(msg)
                got.append(msg)

    # New messages flow to the survivors while the holder keeps its 26.
    sent += produce(client_factory(survivor_b.url), topic, 10, prefix="n")
    drain(10, time.monotonic() + TIMEOUT)
    assert sorted(m.data() for m in got) == sorted(sent[30:])

    doomed.stop(sig=9)
    killed_at = time.monotonic()
    drain(36, killed_at + HANDOVER_BOUND)
    elapsed = time.monotonic() - killed_at
    assert len(got) == 36, f"{36 - len(got)} messages not handed over within {elapsed:.1f}s"
    drain(37, time.monotonic() + 0.5)  # anything extra (a duplicate) would show up now

    ids = [entry_id(m) for m in got]
    assert not set(ids) & acked_ids  # nothing acknowledged came back
    assert set(ids) | acked_ids == set(stream_ids(redis_clean, topic))  # none lost
    duplicates = {i for i, n in Counter(ids).items() if n > 1}
    assert duplicates <= held_unacked
    assert sorted(set(m.data() for m in got)) == sorted(set(sent) - {m.data() for m in acked})
    handed_over = [m for m in got if entry_id(m) in held_unacked]
    assert len({entry_id(m) for m in handed_over}) == 26
    assert {m.redelivery_count() for m in handed_over} == {1}
    wait_for(lambda: not pending_ids(redis_clean, topic, "s"))


def stream_ids(redis: Any, topic: str) -> list[str]:
    """Every entry id of the topic's stream."""
    return [row[0].decode() for row in redis.xrange(stream_key(topic))]


def test_exclusive_handover_after_sigkill(
    gateway_process: Any, client_factory: Any, redis_clean: Any, redis_url: str, topic: str
) -> None:
    doomed, survivor = (start_gateway(gateway_process, redis_url) for _ in range(2))
    holder = client_factory(doomed.url).subscribe(topic, "x", consumer_type=Exclusive)
    sent = produce(client_factory(survivor.url), topic, 12)
    held = [holder.receive(timeout_millis=RECEIVE_MS) for _ in range(8)]
    assert [m.data() for m in held] == sent[:8]
    holder.acknowledge_cumulative(held[3])
    holder.acknowledge(held[5])
    acked_ids = {entry_id(m) for m in held[:4]} | {entry_id(held[5])}
    wait_for(lambda: not pending_ids(redis_clean, topic, "x") & acked_ids)

    client = client_factory(survivor.url)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "x", consumer_type=Exclusive)

    doomed.stop(sig=9)
    killed_at = time.monotonic()

    def take_over() -> Any:
        try:
            return client.subscribe(topic, "x", consumer_type=Exclusive)
        except pulsar.ConsumerBusy:
            return None

    successor = wait_for(take_over, timeout=HANDOVER_BOUND, interval=0.1)
    got = []
    while True:
        try:
            msg = successor.receive(timeout_millis=500)
        except pulsar.Timeout:
            break
        got.append(msg)
        successor.acknowledge(msg)
    elapsed = time.monotonic() - killed_at
    payloads = [m.data() for m in got]
    # Everything not acked, in order, once; nothing acked; the counts stay 0 on Exclusive.
    assert payloads == [sent[4], *sent[6:]], f"after {elapsed:.1f}s"
    assert not {entry_id(m) for m in got} & acked_ids
    assert {m.redelivery_count() for m in got} == {0}
    wait_for(lambda: not pending_ids(redis_clean, topic, "x"))
