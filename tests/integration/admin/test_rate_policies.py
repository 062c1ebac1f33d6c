"""The rate policies enforced (``core/policies/rate_limits.py``): ``publishRate`` paces
producers (binary, WebSocket, REST), ``dispatchRate`` and ``subscriptionDispatchRate`` pace
deliveries, ``subscribeRate`` refuses one subscribe too many, and removing a rate lifts
it, against a live gateway with the official client and real HTTP and WebSocket clients.

Timing: 100 messages at 20 per second take about four seconds (the first second's 20 go at
once, a bucket starts full); the tests assert at least 3.5 s, so a slow machine only makes
them pass more surely, and wait for what must happen with deadlines."""

from __future__ import annotations

import time
from typing import Any

import pulsar
import pytest

from tests.adminhttp import admin, call
from tests.conftest import TIMEOUT, GatewayThread, wait_for
from tests.helpers import receive_payloads
from tests.wsclient import b64, connect, producer_url

TOPICS = "/admin/v2/persistent/public/default"
NS = "/admin/v2/namespaces/public/default"
RECEIVE_MS = int(TIMEOUT * 1000)
#: 100 messages at 20 per second: 20 at once, 80 more over four seconds
COUNT, RATE, AT_LEAST = 100, 20, 3.5


def _full(topic: str) -> str:
    return f"persistent://public/default/{topic}"


def _publish_limiter(gateway: GatewayThread, topic: str) -> Any:
    """This gateway's publish rate limiter of ``topic`` (the one its producers share)."""
    return gateway.call(gateway.gateway.services.rate_limits.publish(_full(topic)))


def _produce(client: Any, topic: str, count: int = COUNT) -> None:
    producer = client.create_producer(_full(topic), batching_enabled=False)
    for i in range(count):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    producer.close()


# -- publishRate ----------------------------------------------------------------------------


def test_a_publish_rate_paces_a_producer_and_removing_it_frees_it(
    gateway: GatewayThread, client: Any, topic: str
) -> None:
    base = gateway.http_url
    assert admin("PUT", f"{base}{TOPICS}/{topic}")[0] == 204
    rate = {"publishThrottlingRateInMsg": RATE}
    assert admin("POST", f"{base}{TOPICS}/{topic}/publishRate", rate)[0] == 204
    consumer = client.subscribe(_full(topic), "s")
    producer = client.create_producer(_full(topic), batching_enabled=False)
    started = time.monotonic()
    for i in range(COUNT):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()  # every SEND_RECEIPT is in
    elapsed = time.monotonic() - started
    assert elapsed >= AT_LEAST, f"{COUNT} messages at {RATE}/s published in {elapsed:.2f}s"
    assert receive_payloads(consumer, COUNT) == [f"m{i}".encode() for i in range(COUNT)]

    # removed while the producer is connected: its limiter lets everything through
    assert admin("DELETE", f"{base}{TOPICS}/{topic}/publishRate")[0] == 204
    limiter = _publish_limiter(gateway, topic)
    wait_for(lambda: not limiter.limited)
    started = time.monotonic()
    for i in range(COUNT):
        producer.send_async(f"n{i}".encode(), None)
    producer.flush()
    assert time.monotonic() - started < AT_LEAST
    assert receive_payloads(consumer, COUNT) == [f"n{i}".encode() for i in range(COUNT)]


def test_a_publish_rate_set_on_a_live_producer_takes_effect(
    gateway: GatewayThread, client: Any, topic: str
) -> None:
    producer = client.create_producer(_full(topic), batching_enabled=False)
    producer.send(b"before")
    limiter = _publish_limiter(gateway, topic)
    assert not limiter.limited
    rate = {"publishThrottlingRateInMsg": -1, "publishThrottlingRateInByte": RATE * 1000}
    assert admin("POST", f"{gateway.http_url}{TOPICS}/{topic}/publishRate", rate)[0] == 204
    wait_for(lambda: limiter.limited)
    started = time.monotonic()
    for _ in range(COUNT):  # over 1000 bytes each as sent: fewer than 20 a second
        producer.send_async(b"x" * 1000, None)
    producer.flush()
    elapsed = time.monotonic() - started
    assert elapsed >= AT_LEAST, f"{COUNT} messages at {RATE}/s by bytes in {elapsed:.2f}s"


async def test_a_websocket_producer_reads_no_frame_while_paused(
    gateway: GatewayThread, topic: str
) -> None:
    base = gateway.http_url
    assert (await call("PUT", f"{base}{TOPICS}/{topic}"))[0] == 204
    rate = {"publishThrottlingRateInMsg": 10}
    assert (await call("POST", f"{base}{TOPICS}/{topic}/publishRate", rate))[0] == 204
    async with connect(producer_url(gateway, topic)) as ws:
        started = time.monotonic()
        for i in range(30):  # 10 at once, 20 more over two seconds
            await ws.send({"payload": b64(f"w{i}".encode()), "context": str(i)})
        acks = await ws.receive_many(30)
        elapsed = time.monotonic() - started
    assert [a["result"] for a in acks] == ["ok"] * 30
    assert [a["context"] for a in acks] == [str(i) for i in range(30)]
    assert elapsed >= 1.5, f"30 messages at 10/s acknowledged in {elapsed:.2f}s"


