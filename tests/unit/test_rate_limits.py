"""The rate policies as data (``core/policies/rate_limits.py``): token buckets, the publish,
dispatch and subscribe limiters on a stepped clock, and the registry reading the policies
through a real ``Policies`` over the in-memory lane (no Redis, no sockets)."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import pytest

from pulsar_gateway.core import NotAllowed
from pulsar_gateway.core.consuming.subscription import Subscription
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.rates import Meter
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.policies.policies import Policies
from pulsar_gateway.core.policies.rate_limits import (
    KEEP_SECONDS,
    RECHECK_SECONDS,
    SUBSCRIBE_LIMITED,
    ConsumerIdentifier,
    DispatchRate,
    DispatchRateLimiter,
    DispatchThrottle,
    PublishRate,
    PublishRateLimiter,
    PublishThrottle,
    RateLimits,
    SubscribeRate,
    SubscribeRateLimiter,
    TokenBucket,
)
from pulsar_gateway.core.storage.keys import KeySchema
from tests.unit.fake_lane import FakeLane
from tests.unit.test_consuming import Backlog, add_consumer, permits_asked, topic_of

SCHEMA = KeySchema()
TOPIC = "persistent://public/default/rated"


class Clock:
    """A monotonic clock the test steps."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds


# -- the policies' values ----------------------------------------------------------------------


def test_stored_values_parse_with_pulsar_s_defaults() -> None:
    assert PublishRate.from_json(None) is None
    assert PublishRate.from_json({"publishThrottlingRateInMsg": 20}) == PublishRate(20, -1)
    assert PublishRate.from_json({"publishThrottlingRateInMsg": 0}) == PublishRate(0, -1)
    assert not PublishRate(0, -1).limited
    rate = DispatchRate.from_json(
        {"dispatchThrottlingRateInByte": 1024, "ratePeriodInSecond": 0, "relativeToPublishRate": 1}
    )
    assert rate == DispatchRate(-1, 1024, 1, False)  # the period is at least one second
    assert rate is not None and rate.limited
    assert SubscribeRate.from_json({"subscribeThrottlingRatePerConsumer": 2}) == SubscribeRate(
        2, 30
    )
    assert not SubscribeRate(-1, 30).limited
    assert DispatchRate.from_json("fast") is None


# -- buckets ------------------------------------------------------------------------------------


def test_a_bucket_starts_full_fills_at_its_rate_and_holds_one_period() -> None:
    bucket = TokenBucket(20, 1.0, now=0.0)
    assert bucket.consume(20, 0.0) == 0
    assert bucket.update(0.5) == pytest.approx(10)
    assert bucket.update(5.0) == 20  # never more than one period's worth
    assert bucket.consume(50, 5.0) == -30  # a large read overdraws it
    # the tokens of one resolution (16 ms at 20/s is less than one: one token) after that
    assert bucket.throttling_duration(5.0) == pytest.approx(31 / 20)
    slow = TokenBucket(100, 10.0, now=0.0)  # 100 per 10 seconds: 10 a second
    slow.consume(100, 0.0)
    assert slow.available(1.0) == 10


# -- publish ------------------------------------------------------------------------------------


def test_a_publish_rate_pauses_the_send_that_empties_a_bucket() -> None:
    """PublishRateLimiterImpl: 20 msg/s lets 20 messages through at once, the 20th pauses
    its producer until the bucket holds a token again, 50 ms later."""
    clock = Clock()
    limiter = PublishRateLimiter(clock)
    assert not limiter.limited
    limiter.update(PublishRate(20, -1))
    assert limiter.limited
    assert [limiter.acquire(1, 100) for _ in range(20)] == [False] * 19 + [True]
    assert not limiter.has_tokens()
    assert limiter.throttling_duration() == pytest.approx(0.05)
    clock.step(0.05)
    assert limiter.has_tokens()
    assert limiter.acquire(1, 100)  # one token, taken: paused again


def test_a_byte_rate_counts_bytes() -> None:
    clock = Clock()
    limiter = PublishRateLimiter(clock)
    limiter.update(PublishRate(-1, 1000))
    assert not limiter.acquire(5, 600)
    assert limiter.acquire(1, 600)  # 1000 - 1200 <= 0
    assert limiter.throttling_duration() == pytest.approx(0.216)  # 200 + 16 ms' worth


