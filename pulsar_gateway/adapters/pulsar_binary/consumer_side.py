"""The consumer side of a binary session: SUBSCRIBE, FLOW, ACK, REDELIVER_UNACKNOWLEDGED,
CLOSE_CONSUMER, UNSUBSCRIBE, GET_LAST_MESSAGE_ID and SEEK (Pulsar's ``ServerCnx``
``handleSubscribe``, ``handleFlow``, ``handleAck``, ...), with the consumers of the
connection by ``consumer_id`` (the client numbers them per connection).

Messages go the other way through a :class:`ConsumerFrameSink`: the core delivers a
consumer's messages to it, and it writes them as MESSAGE frames.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pulsar_gateway.adapters.pulsar_binary import commands as c
from pulsar_gateway.adapters.pulsar_binary.acks import ack_calls, acknowledge
from pulsar_gateway.adapters.pulsar_binary.errors import server_error
from pulsar_gateway.adapters.pulsar_binary.session_state import SessionState
from pulsar_gateway.core import (
    AuthorizationService,
    ConsumerHandle,
    Delivery,
    GatewayError,
    InitialPosition,
    KeySharedMode,
    KeySharedPolicy,
    NotAllowed,
    SchemaRegistry,
    SubscriptionService,
    SubscriptionType,
    TopicName,
    parse_topic_name,
    redeliver_unacknowledged,
    start_position,
    stream_id,
    time_position,
)
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["ConsumerFrameSink", "ConsumerSide"]

log = logging.getLogger(__name__)


class ConsumerFrameSink:
    """The sink the core delivers one consumer's messages and events to: it writes them
    on the connection as MESSAGE, ACTIVE_CONSUMER_CHANGE, CLOSE_CONSUMER and
    REACHED_END_OF_TOPIC frames (the core's ``ConsumerSink``)."""

    __slots__ = ("consumer_id", "consumers", "partition", "state")

    def __init__(
        self,
        state: SessionState,
        consumers: dict[int, ConsumerHandle],
        consumer_id: int,
        partition: int,
    ) -> None:
        self.state = state
        self.consumers = consumers
        self.consumer_id = consumer_id
        self.partition = partition

    def deliver(self, consumer: ConsumerHandle, deliveries: list[Delivery]) -> None:
        self.state.conn.send_messages(self.consumer_id, self.partition, deliveries)
        self.state.wants_flush()

    def active_changed(self, consumer: ConsumerHandle, active: bool) -> None:
        if self.consumers.get(self.consumer_id) is consumer:
            self.state.conn.send_active_consumer_change(self.consumer_id, active)
            self.state.wants_flush()

    def closed_by_gateway(self, consumer: ConsumerHandle) -> None:
        if self.consumers.get(self.consumer_id) is consumer:
            del self.consumers[self.consumer_id]
            self.state.conn.send_close_consumer(self.consumer_id)
            self.state.wants_flush()

    def reached_end_of_topic(self, consumer: ConsumerHandle) -> None:
        conn = self.state.conn
        if self.consumers.get(self.consumer_id) is consumer and conn.takes_end_of_topic:
            conn.send_reached_end_of_topic(self.consumer_id)
            self.state.wants_flush()


class ConsumerSide:
    """Answers one connection's consumer commands.

    Args:
        state: the session's connection side.
        authorization: may the role subscribe (with the subscription's own permissions).
        schemas: a consumer's schema is registered, or refused, before it subscribes.
        subscriptions: consumers attach to subscriptions.
    """

    def __init__(
        self,
        state: SessionState,
        *,
        authorization: AuthorizationService,
        schemas: SchemaRegistry,
        subscriptions: SubscriptionService,
    ) -> None:
        self._state = state
        self._conn = state.conn
        self._authorization = authorization
        self._schemas = schemas
        self._subscriptions = subscriptions
        #: the connection's consumers by the client's consumer id
        self.consumers: dict[int, ConsumerHandle] = {}
        #: the connection's send buffer is under its high water mark
        self.writable = True

    def subscribe(self, cmd: c.Subscribe) -> None:
        if cmd.consumer_id in self.consumers:
            self._conn.send_success(cmd.request_id)  # a retried SUBSCRIBE: idempotent
            return
        state = self._state

        async def run() -> None:
            authz = self._authorization

            async def can_consume(topic: TopicName, role: str | None) -> bool:
                # canConsumeAsync with the subscription: its roles and subscriptionAuthMode
                # (a Prefix refusal raises AuthorizationError with Pulsar's message)
                return await authz.can_consume(topic, role, cmd.subscription)

            refusal = await state.refusal(
                cmd.topic, can_consume, "Client is not authorized to subscribe"
            )
            if refusal is not None:
                state.error(cmd.request_id, refusal)
                return
            try:
                consumer = await self._attach(cmd)
            except GatewayError as exc:
                state.error(cmd.request_id, exc)
                return
            except ValueError as invalid:
                state.error(cmd.request_id, NotAllowed(str(invalid)))
                return
            conn = self._conn
            if state.closed or cmd.consumer_id in self.consumers:
                await consumer.close()
                if not state.closed:
                    conn.send_success(cmd.request_id)
                return
            self.consumers[cmd.consumer_id] = consumer
            consumer.client = state.client_info()
            if not self.writable:
                consumer.set_writable(False)
            conn.send_success(cmd.request_id)
            if consumer.active is not None:
                # Failover: tell the newcomer whether it is active (Pulsar
                # AbstractDispatcherSingleActiveConsumer.addConsumer); the core learnt it
                # before the consumer was registered here.
                conn.send_active_consumer_change(cmd.consumer_id, consumer.active)

        state.spawn(run())

    async def _attach(self, cmd: c.Subscribe) -> ConsumerHandle:
        """The consumer SUBSCRIBE asks for, attached to its subscription.

        Raises:
            GatewayError: refused (by the core's rules, or the consumer's schema).
            ValueError: an unknown subscription type, initial position or Key_Shared mode.
        """
        topic = parse_topic_name(cmd.topic)
        sub_type = SubscriptionType(cmd.sub_type)
        if cmd.schema is not None and topic.persistent:
            # Pulsar registers a consumer's schema, or refuses it with IncompatibleSchema
            # (ServerCnx addSchemaIfIdleOrCheckCompatible).
            await self._schemas.register(topic, cmd.schema)
        sink = ConsumerFrameSink(
            self._state, self.consumers, cmd.consumer_id, topic.partition_index
        )
        return await self._subscriptions.subscribe(
            topic,
            cmd.subscription,
            sub_type,
            cmd.consumer_name,
            sink,
            initial_position=InitialPosition(cmd.initial_position),
            durable=cmd.durable,
            start_message_id=cmd.start_message_id,
            read_compacted=cmd.read_compacted,
            priority_level=cmd.priority_level,
            key_shared=KeySharedPolicy(
                KeySharedMode(cmd.key_shared_mode), cmd.hash_ranges, cmd.allow_out_of_order
            ),
            client=self._state.client_info(),
            consumer_id=cmd.consumer_id,
        )

    def _consumer(self, consumer_id: int) -> ConsumerHandle | None:
        consumer = self.consumers.get(consumer_id)
        if consumer is None:
            log.debug("command for unknown consumer %d ignored", consumer_id)
        return consumer

    def flow(self, cmd: c.Flow) -> None:
        consumer = self._consumer(cmd.consumer_id)
        if consumer is not None:
            consumer.flow(cmd.permits)

    def ack(self, cmd: c.Ack) -> None:
        conn = self._conn
        consumer = self._consumer(cmd.consumer_id)
        if consumer is None:
            if cmd.request_id is not None:
                conn.send_ack_response(
                    cmd.consumer_id, cmd.request_id, pb.ConsumerNotFound, "Consumer not found"
                )
            return
        try:
            fut = acknowledge(consumer, ack_calls(cmd))
        except GatewayError as exc:
            # Refused (cumulative ack on Shared/Key_Shared): Pulsar answers only when the
            # client asked for a receipt, and otherwise drops the ack.
            log.debug("ack refused on %s: %s", consumer.uid, exc)
            if cmd.request_id is not None:
                conn.send_ack_response(cmd.consumer_id, cmd.request_id, *server_error(exc))
            return
        if cmd.request_id is None:
            return
        request_id, consumer_id = cmd.request_id, cmd.consumer_id
        if fut is None:
            conn.send_ack_response(consumer_id, request_id)
            return
        wants_flush = self._state.wants_flush

        def respond(f: asyncio.Future[Any]) -> None:
            exc = f.exception()
            if exc is None:
                conn.send_ack_response(consumer_id, request_id)
            else:
                conn.send_ack_response(consumer_id, request_id, *server_error(exc))
            wants_flush()

        fut.add_done_callback(respond)

    def redeliver(self, cmd: c.Redeliver) -> None:
        consumer = self._consumer(cmd.consumer_id)
        if consumer is None:
            return
        # The ids count on Shared and Key_Shared only; elsewhere every unacked message of
        # the consumer comes again, in order (the core's rule, as ServerCnx's).
        ids = sorted({stream_id(*i) for i in cmd.message_ids if i[0] >= 0 and i[1] >= 0})
        redeliver_unacknowledged(consumer, ids)

    def close_consumer(self, cmd: c.CloseConsumer) -> None:
        consumer = self.consumers.pop(cmd.consumer_id, None)
        if consumer is None:
            self._conn.send_success(cmd.request_id)
            return

        async def run() -> None:
            try:
                await consumer.close()
            except GatewayError as exc:
                log.warning("releasing consumer %s failed: %s", consumer.uid, exc)
            self._conn.send_success(cmd.request_id)

        self._state.spawn(run())

    def _requested_consumer(self, request_id: int, consumer_id: int) -> ConsumerHandle | None:
        """The consumer a request names, or None after answering ConsumerNotFound."""
        consumer = self.consumers.get(consumer_id)
        if consumer is None:
            self._conn.send_error(request_id, pb.ConsumerNotFound, "Consumer not found")
        return consumer

    def unsubscribe(self, cmd: c.Unsubscribe) -> None:
        consumer = self._requested_consumer(cmd.request_id, cmd.consumer_id)
        if consumer is None:
            return

        async def run() -> None:
            try:
                await consumer.unsubscribe()
            except GatewayError as exc:
                self._state.error(cmd.request_id, exc)
                return
            self.consumers.pop(cmd.consumer_id, None)
            self._conn.send_success(cmd.request_id)

        self._state.spawn(run())

    def get_last_message_id(self, cmd: c.GetLastMessageId) -> None:
        consumer = self._requested_consumer(cmd.request_id, cmd.consumer_id)
        if consumer is None:
            return

        async def run() -> None:
            try:
                last = await consumer.last_message_id()
            except GatewayError as exc:
                self._state.error(cmd.request_id, exc)
                return
            partition = consumer.partition
            if last.last is None:
                position = (-1, -1, partition, -1)
            else:
                batch_index = last.last_num_messages - 1 if last.last_is_batch else -1
                position = (last.last.ledger_id, last.last.entry_id, partition, batch_index)
            md = last.mark_delete
            self._conn.send_last_message_id_response(
                cmd.request_id, position, (md.ledger_id, md.entry_id) if md else (-1, -1)
            )

        self._state.spawn(run())

    def seek(self, cmd: c.Seek) -> None:
        consumer = self._requested_consumer(cmd.request_id, cmd.consumer_id)
        if consumer is None:
            return
        if cmd.message_id is not None:
            position = start_position(InitialPosition.LATEST, cmd.message_id)
        else:
            # By publish time: from the first entry published at or after it
            # (ServerCnx.handleSeek -> PersistentSubscription.resetCursor(timestamp)).
            position = time_position(cmd.publish_time or 0)

        async def run() -> None:
            try:
                # Closes every consumer of the subscription (CLOSE_CONSUMER), then SUCCESS:
                # the client re-subscribes and completes seek() (``ServerCnx.handleSeek``).
                await consumer.seek(position)
            except GatewayError as exc:
                self._state.error(cmd.request_id, exc)
                return
            self._conn.send_success(cmd.request_id)

        self._state.spawn(run())

    def set_writable(self, writable: bool) -> None:
        """The connection's send buffer went over its high water mark (False) or back under
        its low one (True): its consumers get nothing more until it drains (their permits
        stay), as Pulsar's dispatchers hold back a consumer whose channel is not writable."""
        self.writable = writable
        for consumer in list(self.consumers.values()):
            consumer.set_writable(writable)

    async def close(self) -> None:
        """The connection is gone: release the consumers' unacked messages."""
        consumers = list(self.consumers.values())
        self.consumers.clear()
        for consumer in consumers:
            try:
                await consumer.close()
            except GatewayError as exc:
                log.warning("releasing consumer %s failed: %s", consumer.uid, exc)
