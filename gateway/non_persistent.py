"""Non-persistent topics (``non-persistent://tenant/ns/topic``): live delivery, nothing stored.

Strategy: a non-persistent topic is a Redis Pub/Sub channel (``P:{T}:np``). A producer's
SEND publishes the entry (the client's blob, untouched, with its message count and an id)
and is acknowledged at once, as Pulsar's ``NonPersistentTopic.publishMessage`` completes
before dispatching. Every gateway with consumers on the topic subscribes to the channel and
hands each message to its local consumers that should get it, if they have permits; a
message that finds no permits is dropped and counted (Pulsar's ``msgDropRate``).

Who gets a message, fleet-wide. Each subscription has a registry of live consumers in Redis
(``P:{T}:np-consumers:<sub>``, members ``<type>|<consumer name>|<uid>`` scored by lease
expiry; the subscription is listed in the topic's ``subs`` hash while it has consumers, so
an admin delete finds it), which enforces the Exclusive rule and the one-type rule on subscribe
(``np_subscribe.lua``). Every gateway re-reads the registry every second while renewing its
own leases (``np_refresh.lua``) and, from that list, every gateway computes the same target:

* Exclusive: the one consumer;
* Failover: the active consumer, the first by (consumer name, uid), or for partition ``i``
  of a partitioned topic the ``i mod n``-th, as Pulsar spreads partitions;
* Shared: one consumer per message, chosen by a hash of the message id over the sorted
  list, so each message goes to exactly one consumer of the fleet while the gateways agree
  on the list. While a consumer joins or leaves, gateways may disagree for up to a refresh
  period: a message may then go to two consumers or to none (non-persistent delivery is
  at-most-once per consumer, never guaranteed).

Key_Shared is refused on non-persistent topics (NotAllowed). Acks, negative acks and
redelivery requests are accepted and ignored (there is nothing to redeliver).
GET_LAST_MESSAGE_ID answers "empty" (entry -1), so ``has_message_available`` is False.

Message ids: Pulsar sends ``(0, 0)`` for every non-persistent message; here an id is
``(ms, gateway-bits << 40 | counter)``: the publishing gateway's clock, 20 bits of its id and
a counter, so ids are distinct across the fleet in practice and the client accepts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from prometheus_client import Counter
from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.consumer import (
    Consumer,
    ConsumerSink,
    Delivery,
    LastMessageId,
    SubscriptionType,
)
from gateway.errors import GatewayError, NotAllowed
from gateway.producer import Producer
from gateway.scripts import raise_for_status
from gateway.topic import Topic

if TYPE_CHECKING:
    from gateway.broker import Broker
    from gateway.subscription import Subscription

__all__ = ["NonPersistentConsumer", "NonPersistentProducer", "NonPersistentTopics"]

log = logging.getLogger(__name__)

#: Channel message: ledger id, entry id, messages in the entry, then the stored blob.
_HEADER = struct.Struct(">QQI")
#: How often a gateway renews its consumers and re-reads every subscription's registry.
REFRESH_SECONDS = 1.0


def _done(value: Any) -> asyncio.Future[Any]:
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut


class NonPersistentProducer(Producer):
    """A producer whose SEND is a PUBLISH on the topic's channel, acknowledged at once."""

    def __init__(self, topic: Topic, name: str, manager: NonPersistentTopics) -> None:
        super().__init__(topic, name, manager.storage, manager.metrics)
        self._manager = manager

    def publish(
        self,
        blob: bytes,
        num_messages: int,
        sticky_key: bytes | None = None,
        chunk: str | None = None,
        *,
        publish_time: int = 0,
        deliver_at: int | None = None,
    ) -> asyncio.Future[bytes]:
        # Key_Shared is refused on non-persistent topics and chunking needs a persistent
        # one (the client refuses it), so the sticky key and chunk tag are unused. Nothing
        # is stored to hold back, so delivery times are ignored, as Pulsar's non-persistent
        # dispatchers do (they have no delayed-delivery tracker).
        ledger, entry = self._manager.next_id()
        payload = _HEADER.pack(ledger, entry, num_messages) + blob
        self._manager.storage.call("PUBLISH", self.topic.keys.non_persistent_channel, payload)
        self._count_in(blob, num_messages)
        return _done(b"%d-%d" % (ledger, entry))