def test_an_unchanged_rate_keeps_its_tokens_and_a_new_one_starts_full() -> None:
    clock = Clock()
    limiter = PublishRateLimiter(clock)
    limiter.update(PublishRate(10, -1))
    for _ in range(10):
        limiter.acquire(1, 1)
    limiter.update(PublishRate(10, -1))  # another policy changed: same rate
    assert not limiter.has_tokens()
    limiter.update(PublishRate(30, -1))
    assert limiter.has_tokens()
    limiter.update(PublishRate(-1, 0))  # no rate left
    assert not limiter.limited


def test_a_throttle_pauses_once_and_says_when_to_look_again() -> None:
    clock = Clock()
    first, second = PublishRateLimiter(clock), PublishRateLimiter(clock)
    first.update(PublishRate(2, -1))
    second.update(PublishRate(-1, 100))
    throttle = PublishThrottle()
    assert not throttle.acquire(first, 1, 10)
    assert throttle.acquire(first, 1, 10)  # paused now
    assert not throttle.acquire(second, 1, 1000)  # already paused: nothing new to do
    assert throttle.throttled
    # 900 bytes overdrawn at 100 B/s is 9 s away: looked at again within RECHECK_SECONDS
    assert throttle.delay() == RECHECK_SECONDS
    clock.step(0.5)
    assert throttle.check() == RECHECK_SECONDS  # the byte bucket is still empty
    second.update(None)  # the byte rate is removed: only the message rate is left, full
    assert throttle.check() is None
    assert not throttle.throttled


async def test_waiting_for_tokens_returns_once_the_buckets_refill() -> None:
    limiter = PublishRateLimiter()  # the real clock: this waits about 50 ms
    limiter.update(PublishRate(20, -1))
    throttle = PublishThrottle()
    await throttle.wait()  # nothing paused: at once
    paused = [throttle.acquire(limiter, 1, 1) for _ in range(20)]
    assert paused[-1] and throttle.throttled
    await throttle.wait()
    assert limiter.has_tokens() and not throttle.throttled


# -- dispatch -----------------------------------------------------------------------------------


def test_a_dispatcher_reads_what_the_fewest_tokens_allow() -> None:
    clock = Clock()
    topic, own = DispatchRateLimiter(clock), DispatchRateLimiter(clock)
    throttle = DispatchThrottle(topic, own)
    assert not throttle.limited and throttle.room(100.0) == -1
    topic.update(DispatchRate(20, -1, 1))
    own.update(DispatchRate(5, -1, 1))
    assert throttle.room(100.0) == 5
    throttle.consume(5, 500)
    assert throttle.room(100.0) == 0  # the subscription's bucket is empty: back off
    clock.step(1.0)
    assert throttle.room(100.0) == 5
    own.update(None)
    assert throttle.room(100.0) == 20  # the topic's bucket: 15 left, refilled to its 20
    topic.update(DispatchRate(-1, 1000, 1))  # bytes: messages at the average size
    assert throttle.room(100.0) == 10
    assert throttle.room(5000.0) == 1  # at least one message while a byte is left
    throttle.consume(2, 1500)  # taken after the read: the bucket goes below zero
    assert throttle.room(100.0) == 0


def test_a_rate_period_spreads_the_tokens_over_it() -> None:
    clock = Clock()
    limiter = DispatchRateLimiter(clock)
    limiter.update(DispatchRate(100, -1, 10))
    throttle = DispatchThrottle(limiter)
    assert throttle.room(1.0) == 100
    throttle.consume(100, 100)
    clock.step(2.0)
    assert throttle.room(1.0) == 20


# -- subscribe ----------------------------------------------------------------------------------


def test_a_consumer_may_subscribe_so_often_per_period() -> None:
    clock = Clock()
    limiter = SubscribeRateLimiter(SubscribeRate(2, 30), clock)
    me = ConsumerIdentifier.of("10.0.0.7:51234", "worker", 0)
    assert me == ConsumerIdentifier("10.0.0.7", "worker", 0)
    again = ConsumerIdentifier.of("10.0.0.7:51999", "worker", 0)  # a new connection
    assert limiter.try_acquire(me) and limiter.try_acquire(again)
    assert not limiter.try_acquire(me)
    assert limiter.try_acquire(ConsumerIdentifier.of("10.0.0.7:1", "other", 0))
    assert limiter.try_acquire(ConsumerIdentifier.of("[::1]:5", "worker", 0))
    clock.step(30.0)
    assert limiter.try_acquire(me)
    clock.step(30.0)
    assert limiter.prune()  # every period is over: nothing left to keep


