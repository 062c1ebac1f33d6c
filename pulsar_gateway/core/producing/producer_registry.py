"""The fleet-wide registry of a topic's producers: unique names and access modes.

Strategy. Redis holds the truth for every gateway: per topic, the names of its connected
producers with a lease each (``producers`` zset), who owns each name and in which access
mode (``producer-owners`` hash), the WaitForExclusive producers queued for it
(``producer-waiters`` zset) and Pulsar's topic epoch. ``add_producer.lua`` applies Pulsar's
rules in one step (unique names, Shared / Exclusive / WaitForExclusive /
ExclusiveWithFencing, topic epochs), so two gateways racing on one topic cannot both win.

Liveness is leased, like consumers' (docs/architecture.md "Design decisions"): each gateway
renews the leases of its producers every third of a lease; a killed gateway's producers stop
blocking their names and exclusive access once their leases run out (``add_producer.lua`` reaps
them). A producer that closes, or whose connection drops, is released at once.

Gateways hear about changes through the topic's ``producer-events`` channel (a hint, like
topic notifications): a fenced or superseded producer's gateway finds it lost at the next
renewal of that topic and closes it (CLOSE_PRODUCER), and queued WaitForExclusive producers
try again when the holder leaves. Renewal also retries waiters, which covers a lost hint
and a holder whose lease ran out. Within a gateway, waiters try in arrival order; across
gateways the first to try after the holder leaves wins.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from pulsar_gateway.core.errors import GatewayError, ProducerFenced, ServiceNotReady, StorageError
from pulsar_gateway.core.producing.producer import Producer
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.notifier import Notifier
from pulsar_gateway.core.storage.scripts import producers
from pulsar_gateway.core.storage.scripts.producers import AddProducerReply, AddProducerStatus
from pulsar_gateway.core.topics.topic import Topic

__all__ = ["ProducerRegistry"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _TopicProducers:
    """This gateway's producers on one topic."""

    topic: Topic
    producers: dict[str, Producer] = field(default_factory=dict)
    #: WaitForExclusive producers queued, in arrival order
    waiters: list[Producer] = field(default_factory=list)
    #: registrations in flight (keeps the entry and its channel while they run)
    adding: int = 0
    check: asyncio.Task[None] | None = None
    check_again: bool = False

    def empty(self) -> bool:
        return not self.producers and not self.waiters and not self.adding