@dataclass(eq=False)
class _Subscription:
    """This gateway's view of one non-persistent subscription."""

    topic: Topic
    name: str
    type: SubscriptionType
    registry: str
    consumers: list[NonPersistentConsumer] = field(default_factory=list)
    #: Every live member of the fleet, sorted (the registry as last read).
    members: list[str] = field(default_factory=list)


def _member(sub_type: SubscriptionType, name: str, uid: str) -> str:
    return f"{int(sub_type)}|{name}|{uid}"


def _member_key(member: str) -> tuple[str, str]:
    """(consumer name, uid) of a registry member; uids never contain ``|``."""
    rest, _, uid = member[2:].rpartition("|")
    return rest, uid


class NonPersistentConsumer(Consumer):
    """A consumer of a non-persistent subscription. It speaks :class:`Consumer`'s interface
    (the adapters' view of every consumer) but holds only permits: nothing is stored."""

    def __init__(
        self,
        manager: NonPersistentTopics,
        sub: _Subscription,
        uid: str,
        name: str,
        sink: ConsumerSink,
    ) -> None:
        # Consumer.__init__ binds a persistent subscription's stream; only the attributes
        # the adapters read are set here.
        self._manager = manager
        self.np_subscription = sub
        # Adapters read ``consumer.subscription.topic``; the object has that attribute.
        self.subscription = cast("Subscription", sub)
        self.uid = uid
        self.name = name
        self.sink = sink
        self.permits = 0
        self.closed = False
        self.reports_redelivery_count = False
        self.active: bool | None = None
        self.batch_acks = False
        self.member = _member(sub.type, name, uid)
        self._metrics = manager.metrics
        self.init_stats(manager.broker.rates.topic(sub.topic.full_name).out(sub.name))

    def flow(self, permits: int) -> None:
        self.permits += permits

    def ack(self, stream_ids: Any) -> asyncio.Future[int]:
        return _done(0)

    def ack_cumulative(self, upto: bytes) -> asyncio.Future[int]:
        return _done(0)

    def ack_batch_indexes(self, acks: Any) -> asyncio.Future[int]:
        return _done(0)

    async def seek(self, group_position: bytes) -> None:
        # Nothing is stored to seek in (Pulsar NonPersistentSubscription.resetCursor).
        raise NotAllowed("Seek is not supported on non-persistent topics")

    def redeliver(self, stream_ids: Any) -> asyncio.Future[int]:
        return _done(0)

    async def last_message_id(self) -> LastMessageId:
        # Nothing is stored: the topic always reads as empty (entry -1, gotcha G12).
        return LastMessageId(last=None, last_num_messages=1, last_is_batch=False, mark_delete=None)

    async def close(self) -> None:
        await self._manager.detach(self)

    async def unsubscribe(self) -> None:
        await self._manager.detach(self)

    def lost(self) -> None:
        if not self.closed:
            self.closed = True
            self._manager.forget(self)
            self.sink.closed_by_gateway(self)