# -- the registry -------------------------------------------------------------------------------


def _registry() -> tuple[FakeLane, Policies, RateLimits, Clock]:
    """A registry over real Policies on the in-memory lane, whose HSET/HGET/HDEL keep the
    policy hashes in a dict."""
    hashes: dict[str, dict[str, bytes]] = {}
    lane = FakeLane()

    def hset(args: list[Any]) -> int:
        hashes.setdefault(args[0], {})[args[1]] = args[2].encode()
        return 1

    def hdel(args: list[Any]) -> int:
        return int(hashes.get(args[0], {}).pop(args[1], None) is not None)

    lane.on_command("HSET", hset)
    lane.on_command("HDEL", hdel)
    lane.on_command("HGET", lambda args: hashes.get(args[0], {}).get(args[1]))
    policies = Policies(lane, None, SCHEMA)  # type: ignore[arg-type]
    clock = Clock()
    return lane, policies, RateLimits(policies, clock=clock), clock


async def test_producers_of_a_topic_share_its_limiter_kept_current() -> None:
    lane, policies, limits, clock = _registry()
    await policies.set_topic(TOPIC, "publishRate", {"publishThrottlingRateInMsg": 3})
    limiter = await limits.publish(TOPIC)
    assert limiter is await limits.publish(TOPIC)
    assert limiter.rate == PublishRate(3, -1)
    partition = await limits.publish(f"{TOPIC}-partition-1")  # its partitioned topic's policy
    assert partition is not limiter and partition.rate == PublishRate(3, -1)
    reads = len(lane.named("HGET"))
    await limits.publish(TOPIC)
    assert len(lane.named("HGET")) == reads  # a limiter in use is not read again
    for _ in range(3):
        limiter.acquire(1, 1)
    await policies.set_topic(TOPIC, "deduplicationEnabled", True)  # another policy
    await limits.refresh()
    assert not limiter.has_tokens()  # unchanged: it keeps its (empty) buckets
    await policies.delete_topic(TOPIC, "publishRate")
    await limits.refresh()
    assert not limiter.limited and not partition.limited
    del limiter, partition
    gc.collect()
    assert (await limits.publish(TOPIC)).rate is None  # kept a while after its last use
    clock.step(KEEP_SECONDS)
    await limits.refresh()  # forgets what nobody used lately
    gc.collect()
    assert len(await _gather_refresh_reads(lane, limits)) == 0  # nothing in use: no reads


async def _gather_refresh_reads(lane: FakeLane, limits: RateLimits) -> list[Any]:
    before = len(lane.named("HGET"))
    await limits.refresh()
    return lane.named("HGET")[before:]


async def test_a_subscription_s_own_rate_comes_before_the_topic_s_and_the_namespace_s() -> None:
    _, policies, limits, _ = _registry()
    await policies.set_namespace(
        "public/default", "subscriptionDispatchRate", {"dispatchThrottlingRateInMsg": 50}
    )
    await policies.set_topic(TOPIC, "dispatchRate", {"dispatchThrottlingRateInMsg": 100})
    throttle = await limits.dispatch(TOPIC, "audit")
    topic_limiter, own = throttle.limiters
    assert topic_limiter.rate == DispatchRate(100, -1, 1)
    assert own.rate == DispatchRate(50, -1, 1)  # the namespace's, for every subscription
    await policies.set_topic(TOPIC, "subscriptionDispatchRate", {"dispatchThrottlingRateInMsg": 30})
    await policies.set_topic(
        TOPIC, "subscriptionDispatchRate/audit", {"dispatchThrottlingRateInMsg": 7}
    )
    await limits.refresh()
    assert own.rate == DispatchRate(7, -1, 1)
    other = await limits.dispatch(TOPIC, "billing")
    assert other.limiters[0] is topic_limiter  # the topic's rate is shared by its subscriptions
    assert other.limiters[1].rate == DispatchRate(30, -1, 1)
    assert throttle.room(1.0) == 7


