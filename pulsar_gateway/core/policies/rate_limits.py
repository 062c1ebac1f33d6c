"""Rate policies: how fast a topic takes messages in, hands them out and is subscribed to.

Pulsar's rate policies, and what enforces each one here:

* ``publishRate`` (``PublishRate {publishThrottlingRateInMsg, publishThrottlingRateInByte}``,
  topic level): every message a producer sends takes tokens from its topic's buckets, and
  when that leaves a bucket empty the producer's connection is not read until the buckets
  hold tokens again (Pulsar's ``PublishRateLimiterImpl.handlePublishThrottling`` and its
  unthrottling queue; the ``TopicPublishRate`` reason of ``ServerCnxThrottleTracker``). The
  front ends hold a :class:`PublishThrottle` each: a binary connection stops being read, a
  WebSocket producer stops reading frames, a REST produce request waits before its next
  message.
* ``dispatchRate`` (the topic's) and ``subscriptionDispatchRate`` (each subscription's; a
  subscription's own value, stored as ``subscriptionDispatchRate/<subscription>``, before
  the topic's and the namespace's) (``DispatchRate {dispatchThrottlingRateInMsg,
  dispatchThrottlingRateInByte, ratePeriodInSecond, relativeToPublishRate}``): a dispatcher
  asks for at most the messages its topic's and its subscription's buckets hold
  (:meth:`DispatchThrottle.room`), and when one is empty it reads again after
  :data:`MESSAGE_RATE_BACKOFF_SECONDS` (``PersistentDispatcherMultipleConsumers``
  ``readMoreEntries``, ``PersistentTopic.MESSAGE_RATE_BACKOFF_MS``). What was sent is taken
  from the buckets once it is read, bytes included, as Pulsar takes it after the read
  (``AbstractBaseDispatcher.acquirePermitsForDeliveredMessages``), so one read may overdraw
  a bucket and the next waits longer. ``relativeToPublishRate`` (the topic's publish rate
  added to the given one) is not supported: the rate applies as given.
* ``subscribeRate`` (``SubscribeRate {subscribeThrottlingRatePerConsumer,
  ratePeriodInSecond}``): one consumer identity (client host, consumer name, consumer id:
  ``SubscribeRateLimiter.ConsumerIdentifier``) may subscribe to a persistent topic that
  many times per period; one more is refused with NotAllowed "Subscribe limited by
  subscribe rate limit per consumer." (``PersistentTopic.subscribe``). A subscriber that
  names no client (a WebSocket consumer) is not counted: in Pulsar the WebSocket proxy's
  own client subscribes, with a new consumer id each time.

A rate of -1 or 0 is no limit. A topic-level value replaces its namespace's, even one that
limits nothing (Pulsar's ``PolicyHierarchyValue``); the broker-wide defaults Pulsar has
(``dispatchThrottlingRatePerTopicInMsg`` ...) are not settings here: no policy, no limit.

Buckets are Pulsar's token buckets (``AsyncTokenBucket``, ``FinalRateAsyncTokenBucket``): a
bucket holds at most one period's worth of tokens (the rate), starts full, fills
continuously, and may go below zero when a message or a read is larger than what it holds.

Where a rate is counted. In Pulsar one broker owns a topic, so its buckets see all of the
topic's traffic. Here every gateway serves every topic, and sharing buckets through Redis
would add a round trip per message: each gateway applies the full rate to what it serves
(its producers' messages, its dispatchers' reads, its clients' subscribes). A topic served
by N gateways may take in, or hand out, up to N times its rate; a client whose
reconnections land on several gateways is counted by each apart.

The limiters are state with an injected clock, without I/O (tests step the clock);
:class:`RateLimits` is this gateway's registry of them: it reads the policies when a
limiter is first asked for, and keeps the limiters in use current when any policy changes
in the fleet (``Policies.on_change``) and every :data:`REFRESH_SECONDS` (a lost change
notification).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pulsar_gateway.core.errors import GatewayError, NotAllowed
from pulsar_gateway.core.model.topic_name import TopicName, parse_topic_name
from pulsar_gateway.core.periodic import Periodic
from pulsar_gateway.core.policies.policies import (
    DISPATCH_RATE_POLICY,
    PUBLISH_RATE_POLICY,
    SUBSCRIBE_RATE_POLICY,
    SUBSCRIPTION_DISPATCH_RATE_POLICY,
    Policies,
)

__all__ = [
    "KEEP_SECONDS",
    "MESSAGE_RATE_BACKOFF_SECONDS",
    "RECHECK_SECONDS",
    "REFRESH_SECONDS",
    "RESOLUTION_SECONDS",
    "SUBSCRIBE_LIMITED",
    "ConsumerIdentifier",
    "DispatchRate",
    "DispatchRateLimiter",
    "DispatchThrottle",
    "PublishRate",
    "PublishRateLimiter",
    "PublishThrottle",
    "RateLimits",
    "SubscribeRate",
    "SubscribeRateLimiter",
    "TokenBucket",
]

log = logging.getLogger(__name__)

#: A monotonic clock, seconds.
Clock = Callable[[], float]
_T = TypeVar("_T")

#: ``AsyncTokenBucket``'s resolution: a throttled producer waits for the tokens this long
#: brings (at least one) before it is read again, so a high rate is not checked on every
#: token.
RESOLUTION_SECONDS = 0.016
#: How long a dispatcher whose buckets are empty waits before reading again (Pulsar's
#: ``PersistentTopic.MESSAGE_RATE_BACKOFF_MS``).
MESSAGE_RATE_BACKOFF_SECONDS = 1.0
#: The longest pause between two checks of a throttled producer's buckets, so a rate
#: lifted or raised is noticed this soon (a large message may overdraw a byte bucket by
#: minutes' worth of tokens).
RECHECK_SECONDS = 1.0
#: How often the limiters in use read their policies again, in case a change notification
#: was lost.
REFRESH_SECONDS = 10.0
#: How long a limiter is kept after it was last handed out, even when nothing holds it: a
#: REST produce request, or a consumer that reconnects, finds the tokens the previous one
#: left rather than a full bucket.
KEEP_SECONDS = 10.0
#: Pulsar's refusal of a subscribe over the subscribe rate (``PersistentTopic.subscribe``).
SUBSCRIBE_LIMITED = "Subscribe limited by subscribe rate limit per consumer."
#: Attempts at reading a limiter's policy while change notifications keep coming.
_READ_ATTEMPTS = 3


def _long(value: dict[str, Any], name: str, default: int) -> int:
    item = value.get(name)
    if isinstance(item, bool) or not isinstance(item, int):
        return default
    return item


# -- the policies' values --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PublishRate:
    """Pulsar's ``PublishRate``: messages and bytes per second (-1 or 0: no limit)."""

    messages: int = -1
    bytes: int = -1

    @classmethod
    def from_json(cls, value: Any) -> PublishRate | None:
        """The stored policy (None when unset)."""
        if not isinstance(value, dict):
            return None
        return cls(
            _long(value, "publishThrottlingRateInMsg", -1),
            _long(value, "publishThrottlingRateInByte", -1),
        )

    @property
    def limited(self) -> bool:
        return self.messages > 0 or self.bytes > 0


