"""Dead-letter topics with the official client (docs/binary_protocol.md "Consuming,
acknowledging, seeking").

The dead-letter logic is entirely client-side and only for Shared and Key_Shared: the
server's part is a correct ``MESSAGE.redelivery_count`` (counting every delivery that ended
without an ack: nacks, consumers closing or dropping their connection), a producer on the
DLQ topic (with ``initial_subscription_name`` creating that subscription), and the ack of
the original. On Exclusive the counts stay 0, so a DLQ policy never fires.
"""

from __future__ import annotations

from typing import Any

import pulsar
import pytest

from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.conftest import TIMEOUT, stream_key, wait_for
from tests.frames import command
from tests.rawclient import RawConnection

# The cluster pass of ./dev test runs this file on a Redis Cluster too: dead letter policy
# (Shared, Key_Shared) driven by negative acks
pytestmark = pytest.mark.cluster

T = pb.BaseCommand.Type
RECEIVE_MS = int(TIMEOUT * 1000)
NACK_DELAY_MS = 100  # the client's minimum

Shared = pulsar.ConsumerType.Shared
KeyShared = pulsar.ConsumerType.KeyShared
Exclusive = pulsar.ConsumerType.Exclusive


def full(topic: str) -> str:
    return f"persistent://public/default/{topic}"


def pending_count(redis: Any, topic: str, sub: str) -> int:
    return int(redis.xpending(stream_key(topic), sub)["pending"])


def dlq_consumer(client: Any, topic: str, sub_type: Any, dlq_topic: str | None = None) -> Any:
    return client.subscribe(
        topic,
        "work",
        consumer_type=sub_type,
        negative_ack_redelivery_delay_ms=NACK_DELAY_MS,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(
            max_redeliver_count=2,
            dead_letter_topic=dlq_topic,
            initial_subscription_name="dlq-sub" if dlq_topic else None,
        ),
    )


def send(client: Any, topic: str, payload: bytes, **kwargs: Any) -> Any:
    producer = client.create_producer(topic, batching_enabled=False)
    msg_id = producer.send(payload, **kwargs)
    producer.close()
    return msg_id


def nack_until_dead(consumer: Any, payload: bytes) -> list[int]:
    """Receive and nack until the client dead-letters the message (max_redeliver_count 2:
    three deliveries); return the redelivery counts seen."""
    counts = []
    for _ in range(3):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        assert msg.data() == payload
        counts.append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
    return counts


@pytest.mark.parametrize("sub_type", [Shared, KeyShared], ids=["shared", "key_shared"])
def test_message_reaches_dlq_after_max_redeliveries(
    client: Any, redis_clean: Any, topic: str, sub_type: Any
) -> None:
    dlq = f"{topic}-dead"
    consumer = dlq_consumer(client, topic, sub_type, dlq_topic=dlq)
    original_id = send(
        client, topic, b"poison", properties={"k": "v", "n": "1"}, partition_key="key-1"
    )

    counts = nack_until_dead(consumer, b"poison")
    assert counts == [0, 1, 2]

    # initial_subscription_name created "dlq-sub" with the DLQ producer, so it holds the
    # message although this consumer subscribes only now.
    dead_consumer = client.subscribe(dlq, "dlq-sub", consumer_type=Shared)
    dead = dead_consumer.receive(timeout_millis=RECEIVE_MS)
    assert dead.data() == b"poison"
    props = dead.properties()
    assert (props["k"], props["n"]) == ("v", "1")
    assert props["REAL_TOPIC"] == full(topic)
    assert props["ORIGIN_MESSAGE_ID"] == str(original_id)
    assert dead.partition_key() == "key-1"
    dead_consumer.acknowledge(dead)

    # The original was acked: gone from the subscription, not delivered again.
    wait_for(lambda: pending_count(redis_clean, topic, "work") == 0)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=500)


def test_default_dlq_topic_name(client: Any, redis_clean: Any, topic: str) -> None:
    dlq = f"{full(topic)}-work-DLQ"
    watcher = client.subscribe(
        dlq, "watch", consumer_type=Shared, initial_position=pulsar.InitialPosition.Earliest
    )
    consumer = dlq_consumer(client, topic, Shared)
    send(client, topic, b"poison")
    counts = nack_until_dead(consumer, b"poison")
    assert counts == [0, 1, 2]
    dead = watcher.receive(timeout_millis=RECEIVE_MS)
    assert dead.data() == b"poison"
    assert dead.properties()["REAL_TOPIC"] == full(topic)
    wait_for(lambda: pending_count(redis_clean, topic, "work") == 0)


def test_consumers_that_die_or_close_count_deliveries(
    gateway: Any, client: Any, redis_clean: Any, topic: str
) -> None:
    """A delivery ended by a dropped connection or by close() counts like a nack: the next
    consumer sees redelivery_count incremented, and the DLQ policy fires on that count."""
    dlq = f"{topic}-dead"
    send(client, topic, b"held")
    with RawConnection(gateway) as conn:  # holds the message, then its connection drops
        conn.handshake()
        conn.request(
            T.SUBSCRIBE,
            T.SUCCESS,
            topic=full(topic),
            subscription="work",
            subType=1,  # Shared
            consumer_id=1,
            initialPosition=1,  # Earliest
        )
        conn.send(command(T.FLOW, consumer_id=1, messagePermits=10))
        assert conn.expect(T.MESSAGE).message.redelivery_count == 0

    closer = dlq_consumer(client, topic, Shared, dlq_topic=dlq)
    msg = closer.receive(timeout_millis=RECEIVE_MS)
    assert (msg.data(), msg.redelivery_count()) == (b"held", 1)
    closer.close()  # without ack

    last = dlq_consumer(client, topic, Shared, dlq_topic=dlq)
    msg = last.receive(timeout_millis=RECEIVE_MS)
    assert (msg.data(), msg.redelivery_count()) == (b"held", 2)
    last.negative_acknowledge(msg)  # count 2 = max: dead-lettered now
    dead = client.subscribe(dlq, "dlq-sub", consumer_type=Shared)
    assert dead.receive(timeout_millis=RECEIVE_MS).data() == b"held"
    wait_for(lambda: pending_count(redis_clean, topic, "work") == 0)


def test_exclusive_with_dlq_policy_never_dead_letters(
    client: Any, redis_clean: Any, topic: str
) -> None:
    """Pulsar counts no redeliveries on Exclusive (``RedeliveryTrackerDisabled``): counts stay 0
    and the client never republishes, however often the message is nacked."""
    dlq = f"{topic}-dead"
    consumer = dlq_consumer(client, topic, Exclusive, dlq_topic=dlq)
    send(client, topic, b"again")
    counts = []
    for _ in range(4):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        assert msg.data() == b"again"
        counts.append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
    assert counts == [0, 0, 0, 0]
    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    assert msg.redelivery_count() == 0
    consumer.acknowledge(msg)
    wait_for(lambda: pending_count(redis_clean, topic, "work") == 0)
    # No DLQ producer was ever created: the DLQ topic has no stream.
    assert not redis_clean.exists(stream_key(dlq))
