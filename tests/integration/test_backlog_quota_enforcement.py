"""Backlog quota enforcement: a ``producer_exception`` size quota refuses new producers
while the topic's backlog is over it (the official client sees
ProducerBlockedQuotaExceededException), on any gateway."""

from __future__ import annotations

import pulsar
import pytest

from tests.adminhttp import admin
from tests.conftest import TIMEOUT, wait_for

RECEIVE_MS = int(TIMEOUT * 1000)


def _blocked(client, topic: str) -> bool:
    try:
        client.create_producer(topic).close()
    except pulsar.ProducerBlockedQuotaExceededException:
        return True
    return False


def _fill(client, topic: str, count: int = 40) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(count):
        producer.send(b"x" * 1000 + str(i).encode())
    producer.close()


def test_producer_exception_quota_blocks_new_producers(gateway_factory, client_factory, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client_a, client_b = client_factory(gw_a.url), client_factory(gw_b.url)
    consumer = client_a.subscribe(topic, "slow", consumer_type=pulsar.ConsumerType.Shared)
    _fill(client_a, topic)
    quota = {"limitSize": 10_000, "limitTime": -1, "policy": "producer_exception"}
    path = f"{gw_a.http_url}/admin/v2/persistent/public/default/{topic}/backlogQuota"
    assert admin("POST", path, quota) == (204, None)
    wait_for(lambda: _blocked(client_b, topic))
    assert _blocked(client_a, topic)
    # Consuming the backlog lifts the block.
    for _ in range(40):
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    wait_for(lambda: not _blocked(client_b, topic))


def test_namespace_quota_applies_and_other_policies_do_not_block(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    client.subscribe(topic, "slow")
    _fill(client, topic)
    ns = f"{gateway.http_url}/admin/v2/namespaces/public/default/backlogQuota"
    hold = {"limitSize": 10_000, "limitTime": -1, "policy": "producer_request_hold"}
    assert admin("POST", ns, hold) == (204, None)
    assert not _blocked(client, topic)  # only producer_exception is enforced
    big = {"limitSize": 10_000_000, "limitTime": -1, "policy": "producer_exception"}
    assert admin("POST", ns, big) == (204, None)
    assert not _blocked(client, topic)  # under the limit
    small = {"limitSize": 10_000, "limitTime": -1, "policy": "producer_exception"}
    assert admin("POST", ns, small) == (204, None)
    wait_for(lambda: _blocked(client, topic))
    # A topic-level quota takes precedence over the namespace's.
    topic_path = f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/backlogQuota"
    assert admin("POST", topic_path, big) == (204, None)
    wait_for(lambda: not _blocked(client, topic))


@pytest.mark.parametrize("subscribed", [False, True])
def test_no_backlog_without_unacked_messages(gateway, client_factory, topic, subscribed):
    client = client_factory(gateway.url)
    if subscribed:
        consumer = client.subscribe(topic, "fast")
    _fill(client, topic, 10)
    if subscribed:
        for _ in range(10):
            consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    quota = {"limitSize": 0, "limitTime": -1, "policy": "producer_exception"}
    path = f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/backlogQuota"
    admin("POST", path, quota)
    # Acknowledgements reach the gateway in the client's ack groups, a moment later.
    wait_for(lambda: not _blocked(client, topic))