@dataclass(frozen=True, slots=True)
class DispatchRate:
    """Pulsar's ``DispatchRate``: messages and bytes per ``period`` seconds (-1 or 0: no
    limit); ``relative_to_publish_rate`` is kept and not applied (module docstring)."""

    messages: int = -1
    bytes: int = -1
    period: int = 1
    relative_to_publish_rate: bool = False

    @classmethod
    def from_json(cls, value: Any) -> DispatchRate | None:
        """The stored policy (None when unset)."""
        if not isinstance(value, dict):
            return None
        return cls(
            _long(value, "dispatchThrottlingRateInMsg", -1),
            _long(value, "dispatchThrottlingRateInByte", -1),
            max(_long(value, "ratePeriodInSecond", 1), 1),
            value.get("relativeToPublishRate") is True,
        )

    @property
    def limited(self) -> bool:
        return self.messages > 0 or self.bytes > 0


@dataclass(frozen=True, slots=True)
class SubscribeRate:
    """Pulsar's ``SubscribeRate``: subscribes per consumer per ``period`` seconds (-1 or 0:
    no limit)."""

    per_consumer: int = -1
    period: int = 30

    @classmethod
    def from_json(cls, value: Any) -> SubscribeRate | None:
        """The stored policy (None when unset)."""
        if not isinstance(value, dict):
            return None
        return cls(
            _long(value, "subscribeThrottlingRatePerConsumer", -1),
            max(_long(value, "ratePeriodInSecond", 30), 1),
        )

    @property
    def limited(self) -> bool:
        return self.per_consumer > 0


