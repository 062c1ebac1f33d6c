"""Chunked messages (docs/producers.md "Chunking"): a producer with ``chunking_enabled`` splits a
payload larger than the gateway's ``max_message_size`` into chunks, one stream entry each;
consumers get the whole message back, and one acknowledgement acks every chunk.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pulsar
import pytest

from tests.conftest import TIMEOUT, stream_key, wait_for

RECEIVE_MS = int(TIMEOUT * 1000)
#: Small enough that every large payload below needs several chunks.
MAX_MESSAGE_SIZE = 2000


def payload(i: int, size: int) -> bytes:
    return random.Random(i).randbytes(size)


def pending(redis: Any, topic: str, subscription: str) -> int:
    return int(redis.xpending(stream_key(topic), subscription)["pending"])


@pytest.mark.parametrize(
    "consumer_type", [pulsar.ConsumerType.Exclusive, pulsar.ConsumerType.Shared]
)
def test_chunked_messages_from_two_producers_arrive_whole(
    gateway_factory, client_factory, redis_clean, topic, consumer_type
):
    gw = gateway_factory(max_message_size=MAX_MESSAGE_SIZE)
    client = client_factory(gw.url)
    consumer = client.subscribe(topic, "s", consumer_type=consumer_type)
    producers = [
        client.create_producer(topic, chunking_enabled=True, batching_enabled=False)
        for _ in range(2)
    ]
    sent: dict[bytes, int] = {}
    for i in range(6):
        data = payload(i, 3000 + i * 1500)  # 2 to 6 chunks each
        sent[data] = i % 2
        producers[i % 2].send_async(data, None)  # chunks of both producers interleave
    producers[0].send_async(b"small one", None)
    for p in producers:
        p.flush()
    assert redis_clean.xlen(stream_key(topic)) > len(sent) + 1  # chunks are entries
    got = []
    for _ in range(len(sent) + 1):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        got.append(msg.data())
        consumer.acknowledge(msg)  # one ACK listing every chunk id
    assert sorted(got) == sorted([*sent, b"small one"])
    # Per producer, messages keep their order.
    for index in (0, 1):
        mine = [d for d in got if sent.get(d) == index]
        assert mine == [d for d, p in sent.items() if p == index]
    wait_for(lambda: pending(redis_clean, topic, "s") == 0)


def test_chunked_message_across_gateways_and_its_id(gateway_factory, client_factory, topic):
    gw_a = gateway_factory(max_message_size=MAX_MESSAGE_SIZE)
    gw_b = gateway_factory(max_message_size=MAX_MESSAGE_SIZE)
    producer = client_factory(gw_a.url).create_producer(
        topic, chunking_enabled=True, batching_enabled=False
    )
    consumer = client_factory(gw_b.url).subscribe(
        topic, "s", initial_position=pulsar.InitialPosition.Earliest
    )
    data = payload(99, 9000)
    msg_id = producer.send(data)
    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    assert msg.data() == data
    # A chunked id prints as "(first chunk);(last chunk)" (lib/ChunkMessageIdImpl.h).
    assert str(msg.message_id()) == str(msg_id)
    assert ";" in str(msg_id)


def test_unacked_chunked_message_is_redelivered_whole_after_the_consumer_leaves(
    gateway_factory, client_factory, topic
):
    gw = gateway_factory(max_message_size=MAX_MESSAGE_SIZE)
    client = client_factory(gw.url)
    first = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False)
    data = payload(5, 7000)
    producer.send(data)
    assert first.receive(timeout_millis=RECEIVE_MS).data() == data
    first.close()  # never acked: every chunk goes back to the subscription
    second = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    again = second.receive(timeout_millis=RECEIVE_MS)
    assert again.data() == data
    second.acknowledge(again)
    time.sleep(0.2)
    with pytest.raises(pulsar.Timeout):
        second.receive(timeout_millis=300)


def test_negatively_acked_chunked_message_is_redelivered_whole(
    gateway_factory, client_factory, topic
):
    gw = gateway_factory(max_message_size=MAX_MESSAGE_SIZE)
    client = client_factory(gw.url)
    consumer = client.subscribe(
        topic,
        "s",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
    )
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False)
    data = payload(7, 7000)
    producer.send(data)
    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    consumer.negative_acknowledge(msg)  # the 4.2.0 client names the last chunk only
    again = consumer.receive(timeout_millis=3000)
    assert again.data() == data