class NonPersistentTopics:
    """Every non-persistent producer and consumer of one gateway."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.storage = broker.storage
        self.metrics = broker.metrics
        self._redis: Redis = broker.redis
        self._lease_ms = int(broker.config.consumer_lease_seconds * 1000)
        self._subs: dict[tuple[str, str], _Subscription] = {}
        self._by_channel: dict[str, list[_Subscription]] = {}
        self._gateway_bits = (zlib.crc32(broker.gateway_id.encode()) & 0xFFFFF) << 40
        self._counter = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self._refresh_task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._stopping = False
        self.dropped = Counter(
            "pulsar_gateway_non_persistent_msg_dropped",
            "Non-persistent messages dropped for lack of permits (Pulsar msgDropRate)",
            ["topic", "subscription"],
            registry=broker.metrics.registry,
        )

    def next_id(self) -> tuple[int, int]:
        counter = next(self._counter) & ((1 << 40) - 1)
        return int(time.time() * 1000), self._gateway_bits | counter

    # -- producers and consumers ---------------------------------------------------------

    def consumers(self) -> Iterator[NonPersistentConsumer]:
        """Every non-persistent consumer attached through this gateway."""
        for sub in self._subs.values():
            yield from sub.consumers

    def producer(self, topic: Topic, name: str) -> NonPersistentProducer:
        return NonPersistentProducer(topic, name, self)

    async def subscribe(
        self,
        topic: Topic,
        subscription: str,
        sub_type: SubscriptionType,
        consumer_name: str,
        sink: ConsumerSink,
        uid: str,
    ) -> NonPersistentConsumer:
        """Attach a consumer to a non-persistent subscription.

        Raises:
            ConsumerBusy: the Exclusive rule or a subscription type clash (fleet-wide).
            NotAllowed: Key_Shared (not supported on non-persistent topics here).
        """
        if sub_type is SubscriptionType.KEY_SHARED:
            raise NotAllowed("Key_Shared subscriptions are not supported on non-persistent topics")
        key = (topic.full_name, subscription)
        sub = self._subs.get(key)
        if sub is None:
            registry = topic.keys.non_persistent_consumers(subscription)
            sub = _Subscription(topic, subscription, sub_type, registry)
        consumer = NonPersistentConsumer(self, sub, uid, consumer_name, sink)
        code, message = await self.storage.eval(
            "np_subscribe",
            [sub.registry, topic.keys.subscriptions],
            [consumer.member, int(sub_type), self._lease_ms, subscription],
        )
        raise_for_status(code, message)
        if key not in self._subs:
            self._subs[key] = sub
            channel = topic.keys.non_persistent_channel
            self._by_channel.setdefault(channel, []).append(sub)
        sub.consumers.append(consumer)
        if consumer.member not in sub.members:
            sub.members = sorted([*sub.members, consumer.member])
        self._start()
        self._changed.set()
        return consumer

    async def detach(self, consumer: NonPersistentConsumer) -> None:
        if consumer.closed:
            return
        consumer.closed = True
        self.forget(consumer)
        sub = consumer.np_subscription
        await self.storage.eval(
            "np_release",
            [sub.registry, sub.topic.keys.subscriptions],
            [consumer.member, sub.name],
        )

    def forget(self, consumer: NonPersistentConsumer) -> None:
        sub = consumer.np_subscription
        if consumer in sub.consumers:
            sub.consumers.remove(consumer)
        if consumer.member in sub.members:
            sub.members = [m for m in sub.members if m != consumer.member]
        if not sub.consumers:
            self._subs.pop((sub.topic.full_name, sub.name), None)
            channel = sub.topic.keys.non_persistent_channel
            subs = self._by_channel.get(channel, [])
            if sub in subs:
                subs.remove(sub)
            if not subs:
                self._by_channel.pop(channel, None)
        self._changed.set()

    # -- delivery ------------------------------------------------------------------------

    def _target(self, sub: _Subscription, ledger: int, entry: int) -> NonPersistentConsumer | None:
        """The consumer of ``sub`` that gets this message, if it is attached here."""
        if sub.type is SubscriptionType.EXCLUSIVE:
            return sub.consumers[0] if sub.consumers else None
        members = sub.members or [c.member for c in sub.consumers]
        if not members:
            return None
        if sub.type is SubscriptionType.FAILOVER:
            ordered = sorted(members, key=_member_key)
            partition = sub.topic.partition
            chosen = ordered[partition % len(ordered) if partition >= 0 else 0]
        else:
            chosen = members[zlib.crc32(b"%d-%d" % (ledger, entry)) % len(members)]
        for consumer in sub.consumers:
            if consumer.member == chosen:
                return consumer
        return None

    def on_message(self, channel: str, payload: bytes) -> None:
        """A message published on ``channel`` by any gateway."""
        subs = self._by_channel.get(channel)
        if not subs or len(payload) < _HEADER.size:
            return
        ledger, entry, num_messages = _HEADER.unpack_from(payload)
        blob = payload[_HEADER.size :]
        for sub in subs:
            consumer = self._target(sub, ledger, entry)
            if consumer is None:
                continue
            if consumer.permits <= 0:
                # Pulsar's NonPersistentDispatcher drops what a consumer has no permits for.
                self.dropped.labels(sub.topic.full_name, sub.name).inc(num_messages)
                continue
            consumer.permits -= num_messages
            delivery = Delivery(b"%d-%d" % (ledger, entry), blob, num_messages, 0)
            consumer.count_out([delivery], num_messages)
            consumer.sink.deliver(consumer, [delivery])

    # -- background work -----------------------------------------------------------------

    def _start(self) -> None:
        if self._task is None:
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._listen(), name="non-persistent listener")
            self._refresh_task = loop.create_task(self._refresh(), name="non-persistent refresh")

    async def _listen(self) -> None:
        """Follow the channels of the topics with local consumers."""
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        subscribed: set[str] = set()
        while not self._stopping:
            try:
                wanted = set(self._by_channel)
                if wanted - subscribed:
                    await pubsub.subscribe(*(wanted - subscribed))
                if subscribed - wanted:
                    await pubsub.unsubscribe(*(subscribed - wanted))
                subscribed = wanted
                if not subscribed:
                    self._changed.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), 0.1)
                    continue
                message = await pubsub.get_message(timeout=0.05)
                while message is not None:
                    if message.get("type") == "message":
                        channel = message["channel"]
                        if isinstance(channel, bytes):
                            channel = channel.decode()
                        self.on_message(channel, message["data"])
                    message = await pubsub.get_message(timeout=0)
            except asyncio.CancelledError:
                raise
            except RedisError as exc:
                log.warning("non-persistent pub/sub lost (%s); reconnecting", exc)
                with contextlib.suppress(RedisError):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
                pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
                subscribed = set()
                await asyncio.sleep(0.2)
        with contextlib.suppress(RedisError):
            await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _refresh(self) -> None:
        while not self._stopping:
            await asyncio.sleep(REFRESH_SECONDS)
            try:
                await self.refresh()
            except (GatewayError, RedisError) as exc:
                log.warning("non-persistent registry refresh failed: %s", exc)

    async def refresh(self) -> None:
        """Renew local leases and re-read every local subscription's consumer list."""
        subs = list(self._subs.values())
        calls = [
            self.storage.eval(
                "np_refresh",
                [sub.registry],
                [self._lease_ms, *(c.member for c in sub.consumers)],
            )
            for sub in subs
        ]
        for sub, (lost, live) in zip(subs, await asyncio.gather(*calls), strict=True):
            sub.members = sorted(m.decode() if isinstance(m, bytes) else m for m in live)
            for member in lost:
                member = member.decode() if isinstance(member, bytes) else member
                for consumer in list(sub.consumers):
                    if consumer.member == member:
                        log.warning("non-persistent consumer %s lost its lease", consumer.uid)
                        consumer.lost()

    async def close(self) -> None:
        """Release every local consumer and stop background work."""
        for sub in list(self._subs.values()):
            for consumer in list(sub.consumers):
                with contextlib.suppress(GatewayError):
                    await consumer.close()
        self._stopping = True
        self._changed.set()
        for task in (self._task, self._refresh_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