# -- buckets and limiters ------------------------------------------------------------------


class TokenBucket:
    """Pulsar's ``FinalRateAsyncTokenBucket`` with a consistent view: ``rate`` tokens per
    ``period`` seconds, at most ``rate`` held, full at the start. Tokens are whole, and the
    time a partial token took is carried to the next update, as Pulsar carries its
    remainder nanoseconds.

    Args:
        rate: tokens per period (> 0).
        period: seconds.
        now: the clock's time.
    """

    __slots__ = ("_last", "_target", "capacity", "period", "rate", "tokens")

    def __init__(self, rate: int, period: float, now: float) -> None:
        self.rate = rate
        self.period = period
        self.capacity = rate
        self.tokens = rate
        self._last = now
        #: what a throttled client waits for: the tokens of one resolution, at least one
        #: (``getTargetAmountOfTokensAfterThrottling``)
        self._target = max(int(RESOLUTION_SECONDS * rate / period), 1)

    def update(self, now: float) -> int:
        """Add the whole tokens made since the last update (up to the capacity); the
        tokens held."""
        # the epsilon keeps 0.05 s at 20/s from counting as 0.999... of a token
        made = int((now - self._last) * self.rate / self.period + 1e-9)
        if made > 0:
            self._last += made * self.period / self.rate
            self.tokens = min(self.tokens + made, self.capacity)
        return self.tokens

    def consume(self, amount: int, now: float) -> int:
        """Take ``amount`` tokens (the balance may go below zero); the tokens left."""
        self.tokens = self.update(now) - amount
        return self.tokens

    def available(self, now: float) -> int:
        """Tokens held, 0 when none (``getAvailableDispatchRateLimitOnMsg``)."""
        return max(self.update(now), 0)

    def throttling_duration(self, now: float) -> float:
        """Seconds until the bucket holds its target again (``calculateThrottlingDuration``)."""
        need = self._target - self.update(now)
        if need <= 0:
            return 0.0
        # the part of a token already made since the last update counts
        return max(need * self.period / self.rate - (now - self._last), 0.0)


def _bucket(rate: int, period: float, now: float) -> TokenBucket | None:
    return TokenBucket(rate, period, now) if rate > 0 else None


class PublishRateLimiter:
    """One topic partition's publish rate on this gateway (Pulsar's
    ``PublishRateLimiterImpl``), shared by the topic's producers here.

    ``limited`` is False while the topic has no publish rate: front ends test it before
    anything else, so an unlimited topic costs one attribute read per message.
    """

    __slots__ = ("__weakref__", "_bytes", "_clock", "_messages", "limited", "rate")

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self.rate: PublishRate | None = None
        self._messages: TokenBucket | None = None
        self._bytes: TokenBucket | None = None
        self.limited = False

    def update(self, rate: PublishRate | None) -> None:
        """Apply the policy's value (None: unset). A changed rate starts with full buckets,
        as Pulsar builds new ones (``updateTokenBuckets``); the same one keeps its tokens."""
        if rate == self.rate:
            return
        self.rate = rate
        now = self._clock()
        self._messages = None if rate is None else _bucket(rate.messages, 1.0, now)
        self._bytes = None if rate is None else _bucket(rate.bytes, 1.0, now)
        self.limited = self._messages is not None or self._bytes is not None

    def acquire(self, messages: int, size: int) -> bool:
        """Take the tokens of one SEND (its messages and bytes); True when that left a
        bucket empty, so the producer must pause (``handlePublishThrottling``)."""
        now = self._clock()
        throttle = False
        if self._messages is not None and self._messages.consume(messages, now) <= 0:
            throttle = True
        if self._bytes is not None and self._bytes.consume(size, now) <= 0:
            throttle = True
        return throttle

    def has_tokens(self) -> bool:
        """Whether every bucket holds tokens (``containsTokens``): a paused producer may go
        on."""
        now = self._clock()
        return all(
            bucket is None or bucket.update(now) > 0 for bucket in (self._messages, self._bytes)
        )

    def throttling_duration(self) -> float:
        """Seconds until every bucket holds its target again."""
        now = self._clock()
        return max(
            (b.throttling_duration(now) for b in (self._messages, self._bytes) if b is not None),
            default=0.0,
        )