def test_a_rest_produce_request_waits_for_the_publish_rate(
    gateway: GatewayThread, client: Any, topic: str
) -> None:
    base = gateway.http_url
    assert admin("PUT", f"{base}{TOPICS}/{topic}")[0] == 204
    rate = {"publishThrottlingRateInMsg": 10}
    assert admin("POST", f"{base}{TOPICS}/{topic}/publishRate", rate)[0] == 204
    consumer = client.subscribe(_full(topic), "s")
    body = {"messages": [{"payload": f"r{i}"} for i in range(30)]}
    started = time.monotonic()
    status, acks = admin("POST", f"{base}/topics/persistent/public/default/{topic}", body)
    elapsed = time.monotonic() - started
    assert status == 200
    assert [r["errorCode"] for r in acks["messagePublishResults"]] == [0] * 30
    assert elapsed >= 1.5, f"30 messages at 10/s stored in {elapsed:.2f}s"
    assert receive_payloads(consumer, 30) == [f"r{i}".encode() for i in range(30)]


# -- dispatchRate and subscriptionDispatchRate ---------------------------------------------------


def test_a_dispatch_rate_paces_delivery_and_removing_it_frees_it(
    gateway: GatewayThread, client: Any, topic: str
) -> None:
    base = gateway.http_url
    client.subscribe(_full(topic), "s").close()
    _produce(client, topic)
    rate = {"dispatchThrottlingRateInMsg": RATE, "ratePeriodInSecond": 1}
    assert admin("POST", f"{base}{TOPICS}/{topic}/dispatchRate", rate)[0] == 204
    started = time.monotonic()
    consumer = client.subscribe(_full(topic), "s")
    assert receive_payloads(consumer, COUNT) == [f"m{i}".encode() for i in range(COUNT)]
    elapsed = time.monotonic() - started
    assert elapsed >= AT_LEAST, f"{COUNT} messages at {RATE}/s delivered in {elapsed:.2f}s"

    # a rate of one message a minute, then removed while the consumer is connected
    slow = {"dispatchThrottlingRateInMsg": 1, "ratePeriodInSecond": 60}
    assert admin("POST", f"{base}{TOPICS}/{topic}/dispatchRate", slow)[0] == 204
    limits = gateway.gateway.services.rate_limits
    topic_limiter = gateway.call(limits.dispatch(_full(topic), "s")).limiters[0]
    wait_for(lambda: topic_limiter.rate is not None and topic_limiter.rate.messages == 1)
    _produce(client, topic, 3)
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"m0"  # the bucket's one
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=1500)
    assert admin("DELETE", f"{base}{TOPICS}/{topic}/dispatchRate")[0] == 204
    assert [consumer.receive(timeout_millis=RECEIVE_MS).data() for _ in range(2)] == [
        b"m1",
        b"m2",
    ]


def test_subscription_dispatch_rates_pace_each_subscription_and_its_own_comes_first(
    gateway: GatewayThread, client: Any, topic: str
) -> None:
    base = gateway.http_url
    for sub in ("slow", "own"):
        client.subscribe(_full(topic), sub).close()
    _produce(client, topic)
    every = {"dispatchThrottlingRateInMsg": RATE}
    assert admin("POST", f"{base}{TOPICS}/{topic}/subscriptionDispatchRate", every)[0] == 204
    own = {"dispatchThrottlingRateInMsg": 10_000}
    assert admin("POST", f"{base}{TOPICS}/{topic}/own/dispatchRate", own)[0] == 204
    started = time.monotonic()
    slow = client.subscribe(_full(topic), "slow")
    fast = client.subscribe(_full(topic), "own")
    assert receive_payloads(fast, COUNT) == [f"m{i}".encode() for i in range(COUNT)]
    fast_done = time.monotonic() - started
    assert receive_payloads(slow, COUNT) == [f"m{i}".encode() for i in range(COUNT)]
    slow_done = time.monotonic() - started
    assert slow_done >= AT_LEAST, f"{COUNT} messages at {RATE}/s delivered in {slow_done:.2f}s"
    assert fast_done < slow_done


# -- subscribeRate ------------------------------------------------------------------------------


def test_one_subscribe_too_many_is_refused_until_the_rate_is_removed(
    gateway: GatewayThread, client_factory: Any, topic: str
) -> None:
    base = gateway.http_url
    rate = {"subscribeThrottlingRatePerConsumer": 2, "ratePeriodInSecond": 60}
    assert admin("POST", f"{base}{NS}/subscribeRate", rate)[0] == 204

    def subscribe(name: str = "worker") -> Any:
        # a client of its own each time: the same host, consumer name and consumer id, as
        # a consumer reconnecting
        return client_factory(gateway.url).subscribe(_full(topic), "s", consumer_name=name)

    subscribe().close()
    subscribe().close()
    with pytest.raises(pulsar.NotAllowedError):
        subscribe()
    subscribe("another-worker").close()  # another consumer identity
    assert admin("DELETE", f"{base}{NS}/subscribeRate")[0] == 204
    subscribe().close()


def test_a_paused_connection_shows_in_the_throttled_connections_gauge(
    gateway: GatewayThread, client: Any, topic: str
) -> None:
    base = gateway.http_url
    assert admin("PUT", f"{base}{TOPICS}/{topic}")[0] == 204
    rate = {"publishThrottlingRateInMsg": 5}
    assert admin("POST", f"{base}{TOPICS}/{topic}/publishRate", rate)[0] == 204
    producer = client.create_producer(_full(topic), batching_enabled=False)
    registry = gateway.gateway.services.metrics.registry

    def throttled() -> float:
        labels = {"protocol": "binary", "reason": "topic_publish_rate"}
        return registry.get_sample_value("pulsar_gateway_throttled_connections", labels) or 0.0

    for i in range(15):  # 5 at once, 10 more over two seconds
        producer.send_async(f"g{i}".encode(), None)
    wait_for(lambda: throttled() == 1)
    producer.flush()
    wait_for(lambda: throttled() == 0)  # read again once the bucket holds tokens
