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
chunk sent before the current one is encoded, so Redis and the gateway overlap. With
several consumers holding permits, each call is capped at ``ROUND_ROBIN_BATCH`` messages
so a Shared subscription spreads its backlog, as Pulsar's
``dispatcherMaxRoundRobinBatchSize`` (20) does. Consumers on other gateways compete
through the same Lua script, so the split is fair across the fleet too and no entry is
handed out twice.

``run_once`` is callable from tests; :meth:`Dispatcher.start` runs it in a loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from gateway.compaction import read_compacted_request
from gateway.consumer import Consumer, Delivery, SubscriptionType, ack_set_words
from gateway.errors import GatewayError, ServiceNotReady
from gateway.keys import PARKED_CONSUMER
from gateway.producer import ENTRY_BLOB, ENTRY_NUM_MESSAGES
from gateway.scripts import STATUS_CONSUMER_GONE, STATUS_NOT_ACTIVE

if TYPE_CHECKING:
    from gateway.subscription import Subscription

__all__ = ["DISPATCH_CHUNK", "ROUND_ROBIN_BATCH", "Dispatcher", "parse_deliveries"]

log = logging.getLogger(__name__)

#: Most messages one consumer gets per round when several have permits (Pulsar
#: ``dispatcherMaxRoundRobinBatchSize``).
ROUND_ROBIN_BATCH = 20
#: Most messages one request asks for when a lone consumer is fed: small enough that
#: Redis prepares the next chunk while the gateway encodes this one.
DISPATCH_CHUNK = 250
#: Fallback poll when no notification arrives, seconds: covers lost pub/sub messages.
POLL_INTERVAL = 1.0


def parse_deliveries(reply: list[Any]) -> list[Delivery]:
    """Turn a dispatch script's ``{code, moved, next_due, id, fields, count, ack set, ...}``
    into deliveries."""
    out: list[Delivery] = []
    for i in range(3, len(reply), 4):
        fields = reply[i + 1]
        blob = b""
        num = 1
        for j in range(0, len(fields), 2):
            name = fields[j]
            if name == ENTRY_BLOB:
                blob = fields[j + 1]
            elif name == ENTRY_NUM_MESSAGES:
                num = int(fields[j + 1])
        delivery = Delivery(reply[i], blob, num, int(reply[i + 2]))
        ack_set = reply[i + 3]
        if ack_set:
            delivery.ack_set = ack_set_words(ack_set)
            delivery.num_messages = ack_set.count(b"1")
        out.append(delivery)
    return out


def _abandon(consumer: Consumer, exc: BaseException) -> None:
    """A dispatch call for ``consumer`` failed. Unless it was never sent (shutdown), it may
    have run with its reply lost, leaving entries pending at the consumer that it will
    never receive: abandon the consumer, which hands them back (``Consumer.abandon``)."""
    if not isinstance(exc, ServiceNotReady):
        consumer.abandon()


class Dispatcher:
    """Feeds one subscription's local consumers."""

    def __init__(self, subscription: Subscription) -> None:
        self.subscription = subscription
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: loop time when the earliest scheduled message is due, if known
        self._due_at: float | None = None
        self._messages_per_entry = 1.0
        self._next_reap = 0.0
        self._rotation = 0

    def wake(self) -> None:
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
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._wake.clear()
            if self._due_at is not None and self._due_at <= loop.time():
                self._due_at = None  # this round's replies tell the next time
            try:
                if time.monotonic() >= self._next_reap:
                    await self.reap()
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

    async def reap(self) -> int:
        """Hand back the unacked entries of consumers whose lease expired."""
        sub = self.subscription
        self._next_reap = time.monotonic() + sub.lease_ms / 2000
        handed_back: int = await sub.storage.eval(
            "reap_consumers", sub.keys, [sub.name, PARKED_CONSUMER]
        )
        if sub.type is SubscriptionType.FAILOVER:
            await sub.refresh_active()
        if handed_back:
            log.info(
                "subscription %s: %d entries handed back from expired consumers",
                sub.name,
                handed_back,
            )
            sub.topic.notify()
        return handed_back

    async def run_once(self) -> int:
        """Dispatch until no local consumer has permits or nothing is left.

        Returns:
            The number of messages delivered.
        """
        sub = self.subscription
        delivered = 0
        while True:
            ready = [c for c in sub.consumers if c.permits > 0 and not c.closed]
            if not ready:
                return delivered
            if len(ready) == 1:
                progress = await self._feed_one(ready[0])
            else:
                self._rotation = (self._rotation + 1) % len(ready)
                ready = ready[self._rotation :] + ready[: self._rotation]
                calls = [self._request(c, min(c.permits, ROUND_ROBIN_BATCH)) for c in ready]
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
                return delivered
            delivered += progress

    async def _feed_one(self, consumer: Consumer) -> int:
        """Feed a lone consumer in chunks, requesting the next chunk before encoding the
        current one, so Redis and this gateway work at the same time. Each request knows
        the permits left after the previous reply, so permits stay exact."""
        storage = self.subscription.storage
        delivered = 0
        want = min(consumer.permits, DISPATCH_CHUNK)
        fut: asyncio.Future[Any] | None = self._request(consumer, want)
        storage.flush_now()
        while fut is not None:
            try:
                reply = await fut
            except GatewayError as exc:
                _abandon(consumer, exc)
                raise
            fut = None
            if not self._check_reply(consumer, reply):
                return delivered
            deliveries = parse_deliveries(reply)
            messages = sum(d.num_messages for d in deliveries)
            left = consumer.permits - messages
            if messages >= want and left > 0 and not consumer.closed:
                want = min(left, DISPATCH_CHUNK)
                fut = self._request(consumer, want)
                storage.flush_now()
            delivered += self._deliver(consumer, deliveries, messages)
        return delivered

    def _request(
        self, consumer: Consumer, permits: int, compacted: bool = True
    ) -> asyncio.Future[Any]:
        sub = self.subscription
        args = [
            sub.name,
            consumer.uid,
            permits,
            f"{self._messages_per_entry:.3f}",
            sub.lease_ms,
            PARKED_CONSUMER,
        ]
        if compacted and sub.read_compacted:  # the compacted view first (docs/lifecycle.md)
            return read_compacted_request(
                sub,
                [*args, int(sub.type), sub.topic.partition],
                lambda: self._request(consumer, permits, False),
            )
        if sub.type is SubscriptionType.KEY_SHARED:
            return sub.storage.eval("dispatch_key_shared", sub.keys, args)
        return sub.storage.eval("dispatch", sub.keys, [*args, int(sub.type), sub.topic.partition])

    def _check_reply(self, consumer: Consumer, reply: list[Any]) -> bool:
        """Act on a dispatch reply's status; True when it carries deliveries."""
        sub = self.subscription
        if reply[0] == STATUS_CONSUMER_GONE:
            consumer.lost()
            return False
        if reply[0] == STATUS_NOT_ACTIVE:
            sub.set_active(reply[1])
            return False
        if reply[1]:
            # Key_Shared entries were queued for consumers elsewhere, or a message was
            # scheduled ahead of the earliest one: wake the other gateways.
            sub.topic.notify()
        if reply[2] >= 0:
            self._wake_at(reply[2])
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

    def _hand_over(self, consumer: Consumer, reply: list[Any]) -> int:
        """Deliver one dispatch reply; returns the messages delivered."""
        if not self._check_reply(consumer, reply):
            return 0
        deliveries = parse_deliveries(reply)
        return self._deliver(consumer, deliveries, sum(d.num_messages for d in deliveries))

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
        consumer.deliver(deliveries, messages)
        return messages