class PublishThrottle:
    """The publish rates one front end's producers are paused by: one per binary
    connection, WebSocket producer or REST produce request (Pulsar's unthrottling queue,
    per connection). Without I/O: the front end pauses and asks again when told."""

    __slots__ = ("_paused",)

    def __init__(self) -> None:
        self._paused: set[PublishRateLimiter] = set()

    @property
    def throttled(self) -> bool:
        return bool(self._paused)

    def acquire(self, limiter: PublishRateLimiter, messages: int, size: int) -> bool:
        """Count one SEND on ``limiter`` (a limited one); True when it paused a front end
        that was not paused: stop reading, and call :meth:`check` after :meth:`delay`."""
        if not limiter.acquire(messages, size):
            return False
        was = bool(self._paused)
        self._paused.add(limiter)
        return not was

    def check(self) -> float | None:
        """Forget the limiters that hold tokens again (or limit nothing now): None when
        none is left (read again), else the seconds until the next check."""
        self._paused = {
            limiter for limiter in self._paused if limiter.limited and not limiter.has_tokens()
        }
        return self.delay() if self._paused else None

    def delay(self) -> float:
        """Seconds until the paused limiters should hold tokens (at most RECHECK_SECONDS)."""
        longest = max((limiter.throttling_duration() for limiter in self._paused), default=0.0)
        return min(max(longest, 0.001), RECHECK_SECONDS)

    async def wait(self) -> None:
        """Return once no limiter pauses this front end (at once when none does): for
        front ends that take the next message when they choose (WebSocket, REST)."""
        while True:
            pause = self.check()
            if pause is None:
                return
            # a timer, not an event: buckets fill with time, nothing else announces it
            await asyncio.sleep(pause)


class DispatchRateLimiter:
    """One rate a dispatcher obeys on this gateway: its topic's (shared by the topic's
    subscriptions here) or its subscription's (Pulsar's ``DispatchRateLimiter``)."""

    __slots__ = ("__weakref__", "_bytes", "_clock", "_messages", "limited", "rate")

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self.rate: DispatchRate | None = None
        self._messages: TokenBucket | None = None
        self._bytes: TokenBucket | None = None
        self.limited = False

    def update(self, rate: DispatchRate | None) -> None:
        """Apply the policy's value (None: unset); a changed rate starts with full buckets
        (``updateDispatchRate``)."""
        if rate == self.rate:
            return
        self.rate = rate
        now = self._clock()
        period = 1.0 if rate is None else float(rate.period)
        self._messages = None if rate is None else _bucket(rate.messages, period, now)
        self._bytes = None if rate is None else _bucket(rate.bytes, period, now)
        self.limited = self._messages is not None or self._bytes is not None

    def available(self) -> tuple[int, int]:
        """Whole messages and bytes the buckets hold (-1: that one is not limited)."""
        now = self._clock()
        messages = -1 if self._messages is None else self._messages.available(now)
        size = -1 if self._bytes is None else self._bytes.available(now)
        return messages, size

    def consume(self, messages: int, size: int) -> None:
        """Take what was read (``consumeDispatchQuota``)."""
        now = self._clock()
        if self._messages is not None:
            self._messages.consume(messages, now)
        if self._bytes is not None:
            self._bytes.consume(size, now)


