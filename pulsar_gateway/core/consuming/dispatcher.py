"""The dispatcher: moves a subscription's messages to this gateway's consumers.

Theory of operation. Each subscription with consumers on this gateway has one dispatcher
task. It sleeps until woken, by a topic notification (pub/sub, from any gateway's
producers or redeliveries), by new permits (``CommandFlow``), when the subscription's
earliest scheduled message is due (every dispatch reply says in how many milliseconds, by
Redis's clock), or by a slow poll that also reaps consumers whose lease expired. Awake, it
runs :meth:`Dispatcher.run_once`: for every local consumer with permits it calls
``dispatch.lua``, which atomically hands the consumer parked redeliveries first, then due
scheduled messages, then new entries past the group's cursor, never more messages than the
permits allow. All consumers' calls go out in the same pipeline.

A lone consumer is fed in chunks of ``DISPATCH_CHUNK`` messages, the request for the next
chunk sent before the current one is encoded, so Redis and the gateway overlap. On
Exclusive, Shared and (once it is known active) Failover its new entries are read
natively: ``dispatch.lua`` runs as control only and a plain ``XREADGROUP`` follows it in the
same pipeline; what the permits or the deliver-at times do not allow goes back through
``settle_read.lua`` (:mod:`.native_read`, docs/architecture.md). With
several consumers holding permits, each call is capped at ``ROUND_ROBIN_BATCH`` messages
so a Shared subscription spreads its backlog, as Pulsar's
``dispatcherMaxRoundRobinBatchSize`` (20) does. Consumers on other gateways compete
through the same Lua script, so the split is fair across the fleet too and no entry is
handed out twice.

A read_compacted subscription (Exclusive or Failover) at or before the topic's compaction
horizon is fed from the compacted view (``dispatch_compacted.lua``, docs/lifecycle.md);
past the horizon that script answers NOT_COMPACTED and the ordinary dispatch follows.

Dispatch rates (``dispatchRate``, ``subscriptionDispatchRate``;
:mod:`pulsar_gateway.core.policies.rate_limits`): a request asks for no more messages than
the topic's and the subscription's buckets on this gateway hold, and what a reply carries
is taken from them before the next request; when a bucket is empty the dispatcher reads
again after ``MESSAGE_RATE_BACKOFF_SECONDS``, as Pulsar's dispatchers reschedule their read
(``PersistentDispatcherMultipleConsumers.readMoreEntries``).

``run_once`` is callable from tests; :meth:`Dispatcher.start` runs it in a loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from pulsar_gateway.core.consuming.consumer import Consumer
from pulsar_gateway.core.consuming.native_read import read_natively
from pulsar_gateway.core.errors import GatewayError, ServiceNotReady
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.futures import read_outcome
from pulsar_gateway.core.model.entry import Delivery
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.policies.rate_limits import MESSAGE_RATE_BACKOFF_SECONDS, DispatchThrottle
from pulsar_gateway.core.policies.unacked_limits import UnackedLimits
from pulsar_gateway.core.storage.keys import SubscriptionKeys
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import dispatch
from pulsar_gateway.core.storage.scripts.dispatch import (
    DispatchReply,
    DispatchStatus,
    SettleReply,
)
from pulsar_gateway.core.topics.topic import Topic

__all__ = [
    "DISPATCH_CHUNK",
    "FIRST_READ_MESSAGES",
    "MAX_READ_SIZE_BYTES",
    "POLL_INTERVAL",
    "ROUND_ROBIN_BATCH",
    "DispatchedSubscription",
    "Dispatcher",
]

log = logging.getLogger(__name__)

#: Most messages one consumer gets per round when several have permits (Pulsar
#: ``dispatcherMaxRoundRobinBatchSize``).
ROUND_ROBIN_BATCH = 20
#: Most messages one request asks for when a lone consumer is fed: small enough that
#: Redis prepares the next chunk while the gateway encodes this one.
DISPATCH_CHUNK = 250
#: Fallback poll when no notification arrives, seconds: covers lost pub/sub messages.
POLL_INTERVAL = 1.0
#: About the most bytes one request asks for (Pulsar ``dispatcherMaxReadSizeBytes``): a
#: request is capped in messages by the average message size delivered so far, as
#: ``ManagedCursorImpl.applyMaxSizeCap`` caps a read by the ledger's average entry size,
#: so a consumer of large messages is not handed DISPATCH_CHUNK of them at once.
MAX_READ_SIZE_BYTES = 5 * 1024 * 1024
#: The average message size assumed before the first delivery: the first request of a
#: dispatcher asks for at most this many messages' worth of MAX_READ_SIZE_BYTES.
FIRST_READ_MESSAGES = 50


class DispatchedSubscription(Protocol):
    """What a dispatcher needs of its subscription."""

    name: str
    type: SubscriptionType
    keys: SubscriptionKeys
    lane: Lane
    topic: Topic
    partition: int
    lease_ms: int
    read_compacted: bool
    consumers: list[Consumer]
    metrics: GatewayMetrics
    unacked_limits: UnackedLimits
    blocked_on_unacked: bool
    dispatch_rates: DispatchThrottle

    def set_active(self, active_uid: str) -> None:
        """Failover: mark which local consumer is active."""

    async def reap(self) -> int:
        """Hand back the entries of consumers whose lease expired."""


def _abandon(consumer: Consumer, exc: BaseException) -> None:
    """A dispatch call for ``consumer`` failed. Unless it was never sent (shutdown), it may
    have run with its reply lost, leaving entries pending at the consumer that it will
    never receive: abandon the consumer, which hands them back (``Consumer.abandon``)."""
    if not isinstance(exc, ServiceNotReady):
        consumer.abandon()


class Dispatcher:
    """Feeds one subscription's local consumers."""

    def __init__(self, subscription: DispatchedSubscription) -> None:
        self.subscription = subscription
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: loop time when the earliest scheduled message is due, if known
        self._due_at: float | None = None
        self._messages_per_entry = 1.0
        #: bytes per message delivered (an estimate; None before the first delivery)
        self._bytes_per_message: float | None = None
        self._next_reap = 0.0
        self._rotation = 0
        #: the next round also asks for consumers blocked on their unacked limit
        self._recheck = False

    def wake(self) -> None:
        self._wake.set()

    def recheck_unacked(self) -> None:
        """Acks came in: the next round asks again for blocked consumers (the script
        decides whether they are under the limit, or half of it, now)."""
        self._recheck = True
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"dispatcher {self.subscription.topic.full_name}"
            )
        self.wake()

    def stop(self) -> asyncio.Task[None] | None:
        """Cancel the dispatcher task; returns it (to await at shutdown) if it was running."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        return task

    async def _run(self) -> None:
        # Runs while it is this dispatcher's task: a stop() whose cancellation is lost
        # (it can be, racing a completed wait) still ends the loop at the next round.
        loop = asyncio.get_running_loop()
        while self._task is asyncio.current_task():
            timeout = POLL_INTERVAL
            if self._due_at is not None:
                timeout = min(timeout, max(0.0, self._due_at - loop.time()))
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                # the slow poll also catches acks made through other gateways (and admin
                # moves) that brought a blocked consumer or subscription under its limit
                self._recheck = True
            self._wake.clear()
            if self._due_at is not None and self._due_at <= loop.time():
                self._due_at = None  # this round's replies tell the next time
            try:
                if time.monotonic() >= self._next_reap:
                    self._next_reap = time.monotonic() + self.subscription.lease_ms / 2000
                    await self.subscription.reap()
                await self.run_once()
            except GatewayError as exc:
                log.warning("dispatch on %s failed: %s", self.subscription.name, exc)
                await asyncio.sleep(0.5)
                self.wake()
            except Exception:
                # A bug must not silently stop a subscription's delivery: log, back off, retry.
                log.exception("dispatcher of %s failed", self.subscription.name)
                await asyncio.sleep(1.0)
                self.wake()

    async def run_once(self) -> int:
        """Dispatch until no local consumer has permits or nothing is left.

        Returns:
            The number of messages delivered.
        """
        sub = self.subscription
        delivered = 0
        recheck, self._recheck = self._recheck, False
        while True:
            ready = [
                c
                for c in sub.consumers
                if c.permits > 0
                and c.writable
                and not c.closed
                and (recheck or not (c.blocked_on_unacked or sub.blocked_on_unacked))
            ]
            recheck = False
            if not ready:
                return delivered
            if self._room() == 0:
                # a dispatch rate's bucket is empty: read again after the back-off (not
                # "nothing left": a terminated topic's consumers are not at its end)
                self._wake_at(int(MESSAGE_RATE_BACKOFF_SECONDS * 1000))
                return delivered
            if len(ready) == 1:
                progress, drained = await self._feed_one(ready[0])
                if drained:
                    self._at_end(ready)
                    return delivered + progress
            else:
                self._rotation = (self._rotation + 1) % len(ready)
                ready = ready[self._rotation :] + ready[: self._rotation]
                ready, calls = self._round_robin(ready)
                progress = 0
                failure: BaseException | None = None
                replies = await asyncio.gather(*calls, return_exceptions=True)
                for consumer, reply in zip(ready, replies, strict=True):
                    if isinstance(reply, BaseException):
                        _abandon(consumer, reply)
                        failure = failure or reply
                    else:
                        progress += self._hand_over(consumer, reply)
                if failure is not None:
                    raise failure
            if not progress:
                self._at_end(ready)
                return delivered
            delivered += progress

    def _at_end(self, consumers: list[Consumer]) -> None:
        """Nothing more to read for ``consumers``: on a terminated topic that is its end,
        which Pulsar's dispatchers tell each consumer (``Consumer.reachedEndOfTopic`` once
        the cursor has read past the last entry)."""
        if self.subscription.topic.terminated:
            for consumer in consumers:
                consumer.reached_end()

    async def _feed_one(self, consumer: Consumer) -> tuple[int, bool]:
        """Feed a lone consumer in chunks, requesting the next chunk before encoding the
        current one, so Redis and this gateway work at the same time. Each request knows
        the permits left after the previous reply, so permits stay exact.

        Returns the messages delivered, and whether the subscription is known to hold
        nothing more for the consumer now: ``dispatch.lua`` reads the stream to its end, so
        a reply short of the permits asked means drained, and asking again at once would
        cost one more script call per wake-up for nothing (a notification that arrived
        meanwhile has set the wake event, and a scheduled message due at once says so with
        ``next_due_ms == 0``). Key_Shared and compacted-view replies can be short with more
        to come (a bounded read, the compaction horizon): those are asked again."""
        lane = self.subscription.lane
        exhaustive = (
            self.subscription.type is not SubscriptionType.KEY_SHARED
            and not self.subscription.read_compacted
        )
        drained = False
        delivered = 0
        want = self._cap(consumer.permits, DISPATCH_CHUNK, self._room())
        fut: asyncio.Future[DispatchReply] | None = self._request(consumer, want, lone=True)
        lane.flush_now()
        while fut is not None:
            try:
                reply = await fut
            except Exception as exc:  # any failure: the script may have run (see _abandon)
                _abandon(consumer, exc)
                raise
            fut = None
            if reply.settled is not None:
                self._await_settle(consumer, reply.settled)
            if not self._check_reply(consumer, reply):
                return delivered, True
            deliveries = reply.deliveries
            messages = sum(d.num_messages for d in deliveries)
            self._take_rate(deliveries, messages)
            left = consumer.permits - messages
            if reply.drained is None:
                drained = exhaustive and messages < want
                more = messages >= want
            else:  # a native read: it says whether the stream had more
                drained = reply.drained
                more = not drained
            if reply.room == 0:
                # at an unacked limit: the next request is refused, and its BLOCKED reply
                # says which limit (so acks wake the dispatcher when they bring it down)
                drained, more = False, True
            if more and left > 0 and consumer.writable and not consumer.closed:
                want = self._cap(left, DISPATCH_CHUNK, self._room())
                if want > 0:
                    fut = self._request(consumer, want, lone=True)
                    lane.flush_now()
                else:  # the dispatch rate is spent: run_once backs off
                    drained = False
            delivered += self._deliver(consumer, deliveries, messages)
        return delivered, drained

    def _cap(self, permits: int, chunk: int, room: int = -1) -> int:
        """Messages to ask for: the permits, at most ``chunk``, about MAX_READ_SIZE_BYTES
        at the average message size seen, and at most ``room`` (the dispatch rates' room,
        -1: no rate; 0 asks for nothing)."""
        capped = min(permits, chunk, max(1, int(MAX_READ_SIZE_BYTES / self._message_size())))
        return capped if room < 0 else min(capped, room)

    def _message_size(self) -> float:
        """The average message size delivered so far (a first guess before any)."""
        per_message = self._bytes_per_message
        if per_message is None:
            per_message = MAX_READ_SIZE_BYTES / FIRST_READ_MESSAGES
        return max(per_message, 1.0)

    def _room(self) -> int:
        """Messages the topic's and the subscription's dispatch rates leave for the next
        read (Pulsar's ``calculateToRead``): -1 when none is set, 0 when a bucket is empty."""
        rates = self.subscription.dispatch_rates
        if not rates.limited:
            return -1
        return rates.room(self._message_size())

    def _take_rate(self, deliveries: list[Delivery], messages: int) -> None:
        """Take what a reply carries from the dispatch rates' buckets, once it is read, as
        Pulsar does (``acquirePermitsForDeliveredMessages``): a read may overdraw them."""
        rates = self.subscription.dispatch_rates
        if messages and rates.limited:
            rates.consume(messages, sum(len(d.blob) for d in deliveries))

    def _round_robin(
        self, ready: list[Consumer]
    ) -> tuple[list[Consumer], list[asyncio.Future[DispatchReply]]]:
        """One request per consumer, ROUND_ROBIN_BATCH messages at most each, the dispatch
        rates' room shared out in turn (the consumers it does not reach wait for the next
        round); returns the consumers asked and their requests."""
        room = self._room()
        asked: list[Consumer] = []
        calls: list[asyncio.Future[DispatchReply]] = []
        for consumer in ready:
            want = self._cap(consumer.permits, ROUND_ROBIN_BATCH, room)
            if want <= 0:
                break
            if room > 0:
                room -= want
            asked.append(consumer)
            calls.append(self._request(consumer, want))
        return asked, calls

    def _await_settle(self, consumer: Consumer, settled: asyncio.Future[SettleReply]) -> None:
        """Act on a native read's ``settle_read.lua`` reply when it comes. Until it runs,
        the entries it settles are pending at ``consumer`` without having been sent: if it
        fails, abandon the consumer, which hands them back (see _abandon)."""

        def done(fut: asyncio.Future[SettleReply]) -> None:
            if fut.cancelled():
                return
            exc = fut.exception()
            if exc is not None:
                log.warning("settling a read on %s failed: %s", self.subscription.name, exc)
                _abandon(consumer, exc)
                return
            reply = fut.result()
            if reply.wake_fleet:
                self.subscription.topic.notify()
            if reply.next_due_ms >= 0:
                self._wake_at(reply.next_due_ms)

        settled.add_done_callback(done)

    def _request(
        self, consumer: Consumer, permits: int, *, lone: bool = False
    ) -> asyncio.Future[DispatchReply]:
        if self.subscription.read_compacted:  # the compacted view first (docs/lifecycle.md)
            request = self._request_compacted(consumer, permits)
        else:
            request = self._request_plain(
                consumer, permits, native=lone and self._reads_natively(consumer)
            )
        # A request whose consumer left meanwhile is dropped unread; its failure (the
        # subscription deleted under it: NOGROUP) must not be reported as never retrieved.
        request.add_done_callback(read_outcome)
        return request

    def _reads_natively(self, consumer: Consumer) -> bool:
        """Whether a lone consumer's new entries are read natively (:mod:`.native_read`):
        on Exclusive and Shared, and on Failover once the consumer is known to be the
        active one (an inactive one would read only to hand everything back). Key_Shared
        routes each entry by its key in Lua; a compacted view is read in Lua too."""
        sub = self.subscription
        if sub.type is SubscriptionType.FAILOVER:
            return consumer.active is True
        # a consumer that may be over its unacked limit is asked by the script alone: a
        # native read would take entries only to hand them back
        return (
            sub.type is not SubscriptionType.KEY_SHARED
            and not consumer.blocked_on_unacked
            and not sub.blocked_on_unacked
        )

    def _request_plain(
        self, consumer: Consumer, permits: int, *, native: bool = False
    ) -> asyncio.Future[DispatchReply]:
        sub = self.subscription
        limits = sub.unacked_limits
        unacked = (
            limits.consumer,
            int(consumer.blocked_on_unacked),
            limits.subscription,
            int(sub.blocked_on_unacked),
        )
        if sub.type is SubscriptionType.KEY_SHARED:
            return dispatch.dispatch_key_shared(
                sub.lane,
                sub.keys,
                subscription=sub.name,
                consumer=consumer.uid,
                permits=permits,
                messages_per_entry=self._messages_per_entry,
                lease_ms=sub.lease_ms,
                unacked_limits=unacked,
            )
        call = read_natively if native else dispatch.dispatch
        return call(
            sub.lane,
            sub.keys,
            subscription=sub.name,
            consumer=consumer.uid,
            permits=permits,
            messages_per_entry=self._messages_per_entry,
            lease_ms=sub.lease_ms,
            subscription_type=sub.type,
            partition=sub.partition,
            unacked_limits=unacked,
        )

    def _request_compacted(self, consumer: Consumer, permits: int) -> asyncio.Future[DispatchReply]:
        """``dispatch_compacted.lua`` while the subscription is at or before the compaction
        horizon, chained to the ordinary dispatch when the script answers NOT_COMPACTED:
        either way one future of a dispatch reply."""
        sub = self.subscription
        result: asyncio.Future[DispatchReply] = asyncio.get_running_loop().create_future()
        call = dispatch.dispatch_compacted(
            sub.lane,
            sub.keys,
            compaction=sub.topic.keys.compaction,
            compacted=sub.topic.keys.compacted,
            subscription=sub.name,
            consumer=consumer.uid,
            permits=permits,
            messages_per_entry=self._messages_per_entry,
            lease_ms=sub.lease_ms,
            subscription_type=sub.type,
            partition=sub.partition,
        )

        def chain(source: asyncio.Future[DispatchReply]) -> None:
            if result.done():
                return
            if source.cancelled():
                result.cancel()
            elif (exc := source.exception()) is not None:
                result.set_exception(exc)
            else:
                result.set_result(source.result())

        def done(fut: asyncio.Future[DispatchReply]) -> None:
            if (
                not fut.cancelled()
                and fut.exception() is None
                and fut.result().status is DispatchStatus.NOT_COMPACTED
            ):
                self._request_plain(consumer, permits).add_done_callback(chain)
            else:
                chain(fut)

        call.add_done_callback(done)
        return result

    def _check_reply(self, consumer: Consumer, reply: DispatchReply) -> bool:
        """Act on a dispatch reply's status; True when it carries deliveries."""
        sub = self.subscription
        if reply.status is DispatchStatus.CONSUMER_GONE:
            consumer.lost()
            return False
        if reply.status is DispatchStatus.NOT_ACTIVE:
            sub.set_active(reply.active)
            return False
        if reply.status is DispatchStatus.BLOCKED:
            # over an unacked limit: nothing for the consumer (or the subscription) until
            # acks bring it down to half (recheck_unacked, or the slow poll)
            consumer.blocked_on_unacked = reply.consumer_blocked
            sub.blocked_on_unacked = reply.subscription_blocked
            return False
        if consumer.blocked_on_unacked or sub.blocked_on_unacked:
            consumer.blocked_on_unacked = sub.blocked_on_unacked = False
        if reply.wake_fleet:
            # Key_Shared entries were queued for consumers elsewhere, or a message was
            # scheduled ahead of the earliest one: wake the other gateways.
            sub.topic.notify()
        if reply.next_due_ms >= 0:
            self._wake_at(reply.next_due_ms)
        if reply.lateness_ms:
            sub.metrics.observe_delayed_lateness(reply.lateness_ms)
        if sub.type is SubscriptionType.FAILOVER:
            sub.set_active(consumer.uid)
        return True

    def _wake_at(self, due_in_ms: int) -> None:
        """Be awake when the earliest scheduled message is due, ``due_in_ms`` from the
        reply (Redis's clock: only the interval is used, so gateway clocks do not matter;
        the reply's travel time only makes the wake-up later, never early)."""
        due_at = asyncio.get_running_loop().time() + due_in_ms / 1000
        if self._due_at is None or due_at < self._due_at:
            self._due_at = due_at
            if due_in_ms == 0:
                self.wake()

    def _hand_over(self, consumer: Consumer, reply: DispatchReply) -> int:
        """Deliver one dispatch reply; returns the messages delivered."""
        if not self._check_reply(consumer, reply):
            return 0
        deliveries = reply.deliveries
        messages = sum(d.num_messages for d in deliveries)
        self._take_rate(deliveries, messages)
        return self._deliver(consumer, deliveries, messages)

    def _deliver(self, consumer: Consumer, deliveries: list[Delivery], messages: int) -> int:
        if not deliveries:
            return 0
        self._messages_per_entry = 0.8 * self._messages_per_entry + 0.2 * (
            messages / len(deliveries)
        )
        if consumer.closed:
            # Closed while the call was in flight: the release script, queued after this
            # dispatch, has parked these entries again.
            return 0
        size = consumer.deliver(deliveries, messages) / max(messages, 1)
        known = self._bytes_per_message
        self._bytes_per_message = size if known is None else 0.8 * known + 0.2 * size
        return messages
