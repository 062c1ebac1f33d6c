"""Two or more gateways on one Redis behave as one broker (docs/operations.md, "Running
several gateways (a fleet)")."""

from __future__ import annotations

import threading
import time
from typing import Any

import pulsar
import pytest

from tests.conftest import TIMEOUT, wait_for


def _drain(consumer: Any, into: list[bytes], stop: threading.Event, pause: float = 0.0) -> None:
    """Receive and ack until ``stop``; ``pause`` seconds per message stand for the work an
    application does, so one fast consumer cannot take everything while the other
    gateway's thread waits for CPU on a loaded machine."""
    while not stop.is_set():
        try:
            msg = consumer.receive(timeout_millis=200)
        except pulsar.Timeout:
            continue
        into.append(msg.data())
        consumer.acknowledge(msg)
        time.sleep(pause)


def test_shared_subscription_split_across_gateways(gateway_factory, client_factory):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client_a, client_b = client_factory(gw_a.url), client_factory(gw_b.url)
    topic = "fleet-shared"
    c1 = client_a.subscribe(
        topic, "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=10
    )
    c2 = client_b.subscribe(
        topic, "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=10
    )
    got1: list[bytes] = []
    got2: list[bytes] = []
    stop = threading.Event()
    threads = [
        threading.Thread(target=_drain, args=(c, g, stop, 0.002))
        for c, g in ((c1, got1), (c2, got2))
    ]
    for t in threads:
        t.start()
    producer = client_a.create_producer(topic, batching_enabled=False)
    sent = [f"m-{i}".encode() for i in range(400)]
    for payload in sent:
        producer.send_async(payload, None)
    producer.flush()
    try:
        wait_for(lambda: len(got1) + len(got2) >= len(sent))
    finally:
        stop.set()
        for t in threads:
            t.join(TIMEOUT)
    assert sorted(got1 + got2) == sorted(sent)  # none lost, none duplicated
    assert got1 and got2  # both gateways' consumers took a share


def test_exclusive_rule_holds_across_gateways(gateway_factory, client_factory):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client_a, client_b = client_factory(gw_a.url), client_factory(gw_b.url)
    first = client_a.subscribe("fleet-excl", "x", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client_b.subscribe("fleet-excl", "x", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client_b.subscribe("fleet-excl", "x", consumer_type=pulsar.ConsumerType.Shared)
    first.close()
    second = client_b.subscribe("fleet-excl", "x", consumer_type=pulsar.ConsumerType.Exclusive)
    producer = client_a.create_producer("fleet-excl")
    producer.send(b"after-handover")
    assert second.receive(timeout_millis=int(TIMEOUT * 1000)).data() == b"after-handover"


def test_unacked_messages_move_to_another_gateway_when_one_stops(gateway_factory, client_factory):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client_a, client_b = client_factory(gw_a.url), client_factory(gw_b.url)
    topic = "fleet-handover"
    held = client_a.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client_b.create_producer(topic)
    for i in range(5):
        producer.send(f"h-{i}".encode())
    got = [held.receive(timeout_millis=int(TIMEOUT * 1000)) for _ in range(5)]
    assert len(got) == 5  # delivered, never acked
    other = client_b.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    gw_a.stop()  # graceful: its consumers are released at once
    again = [other.receive(timeout_millis=int(TIMEOUT * 1000)) for _ in range(5)]
    assert sorted(m.data() for m in again) == [f"h-{i}".encode() for i in range(5)]
    assert {m.redelivery_count() for m in again} == {1}


def test_killed_gateway_consumers_are_reaped_by_the_fleet(
    gateway_factory, gateway_process, client_factory, redis_url
):
    """SIGKILL leaves no one to release the consumer: its lease expires and a surviving
    gateway hands its unacked messages to the remaining consumers."""
    lease = 1.5
    survivor = gateway_factory(consumer_lease_seconds=lease)
    doomed = gateway_process(
        "--redis-url", redis_url, "--consumer-lease-seconds", str(lease)
    ).wait_ready()
    client_doomed = client_factory(doomed.url)
    client_ok = client_factory(survivor.url)
    topic = "fleet-kill"
    held = client_doomed.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client_ok.create_producer(topic)
    for i in range(3):
        producer.send(f"k-{i}".encode())
    for _ in range(3):
        held.receive(timeout_millis=int(TIMEOUT * 1000))
    other = client_ok.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    doomed.stop(sig=9)
    again = [other.receive(timeout_millis=int((lease * 4 + TIMEOUT) * 1000)) for _ in range(3)]
    assert sorted(m.data() for m in again) == [b"k-0", b"k-1", b"k-2"]
    assert {m.redelivery_count() for m in again} == {1}
    for m in again:
        other.acknowledge(m)