class ProducerRegistry:
    """One gateway's side of the producer registry."""

    def __init__(self, lane: Lane, notifier: Notifier, lease_ms: int) -> None:
        self._lane = lane
        self._notifier = notifier
        self.lease_ms = lease_ms
        self._topics: dict[str, _TopicProducers] = {}

    def producers(self) -> list[Producer]:
        """Every producer registered through this gateway (not the queued ones)."""
        return [p for t in self._topics.values() for p in t.producers.values()]

    # -- registration ------------------------------------------------------------------

    async def add(self, producer: Producer) -> None:
        """Register ``producer`` with the fleet.

        On return the producer is either registered (``producer.ready`` done) or queued
        for exclusive access (``producer.waiting``; ``ready`` resolves later, or fails with
        ProducerFenced when fenced while waiting).

        Raises:
            ProducerBusy: the name is taken, or a Shared producer meets an exclusive one.
            ProducerFenced: exclusive access refused, or a stale topic epoch.
            StorageError: Redis failed.
        """
        entry = self._entry(producer.topic)
        entry.adding += 1
        try:
            reply = await self._try_add(entry, producer, retry=False)
            reply.raise_for_status()
        except Exception:  # refused, or Redis failed: forget the topic unless others use it
            entry.adding -= 1
            self._drop_if_empty(entry)
            raise
        entry.adding -= 1
        if reply.status is AddProducerStatus.QUEUED:
            producer.waiting = True
            entry.waiters.append(producer)
            return
        entry.producers[producer.uid] = producer
        producer.ready.set_result(None)

    async def _try_add(
        self, entry: _TopicProducers, producer: Producer, *, retry: bool
    ) -> AddProducerReply:
        keys = entry.topic.keys
        reply = await producers.add_producer(
            self._lane,
            keys,
            name=producer.name,
            uid=producer.uid,
            access_mode=producer.access_mode,
            epoch=producer.epoch,
            user_provided_name=producer.user_provided_name,
            topic_epoch=producer.topic_epoch,
            lease_ms=self.lease_ms,
            deduplication=producer.deduplication,
            retry=retry,
        )
        if reply.others_removed:
            # Fenced or superseded producers live on some gateway: tell them.
            self._lane.notify(keys.producer_channel)
        if reply.status is AddProducerStatus.OK:
            producer.topic_epoch = reply.topic_epoch
            producer.last_sequence_id = reply.last_sequence_id
            producer.waiting = False
        return reply

    async def remove(self, producer: Producer) -> None:
        """Release ``producer`` (closed by its client, or its connection dropped)."""
        producer.close()
        entry = self._topics.get(producer.topic.full_name)
        if entry is not None:
            entry.producers.pop(producer.uid, None)
            if producer in entry.waiters:
                entry.waiters.remove(producer)
        if not producer.ready.done():
            producer.ready.set_exception(ServiceNotReady("producer closed while waiting"))
        keys = producer.topic.keys
        try:
            waiters_exist = await producers.release_producer(
                self._lane, keys, name=producer.name, uid=producer.uid
            )
        except StorageError as exc:
            # as a crashed gateway's producers: the lease runs out and frees the name
            log.warning("producer %s not released (%s); its lease will expire", producer.name, exc)
            return
        finally:
            if entry is not None:
                self._drop_if_empty(entry)
        if waiters_exist:
            self._lane.notify(keys.producer_channel)

    # -- leases and changes ------------------------------------------------------------

    async def renew(self) -> None:
        """Renew every local lease, close producers that lost theirs, retry waiters."""
        for entry in list(self._topics.values()):
            try:
                await self._check(entry)
            except GatewayError as exc:
                log.warning("producer lease renewal failed on %s: %s", entry.topic.full_name, exc)

    async def _check(self, entry: _TopicProducers) -> None:
        registered = list(entry.producers.values())
        waiters = list(entry.waiters)
        if registered or waiters:
            lost = await producers.renew_producer_leases(
                self._lane,
                entry.topic.keys,
                lease_ms=self.lease_ms,
                producers=[(p.name, p.uid) for p in registered],
                waiters=[w.uid for w in waiters],
            )
            for uid in lost:
                self._lose(entry, uid)
        await self._retry_waiters(entry)
        self._drop_if_empty(entry)

    def _lose(self, entry: _TopicProducers, uid: str) -> None:
        producer = entry.producers.pop(uid, None)
        if producer is not None:
            log.info("producer %s on %s lost its registration; closing it", producer.name, uid)
            producer.lost()
            return
        for waiter in entry.waiters:
            if waiter.uid == uid:
                entry.waiters.remove(waiter)
                self._fail_waiter(waiter, "Fenced out while waiting for exclusive access")
                return

    @staticmethod
    def _fail_waiter(waiter: Producer, message: str) -> None:
        waiter.close()
        if not waiter.ready.done():
            waiter.ready.set_exception(ProducerFenced(message))

    async def _retry_waiters(self, entry: _TopicProducers) -> None:
        while entry.waiters:
            waiter = entry.waiters[0]
            reply = await self._try_add(entry, waiter, retry=True)
            if waiter not in entry.waiters:
                return  # closed meanwhile; its release runs separately
            if reply.status is AddProducerStatus.QUEUED:
                return  # the topic is still taken: later waiters would queue too
            entry.waiters.pop(0)
            if reply.status is not AddProducerStatus.OK:
                waiter.close()
                try:
                    reply.raise_for_status()
                except GatewayError as exc:
                    waiter.ready.set_exception(exc)
                continue
            entry.producers[waiter.uid] = waiter
            waiter.ready.set_result(None)

    def _wake(self, key: str) -> None:
        """A hint on the topic's producer channel: check this gateway's producers there."""
        entry = self._topics.get(key)
        if entry is None:
            return
        if entry.check is not None and not entry.check.done():
            entry.check_again = True
            return
        entry.check = asyncio.get_running_loop().create_task(self._run_checks(entry))

    async def _run_checks(self, entry: _TopicProducers) -> None:
        while True:
            entry.check_again = False
            try:
                await self._check(entry)
            except GatewayError as exc:
                log.warning("producer check failed on %s: %s", entry.topic.full_name, exc)
            if not entry.check_again:
                return

    # -- bookkeeping -------------------------------------------------------------------

    def _entry(self, topic: Topic) -> _TopicProducers:
        key = topic.full_name
        entry = self._topics.get(key)
        if entry is None:
            entry = self._topics[key] = _TopicProducers(topic)
            self._notifier.subscribe(topic.keys.producer_channel, lambda: self._wake(key))
        return entry

    def _drop_if_empty(self, entry: _TopicProducers) -> None:
        key = entry.topic.full_name
        if entry.empty() and self._topics.get(key) is entry:
            del self._topics[key]
            self._notifier.unsubscribe(entry.topic.keys.producer_channel)

    async def close(self) -> None:
        """Release every local producer (gateway shutdown)."""
        for entry in list(self._topics.values()):
            if entry.check is not None:
                entry.check.cancel()
                with contextlib.suppress(asyncio.CancelledError, GatewayError):
                    await entry.check
            for producer in [*entry.producers.values(), *entry.waiters]:
                with contextlib.suppress(GatewayError):
                    await self.remove(producer)