class DispatchThrottle:
    """The dispatch rates one subscription's dispatcher obeys here: its topic's and its
    own (no limiter: no limit)."""

    __slots__ = ("limiters",)

    def __init__(self, *limiters: DispatchRateLimiter) -> None:
        self.limiters = limiters

    @property
    def limited(self) -> bool:
        return any(limiter.limited for limiter in self.limiters)

    def room(self, bytes_per_message: float) -> int:
        """Messages the next read may ask for: -1 when nothing limits it, 0 when a bucket
        is empty (back off), else the fewest any bucket allows, a byte bucket's counted at
        ``bytes_per_message`` and at least one message while it holds a byte
        (``AbstractBaseDispatcher.computeReadLimits``)."""
        room = -1
        for limiter in self.limiters:
            if not limiter.limited:
                continue
            messages, size = limiter.available()
            if messages == 0 or size == 0:
                return 0
            if size > 0:
                by_size = max(1, int(size / max(bytes_per_message, 1.0)))
                messages = by_size if messages < 0 else min(messages, by_size)
            room = messages if room < 0 else min(room, messages)
        return room

    def consume(self, messages: int, size: int) -> None:
        """Take what was read from every bucket."""
        for limiter in self.limiters:
            if limiter.limited:
                limiter.consume(messages, size)


@dataclass(frozen=True, slots=True)
class ConsumerIdentifier:
    """Who subscribes, for the subscribe rate (Pulsar's
    ``SubscribeRateLimiter.ConsumerIdentifier``): the client's host, the consumer's name and
    the consumer id its connection gave it."""

    host: str
    consumer_name: str
    consumer_id: int

    @classmethod
    def of(cls, address: str, consumer_name: str, consumer_id: int) -> ConsumerIdentifier:
        """From the client's ``host:port``: the host alone, as Pulsar takes it (each
        connection has a port of its own)."""
        host = address.rpartition(":")[0] if ":" in address else address
        return cls(host, consumer_name, consumer_id)


class SubscribeRateLimiter:
    """One topic partition's subscribe rate on this gateway (Pulsar's
    ``SubscribeRateLimiter``): each consumer identity may subscribe ``per_consumer`` times
    in a period that starts with its first subscribe (Pulsar starts every identity's
    period together, with a reset task; the bound per period is the same)."""

    __slots__ = ("_clock", "_windows", "rate")

    def __init__(self, rate: SubscribeRate, clock: Clock = time.monotonic) -> None:
        self.rate = rate
        self._clock = clock
        #: identity -> (start of its period, subscribes in it)
        self._windows: dict[ConsumerIdentifier, tuple[float, int]] = {}

    def update(self, rate: SubscribeRate) -> None:
        """Apply the policy's value; a changed rate starts every count again."""
        if rate != self.rate:
            self.rate = rate
            self._windows.clear()

    def try_acquire(self, consumer: ConsumerIdentifier) -> bool:
        """Count one subscribe of ``consumer``; False when it is one too many."""
        now = self._clock()
        start, count = self._windows.get(consumer, (now, 0))
        if now - start >= self.rate.period:
            start, count = now, 0
        if count >= self.rate.per_consumer:
            return False
        self._windows[consumer] = (start, count + 1)
        return True

    def prune(self) -> bool:
        """Forget the identities whose period is over; True when none is left."""
        now = self._clock()
        period = self.rate.period
        self._windows = {c: w for c, w in self._windows.items() if now - w[0] < period}
        return not self._windows


# -- this gateway's limiters ------------------------------------------------------------------


def _topic(topic: TopicName | str) -> TopicName:
    return topic if isinstance(topic, TopicName) else parse_topic_name(topic)


