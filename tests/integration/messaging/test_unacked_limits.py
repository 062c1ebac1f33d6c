"""Unacked limits of Shared and Key_Shared subscriptions, with the official client: a
consumer holding ``maxUnackedMessagesPerConsumer`` unacknowledged messages gets nothing more
(other consumers of the subscription do) until acknowledgements bring it to half; a
subscription holding ``maxUnackedMessagesPerSubscription`` gets nothing at all meanwhile.
Topic stats say so (``blockedConsumerOnUnackedMsgs``, ``blockedSubscriptionOnUnackedMsgs``).
The limits come from the gateway's flags, a namespace policy or a topic policy."""

from __future__ import annotations

import time
from typing import Any

import pulsar
import pytest

from tests.adminhttp import admin
from tests.conftest import TIMEOUT, wait_for

# The cluster pass of ./dev test runs this file on a Redis Cluster too: unacked limits of
# Shared and Key_Shared subscriptions (flags, namespace and topic policies)
pytestmark = pytest.mark.cluster

#: Messages each test publishes; one message per entry (batching off).
COUNT = 20


def _produce(client: Any, topic: str, count: int = COUNT, **kwargs: Any) -> None:
    producer = client.create_producer(topic, batching_enabled=False, **kwargs)
    for i in range(count):
        producer.send(f"m-{i}".encode(), partition_key=f"k-{i % 4}")
    producer.close()


def _drain(consumer: Any, quiet: float = 1.0) -> list[Any]:
    """Every message that arrives until none has for ``quiet`` seconds."""
    got = []
    while True:
        try:
            got.append(consumer.receive(timeout_millis=int(quiet * 1000)))
        except pulsar.Timeout:
            return got


def _stats(gateway: Any, topic: str) -> dict[str, Any]:
    status, stats = admin(
        "GET", f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/stats"
    )
    assert status == 200, stats
    return stats


def _subscribe(client: Any, topic: str, sub_type: Any = pulsar.ConsumerType.Shared) -> Any:
    return client.subscribe(
        topic,
        "s",
        consumer_type=sub_type,
        initial_position=pulsar.InitialPosition.Earliest,
        receiver_queue_size=100,
    )


@pytest.mark.parametrize(
    "sub_type", [pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared], ids=str
)
def test_a_consumer_over_its_limit_gets_nothing_until_half_is_acked(
    gateway_factory, client_factory, topic, sub_type
):
    gateway = gateway_factory(max_unacked_messages_per_consumer=6, stats_interval_seconds=0.2)
    client = client_factory(gateway.url)
    consumer = _subscribe(client, topic, sub_type)
    _produce(client, topic)

    first = _drain(consumer)
    assert len(first) == 6

    def blocked() -> bool:
        (c,) = _stats(gateway, topic)["subscriptions"]["s"]["consumers"]
        return c["blockedConsumerOnUnackedMsgs"] and c["unackedMessages"] == 6

    wait_for(blocked)
    # acking two leaves four: over half (3), still blocked
    for message in first[:2]:
        consumer.acknowledge(message)
    assert _drain(consumer) == []
    # a third leaves three, half the limit: messages flow again, up to the limit
    consumer.acknowledge(first[2])
    second = _drain(consumer)
    assert len(second) == 3
    for message in first[3:] + second:
        consumer.acknowledge(message)
    rest = _drain(consumer)
    for message in rest:
        consumer.acknowledge(message)
    seen = [m.data() for m in first + second + rest]
    while len(seen) < COUNT:
        more = _drain(consumer)
        assert more, f"only {len(seen)} of {COUNT} delivered"
        for message in more:
            consumer.acknowledge(message)
        seen += [m.data() for m in more]
    assert sorted(seen) == sorted(f"m-{i}".encode() for i in range(COUNT))
    wait_for(
        lambda: (
            not _stats(gateway, topic)["subscriptions"]["s"]["consumers"][0][
                "blockedConsumerOnUnackedMsgs"
            ]
        )
    )


def test_a_blocked_consumer_leaves_the_messages_to_the_others(
    gateway_factory, client_factory, topic
):
    gateway = gateway_factory(max_unacked_messages_per_consumer=4)
    client = client_factory(gateway.url)
    slow = _subscribe(client, topic)
    _produce(client, topic)
    assert len(_drain(slow)) == 4  # never acks
    fast = _subscribe(client, topic)
    got = []
    for _ in range(COUNT - 4):
        message = fast.receive(timeout_millis=int(TIMEOUT * 1000))
        fast.acknowledge(message)
        got.append(message)
    assert len(got) == COUNT - 4
    assert _drain(slow, quiet=0.5) == []


def test_the_subscription_limit_stops_every_consumer_of_it(gateway_factory, client_factory, topic):
    gateway = gateway_factory(max_unacked_messages_per_subscription=8, stats_interval_seconds=0.2)
    client = client_factory(gateway.url)
    a, b = _subscribe(client, topic), _subscribe(client, topic)
    _produce(client, topic)
    got_a, got_b = _drain(a), _drain(b)
    assert len(got_a) + len(got_b) == 8
    wait_for(
        lambda: _stats(gateway, topic)["subscriptions"]["s"]["blockedSubscriptionOnUnackedMsgs"]
    )
    # unblocked below half (4): acking five leaves three
    held = got_a + got_b
    for message in held[:5]:
        (a if message in got_a else b).acknowledge(message)
    more = _drain(a, quiet=0.5) + _drain(b, quiet=0.5)
    assert len(more) == 5  # up to the limit again: 3 held + 5


def test_exclusive_and_failover_subscriptions_have_no_unacked_limit(
    gateway_factory, client_factory, topic
):
    gateway = gateway_factory(max_unacked_messages_per_consumer=3)
    client = client_factory(gateway.url)
    consumer = _subscribe(client, topic, pulsar.ConsumerType.Exclusive)
    _produce(client, topic)
    assert len(_drain(consumer)) == COUNT


def test_namespace_and_topic_policies_set_the_limit(gateway_factory, client_factory, topic):
    """The gateway's flag says no limit; the namespace policy sets 10, the topic's 5 (it
    wins), and deleting the topic's policy brings the namespace's back."""
    gateway = gateway_factory(max_unacked_messages_per_consumer=0)
    base = f"{gateway.http_url}/admin/v2"
    assert (
        admin("POST", f"{base}/namespaces/public/default/maxUnackedMessagesPerConsumer", 10)[0]
        == 204
    )
    topic_url = f"{base}/persistent/public/default/{topic}/maxUnackedMessagesOnConsumer"
    assert admin("POST", topic_url, 5)[0] == 204
    assert admin("GET", topic_url) == (200, 5)
    assert admin("POST", topic_url, -1)[0] == 412  # Pulsar: "maxUnackedNum must be 0 or more"
    client = client_factory(gateway.url)
    consumer = _subscribe(client, topic)
    _produce(client, topic)
    first = _drain(consumer)
    assert len(first) == 5
    # the topic policy goes: the namespace's 10 applies once the gateway hears of it
    assert admin("DELETE", topic_url)[0] == 204
    deadline = time.monotonic() + TIMEOUT
    more: list[Any] = []
    while len(first) + len(more) < 10 and time.monotonic() < deadline:
        more += _drain(consumer, quiet=0.3)
    assert len(first) + len(more) == 10
