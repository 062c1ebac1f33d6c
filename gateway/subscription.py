"""Subscriptions: a named cursor on a topic, shared by every gateway of the fleet.

In Redis a subscription is a consumer group on the topic's stream (DESIGN.md): the group's
last-delivered id is the read cursor, its pending-entries list the unacked messages, and
its subscription type sits in the topic's ``subs`` hash. The :class:`Subscription` object
here is only this gateway's view: the consumers attached through it and the dispatcher that
feeds them. It holds no state another gateway would need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.consumer import (
    Consumer,
    ConsumerSink,
    LastMessageId,
    SubscriptionType,
)
from gateway.dispatcher import Dispatcher
from gateway.keys import PARKED_CONSUMER
from gateway.message_id import MessageId
from gateway.producer import ENTRY_NUM_MESSAGES
from gateway.scripts import raise_for_status
from gateway.storage import Storage
from gateway.topic import Topic

if TYPE_CHECKING:
    from gateway.broker import Broker

__all__ = ["Subscription"]


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
        self.consumers_key = topic.keys.consumers(name)
        self.names_key = topic.keys.consumer_names(name)
        self.lease_ms = int(broker.config.consumer_lease_seconds * 1000)
        self.dispatcher = Dispatcher(self)
        #: readers/consumers with read_compacted see the compacted view (docs/lifecycle.md)
        self.read_compacted = False

    async def attach(
        self, uid: str, consumer_name: str, sink: ConsumerSink, start_position: bytes
    ) -> Consumer:
        """Register a consumer in Redis (creating the group at ``start_position`` if new).

        Raises:
            ConsumerBusy: Exclusive subscription already has a consumer, or another type.
        """
        keys = self.topic.keys
        code, message, handed_back = await self.storage.eval(
            "subscribe",
            [keys.stream, keys.subscriptions, self.consumers_key, self.names_key],
            [
                self.name,
                int(self.type),
                start_position,
                uid,
                consumer_name,
                self.lease_ms,
                PARKED_CONSUMER,
            ],
        )
        raise_for_status(code, message)
        if handed_back:
            self.topic.notify()
        consumer = Consumer(self, uid, consumer_name, sink)
        self.consumers.append(consumer)
        self.dispatcher.start()
        return consumer

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
            "release_consumer",
            [self.topic.keys.stream, self.consumers_key, self.names_key],
            [self.name, consumer.uid, PARKED_CONSUMER],
        )
        if handed_back:
            self.topic.notify()

    async def unsubscribe(self, consumer: Consumer) -> None:
        """Delete the subscription on ``consumer``'s request (Pulsar UNSUBSCRIBE)."""
        await self._delete(consumer.uid)
        consumer.closed = True
        self.forget(consumer)

    async def _delete(self, uid: str) -> None:
        keys = self.topic.keys
        code, message = await self.storage.eval(
            "unsubscribe",
            [keys.stream, keys.subscriptions, self.consumers_key, self.names_key],
            [self.name, uid, PARKED_CONSUMER],
        )
        raise_for_status(code, message)

    def forget(self, consumer: Consumer) -> None:
        """Drop ``consumer`` from this gateway's view (Redis is handled by the caller)."""
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        if not self.consumers:
            self.dispatcher.stop()
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