class RateLimits:
    """This gateway's rate limiters, kept current with the policies.

    A limiter lives as long as something holds it (a producer's front end, a
    subscription's dispatcher), and at least KEEP_SECONDS after it was last handed out:
    the registry keeps weak references and the recent ones, so the topics this gateway no
    longer serves cost nothing. Subscribe counts are kept per topic while the topic has a
    subscribe rate.

    Args:
        policies: the namespace and topic policies.
        clock: a monotonic clock (tests step their own).
        refresh_seconds: how often the limiters in use read their policies again.
    """

    def __init__(
        self,
        policies: Policies,
        *,
        clock: Clock = time.monotonic,
        refresh_seconds: float = REFRESH_SECONDS,
    ) -> None:
        self._policies = policies
        self._clock = clock
        self._publish: weakref.WeakValueDictionary[str, PublishRateLimiter] = (
            weakref.WeakValueDictionary()
        )
        self._dispatch: weakref.WeakValueDictionary[str, DispatchRateLimiter] = (
            weakref.WeakValueDictionary()
        )
        self._subscription_dispatch: weakref.WeakValueDictionary[
            tuple[str, str], DispatchRateLimiter
        ] = weakref.WeakValueDictionary()
        self._subscribe: dict[str, SubscribeRateLimiter] = {}
        #: the limiters handed out lately, with when: kept for KEEP_SECONDS
        self._recent: dict[object, tuple[float, object]] = {}
        #: change notifications heard: a read that saw one come in reads again
        self._changes = 0
        self._refresh: asyncio.Task[None] | None = None
        self._stopped = False
        self._periodic = Periodic("rate policy refresh", refresh_seconds, self.refresh)

    def start(self) -> None:
        self._policies.on_change(self._changed)
        self._periodic.start()

    async def stop(self) -> None:
        self._stopped = True
        await self._periodic.stop()
        task, self._refresh = self._refresh, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _changed(self) -> None:
        # a refresh already running may have read the old values: start over
        self._changes += 1
        if self._stopped:
            return
        if self._refresh is not None:
            self._refresh.cancel()
        self._refresh = asyncio.get_running_loop().create_task(self._refresh_logged())

    async def _refresh_logged(self) -> None:
        try:
            await self.refresh()
        except GatewayError as exc:
            log.warning("reading the rate policies failed: %s", exc)

    # -- reading the policies ------------------------------------------------------------

    async def _current(self, read: Callable[[], Awaitable[_T]]) -> _T:
        """``read()``, again when a change notification came in meanwhile (the value read
        may be the old one, and the refresh the change started did not see this limiter)."""
        for _ in range(_READ_ATTEMPTS - 1):
            changes = self._changes
            value = await read()
            if changes == self._changes:
                return value
        return await read()

    async def _publish_rate(self, topic: TopicName) -> PublishRate | None:
        return PublishRate.from_json(await self._policies.effective(topic, PUBLISH_RATE_POLICY))

    async def _dispatch_rate(self, topic: TopicName) -> DispatchRate | None:
        return DispatchRate.from_json(await self._policies.effective(topic, DISPATCH_RATE_POLICY))

    async def _subscription_dispatch_rate(
        self, topic: TopicName, subscription: str
    ) -> DispatchRate | None:
        """The subscription's own rate, else the topic's ``subscriptionDispatchRate``,
        else its namespace's (``AbstractTopic.getSubscriptionDispatchRate``)."""
        own, shared = await asyncio.gather(  # one round trip for both (cached reads)
            self._policies.get_topic(topic, f"{SUBSCRIPTION_DISPATCH_RATE_POLICY}/{subscription}"),
            self._policies.effective(topic, SUBSCRIPTION_DISPATCH_RATE_POLICY),
        )
        return DispatchRate.from_json(own if own is not None else shared)

    # -- limiters --------------------------------------------------------------------------

    async def publish(self, topic: TopicName | str) -> PublishRateLimiter:
        """The publish rate limiter of ``topic`` (a partition: each has its own, as each is
        a topic of its own in Pulsar), shared by its producers on this gateway.

        Raises:
            InvalidTopicName: bad topic name.
            StorageError: Redis failed.
        """
        name = _topic(topic)
        key = str(name)
        limiter = self._publish.get(key)
        if limiter is None:
            rate = await self._current(lambda: self._publish_rate(name))
            limiter = self._publish.get(key)  # another producer may have made it meanwhile
            if limiter is None:
                limiter = PublishRateLimiter(self._clock)
                limiter.update(rate)
                self._publish[key] = limiter
        self._recent[("publish", key)] = (self._clock(), limiter)
        return limiter

    async def dispatch(self, topic: TopicName | str, subscription: str) -> DispatchThrottle:
        """The dispatch rates of ``subscription`` on persistent ``topic``: the topic's
        limiter (shared by its subscriptions here) and the subscription's.

        Raises:
            InvalidTopicName: bad topic name.
            StorageError: Redis failed.
        """
        name = _topic(topic)
        key, sub_key = str(name), (str(name), subscription)
        topic_limiter = self._dispatch.get(key)
        own = self._subscription_dispatch.get(sub_key)
        if topic_limiter is None or own is None:
            rate, own_rate = await self._current(
                lambda: asyncio.gather(
                    self._dispatch_rate(name), self._subscription_dispatch_rate(name, subscription)
                )
            )
            # another subscribe may have made them meanwhile: those are kept current
            if topic_limiter is None and (topic_limiter := self._dispatch.get(key)) is None:
                topic_limiter = self._dispatch[key] = DispatchRateLimiter(self._clock)
                topic_limiter.update(rate)
            if own is None and (own := self._subscription_dispatch.get(sub_key)) is None:
                own = self._subscription_dispatch[sub_key] = DispatchRateLimiter(self._clock)
                own.update(own_rate)
        now = self._clock()
        self._recent[("dispatch", key)] = (now, topic_limiter)
        self._recent[("subscription", *sub_key)] = (now, own)
        return DispatchThrottle(topic_limiter, own)

    async def check_subscribe(self, topic: TopicName | str, consumer: ConsumerIdentifier) -> None:
        """Count one subscribe of ``consumer`` to persistent ``topic`` under its subscribe
        rate (the policy is read on each subscribe, through the policy cache).

        Raises:
            NotAllowed: one subscribe too many in the period.
            StorageError: Redis failed.
        """
        name = _topic(topic)
        key = str(name)
        rate = SubscribeRate.from_json(await self._policies.effective(name, SUBSCRIBE_RATE_POLICY))
        if rate is None or not rate.limited:
            self._subscribe.pop(key, None)
            return
        limiter = self._subscribe.get(key)
        if limiter is None:
            limiter = self._subscribe[key] = SubscribeRateLimiter(rate, self._clock)
        else:
            limiter.update(rate)
        if not limiter.try_acquire(consumer):
            log.warning(
                "[%s] subscribe of %s refused by the subscribe rate %s", key, consumer, rate
            )
            raise NotAllowed(SUBSCRIBE_LIMITED)

    async def refresh(self) -> None:
        """Read the policies of every limiter in use again and apply them (an unchanged
        rate keeps its tokens); forget subscribe counts whose period is over."""

        async def publish(key: str, limiter: PublishRateLimiter) -> None:
            limiter.update(await self._publish_rate(_topic(key)))

        async def dispatch(key: str, limiter: DispatchRateLimiter) -> None:
            limiter.update(await self._dispatch_rate(_topic(key)))

        async def own(key: tuple[str, str], limiter: DispatchRateLimiter) -> None:
            limiter.update(await self._subscription_dispatch_rate(_topic(key[0]), key[1]))

        # one gather: the reads of a tick go to Redis in one pipeline
        await asyncio.gather(
            *(publish(key, limiter) for key, limiter in list(self._publish.items())),
            *(dispatch(key, limiter) for key, limiter in list(self._dispatch.items())),
            *(own(key, limiter) for key, limiter in list(self._subscription_dispatch.items())),
        )
        for key, subscribe_limiter in list(self._subscribe.items()):
            if subscribe_limiter.prune():
                del self._subscribe[key]
        now = self._clock()
        self._recent = {k: v for k, v in self._recent.items() if now - v[0] < KEEP_SECONDS}
