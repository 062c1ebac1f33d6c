"""Backlog quotas that block producers, as the official client sees them: a new producer
on a topic over a ``producer_request_hold`` quota gets ProducerBlockedQuotaExceededError,
over a ``producer_exception`` one ProducerBlockedQuotaExceededException, by size and by age,
on any gateway, and the WebSocket and REST producers are refused alike (HTTP 503). A
producer already connected is disconnected by the periodic check and refused when it
reconnects, until the backlog is consumed; with the hold policy its messages wait and
arrive, with the exception policy they fail."""

from __future__ import annotations

from typing import Any

import pulsar
import pytest

from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage.keys import KeySchema
from tests.adminhttp import admin, call
from tests.conftest import TIMEOUT, wait_for
from tests.wsclient import producer_url, refused

# The cluster pass of ./dev test runs this file on a Redis Cluster too: backlog quotas:
# refusals by policy and type, connected producers disconnected, eviction by size and by age
# on two gateways (backlog_usage.lua, backlog_evict.lua)
pytestmark = pytest.mark.cluster

RECEIVE_MS = int(TIMEOUT * 1000)
HOLD, EXCEPTION = "producer_request_hold", "producer_exception"
EVICT = "consumer_backlog_eviction"
#: what a new producer gets, by policy
REFUSAL = {
    HOLD: pulsar.ProducerBlockedQuotaExceededError,
    EXCEPTION: pulsar.ProducerBlockedQuotaExceededException,
}
REASON = "Cannot create producer on topic with backlog quota exceeded"


def refusal(client: Any, topic: str) -> type[Exception] | None:
    """The quota error creating a producer raises, None when it is created."""
    try:
        client.create_producer(topic).close()
    except (
        pulsar.ProducerBlockedQuotaExceededError,
        pulsar.ProducerBlockedQuotaExceededException,
    ) as exc:
        return type(exc)
    return None


def fill(client: Any, topic: str, count: int = 40) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(count):
        producer.send(b"x" * 1000 + str(i).encode())
    producer.close()


def quota_url(gw: Any, topic: str | None, quota_type: str = "destination_storage") -> str:
    scope = f"persistent/public/default/{topic}" if topic else "namespaces/public/default"
    return f"{gw.http_url}/admin/v2/{scope}/backlogQuota?backlogQuotaType={quota_type}"


def set_quota(gw: Any, topic: str | None, quota: dict[str, Any], quota_type: str = "") -> None:
    quota_type = quota_type or "destination_storage"
    assert admin("POST", quota_url(gw, topic, quota_type), quota) == (204, None)


def quota(policy: str, quota_type: str = "destination_storage") -> dict[str, Any]:
    """A quota the topics of these tests are over once filled (40 KB), or a second after."""
    if quota_type == "message_age":
        return {"limitTime": 1, "policy": policy}
    return {"limitSize": 10_000, "limitTime": -1, "policy": policy}


@pytest.mark.parametrize("quota_type", ["destination_storage", "message_age"])
@pytest.mark.parametrize("policy", [HOLD, EXCEPTION])
def test_a_new_producer_gets_the_policy_s_error(
    gateway_factory, client_factory, topic, policy, quota_type
):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client_a, client_b = client_factory(gw_a.url), client_factory(gw_b.url)
    consumer = client_a.subscribe(topic, "slow", consumer_type=pulsar.ConsumerType.Shared)
    fill(client_a, topic)
    set_quota(gw_a, topic, quota(policy, quota_type), quota_type)
    wait_for(lambda: refusal(client_b, topic) is REFUSAL[policy])
    assert refusal(client_a, topic) is REFUSAL[policy]
    # Consuming the backlog lifts the block.
    for _ in range(40):
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    wait_for(lambda: refusal(client_b, topic) is None)


def test_eviction_never_blocks_producers(gateway_factory, client_factory, topic):
    gw = gateway_factory(backlog_quota_check_enabled=False)  # and nothing is evicted here
    client = client_factory(gw.url)
    client.subscribe(topic, "slow")
    fill(client, topic)
    set_quota(gw, topic, quota(EVICT))
    set_quota(gw, topic, quota(EVICT, "message_age"), "message_age")
    status, stats = admin("GET", f"{gw.http_url}/admin/v2/persistent/public/default/{topic}/stats")
    assert status == 200
    assert stats["subscriptions"]["slow"]["msgBacklog"] == 40
    assert refusal(client, topic) is None


