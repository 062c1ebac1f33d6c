"""Subscriptions: a named cursor on a topic, shared by every gateway of the fleet.

In Redis a subscription is a consumer group on the topic's stream (DESIGN.md): the group's
last-delivered id is the read cursor, its pending-entries list the unacked messages, and
its subscription type sits in the topic's ``subs`` hash. The :class:`Subscription` object
here is only this gateway's view: the consumers attached through it and the dispatcher that
feeds them. It holds no state another gateway would need.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from gateway.consumer import (
    Consumer,
    ConsumerSink,
    LastMessageId,
    SubscriptionType,
)
from gateway.dispatcher import Dispatcher
from gateway.errors import GatewayError, ServiceNotReady, SubscriptionNotFound
from gateway.key_shared import KeySharedPolicy
from gateway.keys import PARKED_CONSUMER
from gateway.message_id import MessageId
from gateway.producer import ENTRY_NUM_MESSAGES
from gateway.scripts import raise_for_status
from gateway.storage import Storage
from gateway.topic import Topic

if TYPE_CHECKING:
    from gateway.broker import Broker

__all__ = ["Subscription"]

log = logging.getLogger(__name__)

#: Hand-back tasks in flight (a task needs a reference until it ends).
_hand_backs: set[asyncio.Task[None]] = set()
#: Pause between attempts to reach Redis again, seconds.
HAND_BACK_RETRY = 0.2


class Subscription:
    """This gateway's side of one subscription: local consumers and their dispatcher."""

    def __init__(
        self,
        broker: Broker,
        topic: Topic,
        name: str,
        sub_type: SubscriptionType,
        durable: bool,
    ) -> None:
        self.broker = broker
        self.topic = topic
        self.name = name
        self.type = sub_type
        self.durable = durable
        self.storage: Storage = broker.storage
        self.consumers: list[Consumer] = []
        #: KEYS of every subscription script (``lua/lib.lua`` ``sub_keys``)
        self.keys = topic.keys.subscription_keys(name)
        self.consumers_key = topic.keys.consumers(name)
        self.lease_ms = int(broker.config.consumer_lease_seconds * 1000)
        self.dispatcher = Dispatcher(self)
        #: readers/consumers with read_compacted see the compacted view (docs/lifecycle.md)
        self.read_compacted = False

    async def attach(
        self,
        uid: str,
        consumer_name: str,
        sink: ConsumerSink,
        start_position: bytes,
        *,
        priority_level: int = 0,
        key_shared: KeySharedPolicy | None = None,
    ) -> Consumer:
        """Register a consumer in Redis (creating the group at ``start_position`` if new).

        Raises:
            ConsumerBusy: Exclusive subscription already has a consumer, or another type.
            ConsumerAssignError: Key_Shared STICKY ranges invalid or taken.
        """
        policy = key_shared or KeySharedPolicy()
        is_key_shared = self.type is SubscriptionType.KEY_SHARED
        code, message, handed_back, active = await self.storage.eval(
            "subscribe",
            self.keys,
            [
                self.name,
                int(self.type),
                start_position,
                uid,
                consumer_name,
                self.lease_ms,
                PARKED_CONSUMER,
                priority_level,
                self.topic.partition,
                int(policy.mode) if is_key_shared else "",
                policy.ranges_text() if is_key_shared else "",
                int(policy.allow_out_of_order),
                int(self.durable),
            ],
        )
        raise_for_status(code, message)
        if handed_back or self.type in (SubscriptionType.FAILOVER, SubscriptionType.KEY_SHARED):
            # Membership changed: other gateways recompute the active consumer (Failover)
            # or route waiting entries (Key_Shared).
            self.topic.notify()
        consumer = Consumer(self, uid, consumer_name, sink)
        self.consumers.append(consumer)
        if self.type is SubscriptionType.FAILOVER:
            self.set_active(active)
        self.dispatcher.start()
        return consumer

    def set_active(self, active_uid: bytes | str) -> None:
        """Failover: mark which local consumer is active (``b""``: none here knows)."""
        if isinstance(active_uid, bytes):
            active_uid = active_uid.decode()
        for consumer in self.consumers:
            consumer.set_active(consumer.uid == active_uid)

    async def refresh_active(self) -> None:
        """Failover: ask Redis which consumer is active and tell local consumers."""
        active = await self.storage.eval("failover_active", self.keys, [self.topic.partition])
        self.set_active(active)

    async def remove(self, consumer: Consumer) -> None:
        """Detach ``consumer``; its unacked entries go back to the subscription."""
        if consumer.closed:
            return
        consumer.closed = True
        self.forget(consumer)
        if not self.durable and not self.consumers:
            # A reader's subscription lives as long as its consumer (Pulsar non-durable).
            await self._delete(consumer.uid)
            return
        handed_back = await self.storage.eval(
            "release_consumer", self.keys, [self.name, consumer.uid, PARKED_CONSUMER]
        )
        if handed_back or self.type in (SubscriptionType.FAILOVER, SubscriptionType.KEY_SHARED):
            self.topic.notify()

    def hand_back(self, uid: str) -> None:
        """Release consumer ``uid`` in Redis as soon as Redis answers (its entries go back
        to the subscription), trying until its lease would have run out; after that any
        gateway's reaper does it (``reap_consumers.lua``)."""
        task = asyncio.get_running_loop().create_task(self._hand_back(uid))
        _hand_backs.add(task)
        task.add_done_callback(_hand_backs.discard)

    async def _hand_back(self, uid: str) -> None:
        deadline = time.monotonic() + self.lease_ms / 1000
        while True:
            try:
                handed_back = await self.storage.eval(
                    "release_consumer", self.keys, [self.name, uid, PARKED_CONSUMER]
                )
            except GatewayError as exc:
                if isinstance(exc, ServiceNotReady) or time.monotonic() >= deadline:
                    log.warning("consumer %s not released (%s); its lease will expire", uid, exc)
                    return
                await asyncio.sleep(HAND_BACK_RETRY)
                continue
            if handed_back or self.type in (SubscriptionType.FAILOVER, SubscriptionType.KEY_SHARED):
                self.topic.notify()
            return

    async def unsubscribe(self, consumer: Consumer) -> None:
        """Delete the subscription on ``consumer``'s request (Pulsar UNSUBSCRIBE)."""
        await self._delete(consumer.uid)
        consumer.closed = True
        self.forget(consumer)

    async def _delete(self, uid: str) -> None:
        code, message = await self.storage.eval(
            "unsubscribe", self.keys, [self.name, uid, PARKED_CONSUMER]
        )
        raise_for_status(code, message)

    async def seek(self, group_position: bytes) -> None:
        """Reposition the subscription so delivery restarts after ``group_position`` (a
        consumer-group id, see :func:`gateway.broker.start_position`), and close every
        consumer of it on every gateway; clients re-subscribe (Pulsar's seek sequence).

        Raises:
            SubscriptionNotFound: the subscription is gone.
        """
        detached = await self.storage.eval("seek", self.keys, [self.name, group_position])
        if detached < 0:
            raise SubscriptionNotFound(f"Subscription {self.name} does not exist")
        # Other gateways find their consumers' leases gone on their next dispatch.
        self.topic.notify()
        for consumer in list(self.consumers):
            consumer.lost()

    def forget(self, consumer: Consumer) -> None:
        """Drop ``consumer`` from this gateway's view (Redis is handled by the caller)."""
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        if not self.consumers:
            self.broker.drop_subscription(self)

    async def last_message_id(self) -> LastMessageId:
        last_id, fields, mark_delete = await self.storage.eval(
            "last_message_id", [self.topic.keys.stream], [self.name]
        )
        num = 1
        is_batch = False
        for i in range(0, len(fields), 2):
            if fields[i] == ENTRY_NUM_MESSAGES:
                num = int(fields[i + 1])
                is_batch = True
        return LastMessageId(
            last=MessageId.from_stream_id(last_id) if last_id else None,
            last_num_messages=num,
            last_is_batch=is_batch,
            mark_delete=MessageId.from_stream_id(mark_delete) if mark_delete else None,
        )