async def test_one_subscribe_too_many_is_refused() -> None:
    _, policies, limits, _ = _registry()
    worker = ConsumerIdentifier("127.0.0.1", "worker", 0)
    await limits.check_subscribe(TOPIC, worker)  # no policy: nothing counted
    await policies.set_namespace(
        "public/default",
        "subscribeRate",
        {"subscribeThrottlingRatePerConsumer": 2, "ratePeriodInSecond": 60},
    )
    await limits.check_subscribe(TOPIC, worker)
    await limits.check_subscribe(TOPIC, worker)
    with pytest.raises(NotAllowed, match=SUBSCRIBE_LIMITED):
        await limits.check_subscribe(TOPIC, worker)
    await limits.check_subscribe(TOPIC, ConsumerIdentifier("127.0.0.1", "worker", 1))
    await policies.delete_namespace("public/default", "subscribeRate")
    await limits.check_subscribe(TOPIC, worker)  # lifted


async def test_a_change_notification_refreshes_the_limiters() -> None:
    lane, policies, limits, _ = _registry()
    limits.start()
    try:
        limiter = await limits.publish(TOPIC)
        assert not limiter.limited
        await policies.set_topic(TOPIC, "publishRate", {"publishThrottlingRateInByte": 10})
        policies._changed()  # what the notifier does when the policies channel speaks
        for _ in range(100):  # the refresh runs as a task: a few loop turns
            if limiter.limited:
                break
            await asyncio.sleep(0)
        assert limiter.rate == PublishRate(-1, 10)
    finally:
        await limits.stop()
    assert json.loads(lane.named("HSET")[0].args[2]) == {"publishThrottlingRateInByte": 10}


# -- the dispatcher under dispatch rates ----------------------------------------------------------


def _rated_subscription(lane: FakeLane, clock: Clock, *rates: DispatchRate) -> Subscription:
    """A Shared subscription whose dispatcher obeys ``rates`` (the topic's, its own)."""
    lane.on_command("XREADGROUP", lambda args: None)
    topic = topic_of(lane)
    sub = Subscription(
        topic,
        "billing",
        SubscriptionType.SHARED,
        True,
        lane=lane,  # type: ignore[arg-type]
        lease_ms=30_000,
        metrics=GatewayMetrics(),
        meter=Meter(),
        on_idle=lambda _: None,
    )
    limiters = []
    for rate in rates:
        limiter = DispatchRateLimiter(clock)
        limiter.update(rate)
        limiters.append(limiter)
    sub.dispatch_rates = DispatchThrottle(*limiters)
    return sub


async def test_a_dispatcher_asks_for_what_its_rates_hold_then_backs_off() -> None:
    """PersistentDispatcherMultipleConsumers.readMoreEntries: a read asks for at most the
    available permits of the topic's and the subscription's limiters; with none left the
    dispatcher reads again after MESSAGE_RATE_BACKOFF_MS, and asks Redis nothing meanwhile."""
    lane, clock = FakeLane(), Clock()
    sub = _rated_subscription(lane, clock, DispatchRate(30, -1, 1), DispatchRate(20, -1, 1))
    Backlog(100).serve(lane)
    consumer, sink = add_consumer(sub, "gw-0", permits=100)

    assert await sub.dispatcher.run_once() == 20
    assert permits_asked(lane, "dispatch", "gw-0") == [20]
    assert await sub.dispatcher.run_once() == 0  # the subscription's bucket is empty
    assert len(lane.named("dispatch")) == 1
    assert sub.dispatcher._due_at is not None  # it looks again after the back-off

    clock.step(0.5)  # 10 more for the subscription, the topic has 10 + 15
    assert await sub.dispatcher.run_once() == 10
    assert permits_asked(lane, "dispatch", "gw-0") == [20, 10]

    # two consumers share what is left, in turn; the second waits for the next round
    other, other_sink = add_consumer(sub, "gw-1", permits=100)
    clock.step(0.25)  # 5 for the subscription
    assert await sub.dispatcher.run_once() == 5
    assert len(sink.delivered) + len(other_sink.delivered) == 35
    assert consumer.permits + other.permits == 165

    sub.dispatch_rates = DispatchThrottle()  # the rates removed: everything, at once
    assert await sub.dispatcher.run_once() == 65