def test_namespace_quotas_apply_per_type_under_the_topic_s(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    client.subscribe(topic, "slow")
    fill(client, topic)
    set_quota(gateway, None, quota(HOLD))
    wait_for(lambda: refusal(client, topic) is pulsar.ProducerBlockedQuotaExceededError)
    big = {"limitSize": 10_000_000, "limitTime": -1, "policy": EXCEPTION}
    set_quota(gateway, None, big)
    wait_for(lambda: refusal(client, topic) is None)  # under the limit
    set_quota(gateway, None, quota(EXCEPTION))
    wait_for(lambda: refusal(client, topic) is pulsar.ProducerBlockedQuotaExceededException)
    # A topic-level quota takes precedence over its namespace's of the same type ...
    set_quota(gateway, topic, big)
    wait_for(lambda: refusal(client, topic) is None)
    # ... and only of that type: the namespace's age quota applies to the topic too.
    set_quota(gateway, None, quota(HOLD, "message_age"), "message_age")
    wait_for(lambda: refusal(client, topic) is pulsar.ProducerBlockedQuotaExceededError)


@pytest.mark.parametrize("subscribed", [False, True])
def test_no_backlog_without_unacked_messages(gateway, client_factory, topic, subscribed):
    client = client_factory(gateway.url)
    if subscribed:
        consumer = client.subscribe(topic, "fast")
    fill(client, topic, 10)
    if subscribed:
        for _ in range(10):
            consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    set_quota(gateway, topic, {"limitSize": 0, "limitTime": -1, "policy": EXCEPTION})
    set_quota(gateway, topic, quota(EXCEPTION, "message_age"), "message_age")
    # Acknowledgements reach the gateway in the client's ack groups, a moment later.
    wait_for(lambda: refusal(client, topic) is None)


@pytest.mark.parametrize("policy", [HOLD, EXCEPTION])
async def test_websocket_and_rest_producers_are_refused(gateway, client_factory, topic, policy):
    client = client_factory(gateway.url)
    client.subscribe(topic, "slow")
    fill(client, topic)
    assert await call("POST", quota_url(gateway, topic), quota(policy)) == (204, None)
    # AbstractWebSocketHandler.getErrorCode: 503 for both policies
    assert await refused(producer_url(gateway, topic)) == (
        503,
        {"reason": f"Failed to create producer: {REASON}"},
    )
    body = {"messages": [{"payload": "refused"}]}
    rest = f"{gateway.http_url}/topics/persistent/public/default/{topic}"
    assert await call("POST", rest, body) == (503, {"reason": REASON})


def producers_of(redis: Any, topic: str) -> int:
    """The topic's registered producers, fleet-wide."""
    return int(redis.zcard(KeySchema().topic(parse_topic_name(topic)).producers))


@pytest.mark.parametrize("policy", [HOLD, EXCEPTION])
def test_a_connected_producer_is_disconnected_then_refused(
    gateway_factory, client_factory, redis_clean, topic, policy
):
    gw = gateway_factory(backlog_quota_check_interval_seconds=0.2)
    client = client_factory(gw.url)
    consumer = client.subscribe(topic, "slow")
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=0)
    for i in range(40):
        producer.send(b"x" * 1000 + str(i).encode())
    set_quota(gw, topic, quota(policy))
    # The check closes the producer (CLOSE_PRODUCER); its reconnections are refused.
    wait_for(lambda: producers_of(redis_clean, topic) == 0)
    assert refusal(client, topic) is REFUSAL[policy]
    results: list[Any] = []
    if policy == EXCEPTION:
        # the pending message fails when the next reconnection is refused
        with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
            producer.send(b"refused")
    else:
        # the message waits in the client for the producer to be let back in
        producer.send_async(b"held", lambda result, _: results.append(result))
    for _ in range(40):
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    # Backlog consumed: the producer's reconnection is accepted and it produces again.
    wait_for(lambda: producers_of(redis_clean, topic) == 1, timeout=3 * TIMEOUT)
    if policy == HOLD:
        wait_for(lambda: results)
        assert results == [pulsar.Result.Ok]
        assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"held"
    producer.send(b"after")
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"after"
