"""WebSocket consumers, readers and multi-topic consumers over the core's consumers.

Theory of operation. Pulsar's WebSocket service runs a Java client per session: that
client's consumer prefetches up to ``receiverQueueSize`` messages per topic partition, and
the handler pushes messages to the socket while fewer than ``receiverQueueSize`` pushed
messages are unacknowledged (``ConsumerHandler.receiveMessage``, ``pendingMessages``); each
ack or negative ack frees one place. In pull mode (``pullMode=true``) only ``permit``
commands free places. This module keeps that model with the core in place of the client:

* one :class:`_PartitionSink` (a :class:`~pulsar_gateway.core.consuming.consumer.ConsumerSink`)
  per topic partition holds a core consumer with ``receiverQueueSize`` permits (at least
  1), its prefetch;
* deliveries are decompressed and unbatched (:func:`pulsar_gateway.entry_codec.unpack_entry`)
  into one queue; a pump task pushes from it while the client's window allows, and each pushed
  message returns a permit to its partition's consumer (in halves of the prefetch, as the
  Java client's flow control does), so the prefetch refills as the client keeps up;
* pushed, unacknowledged messages are remembered in push order with their ack deadline
  (``ackTimeoutMillis``): a tick gives expired ones back to the subscription and frees
  their places, so an ack timeout never stalls the window; a negative ack frees the place
  at once and redelivers after ``negativeAckRedeliveryDelay``. Both go through the core's
  redelivery rule (:func:`~pulsar_gateway.core.consuming.consumer.redeliver_unacknowledged`,
  the binary protocol's too): the ids count on Shared and Key_Shared subscriptions; on
  Exclusive and Failover every unacknowledged message of the partition's consumer comes
  again, in order, and the session forgets the copies it holds of them (pushed or queued),
  as the Java client behind Pulsar's WebSocket service clears its receiver queue.

A consumer or reader answers ``isEndOfTopic`` with ``{"endOfTopic": true}`` once every
partition's topic was terminated, the core told the partition's consumer it was sent
everything (``ConsumerSink.reached_end_of_topic``, Pulsar's REACHED_END_OF_TOPIC, which
sets the Java client's ``hasReachedEndOfTopic``) and nothing of it waits to be pushed.

Dead letters happen in the gateway: a delivery whose redelivery count (kept in Redis by the
core, so a consumer that died holding the message still counted) exceeds
``maxRedeliverCount`` is not pushed; its messages are published to the dead-letter topic
(``deadLetterTopic``, default ``<topic>-<subscription>-DLQ``) with the Java client's
properties ``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID`` (``ConsumerImpl``,
``RetryMessageUtil``), key, ordering key and event time kept, and the original is
acknowledged on the subscription. The client sees a message ``maxRedeliverCount + 1``
times at most, as with the Java client. Redelivery counts exist on Shared and Key_Shared
subscriptions only (Pulsar's broker counts nowhere else), so dead-lettering does too.

Readers use a non-durable Exclusive subscription starting *after* ``messageId`` (the
Java reader's default); entries are acknowledged on arrival, as ``ReaderImpl`` does, and
the client's acks are flow control only (``ReaderHandler``: any command but
``isEndOfTopic`` frees one place).

A multi-topic consumer (``/ws/v3``) is the same over several topics; with
``topicsPattern`` the namespace's topic list is read again every
:data:`PATTERN_REFRESH_SECONDS` and matching topics are subscribed as they appear, like
the Java client's pattern auto-discovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import math
import secrets
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pulsar_gateway.adapters.websocket import frames
from pulsar_gateway.adapters.websocket.params import (
    MAX_RECEIVER_QUEUE_SIZE,
    ConsumerParams,
    MultiTopicParams,
    ProducerParams,
    ReaderParams,
    topics_regex,
)
from pulsar_gateway.adapters.websocket.producer import TopicProducer, dead_letter_producer_name
from pulsar_gateway.adapters.websocket.session import Session
from pulsar_gateway.core import (
    ConsumerHandle,
    Delivery,
    GatewayError,
    MessageId,
    NotAllowed,
    ProducerHandle,
    Services,
    SubscriptionType,
    TopicName,
    decode_ack_set,
    parse_topic_name,
    previous_stream_id,
    redeliver_unacknowledged,
)
from pulsar_gateway.entry_codec import (
    MessageFormatError,
    OutgoingMessage,
    ReceivedMessage,
    encode_message_id,
    unpack_entry,
)

__all__ = ["PATTERN_REFRESH_SECONDS", "ConsumerEndpoint", "Mode"]

log = logging.getLogger(__name__)

#: How often a ``topicsPattern`` consumer looks for new topics (the Java client's
#: ``patternAutoDiscoveryPeriod`` is a minute; a second costs one SMEMBERS).
PATTERN_REFRESH_SECONDS = 1.0
#: Longest pause between ack-timeout checks (the Java client's ``ackTimeoutTickTime``).
ACK_TIMEOUT_TICK_SECONDS = 1.0
#: Pushed messages written to the socket at once (one system call), at most: the first of
#: a large prefetch is not held back until the last is encoded.
_FRAMES_PER_WRITE = 64
#: Payload bytes waiting to be pushed at which the session's consumers get nothing more
#: from the core (their permits stay), and below which they get messages again: a client
#: that reads slowly holds back its own deliveries, not the gateway's memory.
QUEUE_HIGH_BYTES = 1024 * 1024
QUEUE_LOW_BYTES = QUEUE_HIGH_BYTES // 2
#: Java client ``RetryMessageUtil`` property names of a dead letter.
REAL_TOPIC = "REAL_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"

_SHARED_TYPES = (SubscriptionType.SHARED, SubscriptionType.KEY_SHARED)


class Mode(enum.Enum):
    CONSUMER = "consumer"
    READER = "reader"
    MULTI_TOPIC = "multi-topic consumer"


def java_message_id(message_id: MessageId) -> str:
    """``MessageIdImpl.toString`` / ``BatchMessageIdImpl.toString``: what the Java client
    writes into ``ORIGIN_MESSAGE_ID``."""
    text = f"{message_id.ledger_id}:{message_id.entry_id}:{message_id.partition}"
    if message_id.batch_index >= 0:
        text += f":{message_id.batch_index}"
    return text


def _unacked_bits(batch_size: int, acked: range) -> tuple[int, ...]:
    """Ack-set words of a batch of ``batch_size`` where the indexes in ``acked`` are
    acknowledged (bit set = still unacknowledged)."""
    bits = "".join("0" if i in acked else "1" for i in range(batch_size))
    return decode_ack_set(bits) or (0,)


@dataclass(eq=False)
class _PartitionSink:
    """The sink of one topic partition's core consumer."""

    endpoint: ConsumerEndpoint
    topic: TopicName
    #: the topic the client named (a partitioned topic's base name)
    base: TopicName
    consumer: ConsumerHandle | None = None
    #: permits taken by messages that left the queue, not yet given back
    to_return: int = 0
    from_pattern: bool = False
    #: the core said the consumer was sent all of its terminated topic
    reached_end: bool = False
    #: the topic's full name and partition index, read once (both are used per message)
    key: str = field(init=False)
    partition: int = field(init=False)

    def __post_init__(self) -> None:
        self.key = str(self.topic)
        self.partition = self.topic.partition_index

    # ConsumerSink
    def deliver(self, consumer: ConsumerHandle, deliveries: list[Delivery]) -> None:
        self.endpoint.on_deliveries(self, consumer, deliveries)

    def closed_by_gateway(self, consumer: ConsumerHandle) -> None:
        self.endpoint.on_closed_by_gateway(self, consumer)

    def reached_end_of_topic(self, consumer: ConsumerHandle) -> None:
        # Pulsar's WebSocket consumer pushes nothing for it: a client asks with the
        # isEndOfTopic request (ConsumerHandler.handleEndOfTopic)
        if consumer is self.consumer:
            self.reached_end = True

    def active_changed(self, consumer: ConsumerHandle, active: bool) -> None:
        pass


#: A pushed message's place in the window: topic, ledger, entry, batch index.
_PushedKey = tuple[str, int, int, int]


@dataclass(slots=True)
class _Pushed:
    """A message pushed to the client and not yet acknowledged, with the ``messageId``
    text it was pushed with."""

    handle: _PartitionSink
    message_id: MessageId
    batch_size: int
    deadline: float
    key: _PushedKey
    text: str


@dataclass
class _Window:
    """How many pushed messages the client may hold (``receiverQueueSize``), or in pull
    mode the permits it granted.

    ``pushed`` is in push (hence deadline) order. ``by_text`` finds a pushed message by
    the ``messageId`` text it was pushed with, as clients send it back in their acks, so
    an ack needs no decoding; kept only while those texts are unique (one topic: the
    partition index tells partitions apart, not topics).
    """

    size: int
    pull: bool = False
    credit: int = 0
    reader_pending: int = 0
    pushed: dict[_PushedKey, _Pushed] = field(default_factory=dict)
    by_text: dict[str, _Pushed] | None = field(default_factory=dict)

    def add(self, item: _Pushed) -> None:
        """Remember a pushed message (again: a redelivered one moves to the end)."""
        self.remove(item.key)
        self.pushed[item.key] = item
        if self.by_text is not None:
            self.by_text[item.text] = item

    def remove(self, key: _PushedKey) -> _Pushed | None:
        item = self.pushed.pop(key, None)
        if item is not None and self.by_text is not None:
            self.by_text.pop(item.text, None)
        return item


class ConsumerEndpoint:
    """One WebSocket consumer, reader or multi-topic consumer session."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.session: Session | None = None
        self.mode = Mode.CONSUMER
        self.params = ConsumerParams()
        self.subscription = ""
        self.consumer_name = secrets.token_hex(3)[:5]
        self.handles: dict[str, _PartitionSink] = {}
        self.queue: deque[tuple[_PartitionSink, ReceivedMessage]] = deque()
        self.window = _Window(size=1)
        self.prefetch = 1
        self._reader_start: MessageId | None = None
        self._multi: MultiTopicParams | None = None
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._dead_letters: dict[str, asyncio.Future[TopicProducer]] = {}
        #: acks of this loop tick, sent together at its end (:meth:`_queue_ack`)
        self._acks: dict[ConsumerHandle, list[bytes]] = {}
        #: payload bytes in ``queue``, and whether the core may deliver more
        self._queued_bytes = 0
        self._writable = True
        self.closed = False

    # -- opening (before the upgrade) -----------------------------------------------------

    def _configure(self, params: ConsumerParams, subscription: str) -> None:
        self.params = params
        self.subscription = subscription
        self.consumer_name = params.consumer_name or self.consumer_name
        # receiverQueueSize 0 still lets one message through (maxPendingMessages = 1).
        self.prefetch = min(max(params.receiver_queue_size, 1), MAX_RECEIVER_QUEUE_SIZE)
        self.window = _Window(size=self.prefetch, pull=params.pull_mode)
        if self.mode is Mode.MULTI_TOPIC:
            self.window.by_text = None  # two topics can push the same id text

    async def open_consumer(
        self, topics: list[TopicName], subscription: str, params: ConsumerParams
    ) -> None:
        """Subscribe to ``topics`` (every partition of a partitioned one).

        Raises:
            GatewayError: from ``SubscriptionService.subscribe`` (ConsumerBusy, NotAllowed, ...).
        """
        self._configure(params, subscription)
        for topic in topics:
            await self._attach_topic(topic)

    async def open_multi_topic(self, multi: MultiTopicParams, subscription: str) -> None:
        self.mode = Mode.MULTI_TOPIC
        self._multi = multi
        await self.open_consumer(list(multi.topics), subscription, multi.consumer)
        if multi.pattern is not None:
            await self._discover()

    async def open_reader(self, topic: TopicName, params: ReaderParams) -> None:
        self.mode = Mode.READER
        self._reader_start = params.start
        consumer_params = ConsumerParams(
            subscription_type=SubscriptionType.EXCLUSIVE,
            durable=False,
            receiver_queue_size=params.receiver_queue_size,
            consumer_name=params.reader_name,
        )
        # ReaderImpl names its non-durable subscription "reader-<random>".
        self._configure(consumer_params, f"reader-{secrets.token_hex(5)}")
        await self._attach_topic(topic)

    async def _attach_topic(self, topic: TopicName, from_pattern: bool = False) -> None:
        partitions = await self.services.topics.client_partitions(topic)
        names = [topic.partition(i) for i in range(partitions)] if partitions else [topic]
        for name in names:
            await self._attach(name, topic, from_pattern)

    async def _attach(self, name: TopicName, base: TopicName, from_pattern: bool) -> None:
        if str(name) in self.handles:
            return
        handle = _PartitionSink(self, name, base, from_pattern=from_pattern)
        params = self.params
        reader = self.mode is Mode.READER
        handle.consumer = await self.services.subscriptions.subscribe(
            name,
            self.subscription,
            params.subscription_type,
            self.consumer_name,
            handle,
            initial_position=params.initial_position,
            durable=params.durable,
            start_message_id=self._reader_start if reader else None,
            priority_level=params.priority_level,
        )
        self.handles[handle.key] = handle
        if not self._writable:
            handle.consumer.set_writable(False)
        if self.session is not None:
            handle.consumer.flow(self.prefetch)

    # -- running (after the upgrade) ------------------------------------------------------

    def start(self, session: Session) -> None:
        """Begin pushing: grant the prefetch and start the pump and timers."""
        self.session = session
        self._spawn(self._pump())
        if self.params.ack_timeout_ms > 0:
            self._spawn(self._ack_timeouts())
        if self._multi is not None and self._multi.pattern is not None:
            self._spawn(self._rediscover())
        for handle in list(self.handles.values()):
            if handle.consumer is not None:
                handle.consumer.flow(self.prefetch)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("WebSocket consumer task failed", exc_info=task.exception())

    # -- deliveries -----------------------------------------------------------------------

    def on_deliveries(
        self, handle: _PartitionSink, consumer: ConsumerHandle, deliveries: list[Delivery]
    ) -> None:
        """The core handed ``handle``'s consumer entries (permits already taken)."""
        if self.closed or handle.consumer is not consumer:
            return
        reader = self.mode is Mode.READER
        for delivery in deliveries:
            try:
                messages = unpack_entry(
                    delivery.stream_id,
                    delivery.blob,
                    partition=handle.partition,
                    ack_set=delivery.ack_set,
                    redelivery_count=delivery.redelivery_count,
                )
            except MessageFormatError as exc:
                # Unreadable for one-message surfaces: skip it rather than loop on it.
                log.warning("entry %s of %s skipped: %s", delivery.stream_id, handle.key, exc)
                consumer.ack([delivery.stream_id])
                self._give_back(handle, delivery.num_messages)
                continue
            if reader:
                messages = [m for m in messages if self._after_start(m)]
            elif self._is_dead_letter(consumer, delivery):
                self._spawn(self._dead_letter(handle, consumer, delivery, messages))
                messages = []
            spare = delivery.num_messages - len(messages)
            if spare > 0:
                self._give_back(handle, spare)
            self.queue.extend((handle, m) for m in messages)
            self._queued_bytes += sum(len(m.payload) for m in messages)
        if self._writable and self._queued_bytes >= QUEUE_HIGH_BYTES:
            self._set_writable(False)
        if reader:
            # ReaderImpl acknowledges as it reads: the subscription is non-durable and a
            # reconnecting reader names its start again.
            consumer.ack([d.stream_id for d in deliveries])
        self._wake.set()

    def _after_start(self, message: ReceivedMessage) -> bool:
        """A reader starts after its start id (not inclusive); the core starts at it."""
        start = self._reader_start
        if start is None or start.is_earliest or start.ledger_id < 0:
            return True
        mid = message.message_id
        if (mid.ledger_id, mid.entry_id) != (start.ledger_id, start.entry_id):
            return (mid.ledger_id, mid.entry_id) > (start.ledger_id, start.entry_id)
        return start.batch_index >= 0 and mid.batch_index > start.batch_index

    def _set_writable(self, writable: bool) -> None:
        """Let the core deliver to this session's consumers, or hold them back while the
        queue of messages to push is over QUEUE_HIGH_BYTES (until it is under
        QUEUE_LOW_BYTES): the queue drains only as fast as the client reads."""
        self._writable = writable
        for handle in list(self.handles.values()):
            if handle.consumer is not None:
                handle.consumer.set_writable(writable)

    def _give_back(self, handle: _PartitionSink, permits: int) -> None:
        """Return permits to ``handle``'s consumer, in halves of the prefetch."""
        handle.to_return += permits
        if handle.to_return >= max(1, self.prefetch // 2) and handle.consumer is not None:
            handle.consumer.flow(handle.to_return)
            handle.to_return = 0

    def _can_push(self) -> bool:
        window = self.window
        if window.pull:
            return window.credit > 0
        if self.mode is Mode.READER:
            return window.reader_pending < window.size
        return len(window.pushed) < window.size

    async def _pump(self) -> None:
        session = self.session
        assert session is not None
        loop = asyncio.get_running_loop()
        timeout_s = self.params.ack_timeout_ms / 1000 if self.params.ack_timeout_ms else math.inf
        window = self.window
        reader = self.mode is Mode.READER
        while True:
            await self._wake.wait()
            self._wake.clear()
            texts: list[str] = []
            while self.queue and self._can_push():
                handle, message = self.queue.popleft()
                self._queued_bytes -= len(message.payload)
                if not self._writable and self._queued_bytes <= QUEUE_LOW_BYTES:
                    self._set_writable(True)
                consumer = handle.consumer
                if consumer is None or consumer.closed:
                    continue
                self._give_back(handle, 1)
                mid = message.message_id
                id_text = encode_message_id(mid, message.batch_size)
                if window.pull:
                    window.credit -= 1
                if reader:
                    window.reader_pending += 1
                else:
                    key = (handle.key, mid.ledger_id, mid.entry_id, mid.batch_index)
                    deadline = loop.time() + timeout_s
                    window.add(_Pushed(handle, mid, message.batch_size, deadline, key, id_text))
                texts.append(frames.consumer_message(message, id_text))
                if len(texts) == _FRAMES_PER_WRITE:
                    if not await session.send_many(texts):
                        return
                    texts = []
            if texts and not await session.send_many(texts):
                return

    # -- ack timeout and negative acks ----------------------------------------------------

    async def _ack_timeouts(self) -> None:
        """Give back pushed messages whose ack timeout passed, freeing their places."""
        loop = asyncio.get_running_loop()
        tick = min(ACK_TIMEOUT_TICK_SECONDS, self.params.ack_timeout_ms / 2000)
        pushed = self.window.pushed
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            expired: dict[_PartitionSink, set[bytes]] = {}
            for key, item in list(pushed.items()):
                if item.deadline > now:
                    break  # push order is deadline order
                self.window.remove(key)
                expired.setdefault(item.handle, set()).add(item.message_id.stream_id)
            for handle, ids in expired.items():
                self._redeliver(handle, sorted(ids))
            if expired:
                self._wake.set()

    def _redeliver(self, handle: _PartitionSink, ids: list[bytes]) -> None:
        consumer = handle.consumer
        if consumer is None or consumer.closed or self.closed:
            return
        if redeliver_unacknowledged(consumer, ids):
            self._forget_held(handle)

    def _forget_held(self, handle: _PartitionSink) -> None:
        """Everything ``handle``'s consumer held goes out again (Exclusive, Failover): drop
        the session's copies, pushed (their places are free) and queued (their permits go
        back, as the Java client's ``redeliverUnacknowledgedMessages`` clears its receiver
        queue and adds its size to the permits), so each message is pushed once more, in
        order."""
        for key, item in list(self.window.pushed.items()):
            if item.handle is handle:
                self.window.remove(key)
        kept = [queued for queued in self.queue if queued[0] is not handle]
        dropped = len(self.queue) - len(kept)
        if dropped:
            self._queued_bytes -= sum(
                len(message.payload) for owner, message in self.queue if owner is handle
            )
            self.queue.clear()
            self.queue.extend(kept)
            self._give_back(handle, dropped)
        if not self._writable and self._queued_bytes <= QUEUE_LOW_BYTES:
            self._set_writable(True)
        self._wake.set()

    def _redeliver_later(self, handle: _PartitionSink, ids: list[bytes]) -> None:
        delay = self.params.negative_ack_delay_ms / 1000
        if delay <= 0:
            self._redeliver(handle, ids)
            return
        timer: asyncio.TimerHandle | None = None

        def fire() -> None:
            if timer is not None:
                self._timers.discard(timer)
            self._redeliver(handle, ids)

        timer = asyncio.get_running_loop().call_later(delay, fire)
        self._timers.add(timer)

    # -- dead letters -----------------------------------------------------------------------

    def _is_dead_letter(self, consumer: ConsumerHandle, delivery: Delivery) -> bool:
        limit = self.params.max_redeliver_count
        return (
            limit is not None
            and consumer.reports_redelivery_count
            and delivery.redelivery_count > limit
        )

    def _dead_letter_topic(self, handle: _PartitionSink) -> TopicName:
        if self.params.dead_letter_topic is not None:
            return self.params.dead_letter_topic
        # ConsumerHandler: String.format("%s-%s-DLQ", topic, subscription)
        return parse_topic_name(f"{handle.base}-{self.subscription}-DLQ")

    def _dead_letter_producer(self, handle: _PartitionSink) -> asyncio.Future[TopicProducer]:
        topic = self._dead_letter_topic(handle)
        fut = self._dead_letters.get(str(topic))
        if fut is None or (fut.done() and fut.exception() is not None):
            name = dead_letter_producer_name(
                str(handle.base), self.subscription, self.consumer_name
            )
            fut = asyncio.ensure_future(
                TopicProducer.create(self.services, topic, ProducerParams(producer_name=name))
            )
            fut.add_done_callback(partial(self._watch_dead_letter, str(topic)))
            self._dead_letters[str(topic)] = fut
        return fut

    def _watch_dead_letter(self, key: str, fut: asyncio.Future[TopicProducer]) -> None:
        """Once a dead-letter producer is open: when the gateway closes it (fenced, or its
        topic over a backlog quota), forget it, so the next dead letter opens it again and
        meets the topic's rules, as the client's dead-letter producer would reconnect."""
        if fut.cancelled() or fut.exception() is not None:
            return
        producer = fut.result()

        def lost(_: ProducerHandle) -> None:
            if self._dead_letters.get(key) is fut:
                del self._dead_letters[key]
                self._spawn(producer.close())

        for handle in producer.producers:
            handle.on_lost = lost

    async def _dead_letter(
        self,
        handle: _PartitionSink,
        consumer: ConsumerHandle,
        delivery: Delivery,
        messages: list[ReceivedMessage],
    ) -> None:
        """Publish ``messages`` to the dead-letter topic, then acknowledge the entry."""
        try:
            producer = await self._dead_letter_producer(handle)
            appends = []
            for message in messages:
                properties = dict(message.properties)
                properties.setdefault(REAL_TOPIC, handle.key)
                properties.setdefault(ORIGIN_MESSAGE_ID, java_message_id(message.message_id))
                dead = OutgoingMessage(
                    payload=message.payload,
                    key=message.key,
                    properties=properties,
                    event_time=message.event_time,
                    ordering_key=message.ordering_key,
                )
                appends.append(producer.send(dead)[1])
            await asyncio.gather(*appends)
        except GatewayError as exc:
            log.warning("dead-lettering %s of %s failed: %s", delivery.stream_id, handle.key, exc)
            if not consumer.closed:
                consumer.redeliver([delivery.stream_id])
            return
        if not consumer.closed:
            # Every unacknowledged message of the entry was in ``messages``.
            consumer.ack([delivery.stream_id])

    # -- commands -------------------------------------------------------------------------

    async def on_text(self, text: str) -> None:
        session = self.session
        assert session is not None
        try:
            obj = frames.read_command(text)
            pushed = self._acked_pushed(obj)
            if pushed is None:
                command = frames.consumer_command(obj)
        except frames.FrameError as exc:
            session.count_error("FailedToDeserializeFromJSON")
            await session.send(frames.command_error(exc.code, str(exc)))
            return
        if pushed is not None:
            # the common command: an ack of a pushed message, its id text as pushed
            session.count_command("ack")
            self.window.remove(pushed.key)
            self._wake.set()
            consumer = pushed.handle.consumer
            assert consumer is not None
            self._ack_message(consumer, pushed.message_id, pushed.batch_size, pushed.text)
            return
        session.count_command(command.type)
        if command.type == "isEndOfTopic":
            await session.send(frames.end_of_topic(self._reached_end_of_topic()))
            return
        if self.mode is Mode.READER:
            # ReaderHandler: anything else is an ack, i.e. flow control only.
            if self.window.reader_pending > 0:
                self.window.reader_pending -= 1
                self._wake.set()
            return
        if command.type == "permit":
            if self.window.pull:
                self.window.credit += command.permits
                self._wake.set()
            return
        if command.type == "unsubscribe":
            await self._unsubscribe()
            return
        target = command.target
        assert target is not None
        handle = self._resolve(target.message_id)
        if handle is None or handle.consumer is None:
            await self._error(
                f"Message id {target.text[:100]} is not from this consumer's topics", target
            )
            return
        try:
            if command.type == "ack":
                self._ack(handle, target)
            elif command.type == "negativeAcknowledge":
                self._negative_ack(handle, target)
            else:
                self._ack_cumulative(handle, target)
        except (GatewayError, ValueError) as failure:
            session.count_error(type(failure).__name__)
            await session.send(
                frames.command_error(frames.UNKNOWN_ERROR, str(failure), target.text)
            )

    def _reached_end_of_topic(self) -> bool:
        """``consumer.hasReachedEndOfTopic()`` (every partition's, as
        ``MultiTopicsConsumerImpl`` asks), once nothing of them waits to be pushed."""
        handles = self.handles.values()
        return bool(handles) and all(h.reached_end for h in handles) and not self.queue

    async def _error(self, message: str, target: frames.AckTarget | None = None) -> None:
        assert self.session is not None
        self.session.count_error("InvalidMessageId")
        await self.session.send(
            frames.command_error(
                frames.FAILED_TO_DESERIALIZE, message, target.text if target else None
            )
        )

    def _resolve(self, mid: MessageId) -> _PartitionSink | None:
        """The partition consumer a client's message id belongs to."""
        candidates = [h for h in self.handles.values() if h.partition == mid.partition]
        if len(candidates) > 1:
            # Several topics (v3): the one that pushed this id and awaits its ack.
            pushed = self.window.pushed
            for handle in candidates:
                if (handle.key, mid.ledger_id, mid.entry_id, mid.batch_index) in pushed:
                    return handle
            return None
        if candidates:
            return candidates[0]
        if len(self.handles) == 1 and self.mode is Mode.CONSUMER:
            return next(iter(self.handles.values()))
        return None

    def _acked_pushed(self, obj: dict[str, Any]) -> _Pushed | None:
        """The pushed message a plain ack command names by the very text it was pushed
        with, if that is what ``obj`` is; None for anything else (read the long way)."""
        by_text = self.window.by_text
        kind = obj.get("type")
        if by_text is None or self.mode is not Mode.CONSUMER or (kind and kind != "ack"):
            return None
        text = obj.get("messageId")
        pushed = by_text.get(text) if isinstance(text, str) else None
        if pushed is None or pushed.handle.consumer is None:
            return None
        return pushed

    def _take(self, handle: _PartitionSink, mid: MessageId) -> _Pushed | None:
        """Forget a pushed message (acked or nacked): its place in the window is free."""
        item = self.window.remove((handle.key, mid.ledger_id, mid.entry_id, mid.batch_index))
        if item is not None:
            self._wake.set()
        return item

    def _ack(self, handle: _PartitionSink, target: frames.AckTarget) -> None:
        consumer = handle.consumer
        assert consumer is not None
        mid = target.message_id
        item = self._take(handle, mid)
        batch_size = target.batch_size or (item.batch_size if item else 0)
        self._ack_message(consumer, mid, batch_size, target.text)

    def _ack_message(
        self, consumer: ConsumerHandle, mid: MessageId, batch_size: int, text: str
    ) -> None:
        sid = mid.stream_id
        if mid.batch_index >= 0 and batch_size > 1:
            # One message of a batch: the core's batch-index ack; the entry is acked once
            # every index is.
            acked = range(mid.batch_index, mid.batch_index + 1)
            consumer.ack_batch_indexes([(sid, _unacked_bits(batch_size, acked))])
        elif mid.batch_index >= 0 and batch_size == 0:
            raise ValueError(f"Message id {text[:100]} has a batch index but no batch size")
        else:
            self._queue_ack(consumer, sid)

    def _queue_ack(self, consumer: ConsumerHandle, sid: bytes) -> None:
        """Acknowledge an entry with the others acked in this loop tick: one ``XACK`` of
        many ids instead of one each (a client of this API acks message by message)."""
        ids = self._acks.get(consumer)
        if ids is not None:
            ids.append(sid)
            return
        self._acks[consumer] = [sid]
        if len(self._acks) == 1:
            asyncio.get_running_loop().call_soon(self._send_acks)

    def _send_acks(self) -> None:
        acks, self._acks = self._acks, {}
        for consumer, ids in acks.items():
            consumer.ack(ids)

    def _negative_ack(self, handle: _PartitionSink, target: frames.AckTarget) -> None:
        mid = target.message_id
        self._take(handle, mid)
        self._redeliver_later(handle, [mid.stream_id])

    def _ack_cumulative(self, handle: _PartitionSink, target: frames.AckTarget) -> None:
        """Everything of ``handle``'s partition up to and including the id (beyond
        Pulsar's WebSocket API; Exclusive and Failover only, as in Pulsar)."""
        consumer = handle.consumer
        assert consumer is not None
        mid = target.message_id
        item = self.window.pushed.get((handle.key, mid.ledger_id, mid.entry_id, mid.batch_index))
        batch_size = target.batch_size or (item.batch_size if item else 0)
        sid = mid.stream_id
        sub_type = consumer.subscription_type
        if sub_type in _SHARED_TYPES:
            # Pulsar's refusal (Consumer.messageAcked), also on non-persistent topics
            raise NotAllowed(
                f"Cumulative ack is not supported for {sub_type.name.title()} subscription"
            )
        if 0 <= mid.batch_index < batch_size - 1:
            before = previous_stream_id(mid.ledger_id, mid.entry_id)
            if before is not None:
                consumer.ack_cumulative(before)
            acked = range(mid.batch_index + 1)
            consumer.ack_batch_indexes([(sid, _unacked_bits(batch_size, acked))])
        else:
            consumer.ack_cumulative(sid)
        upto = (mid.ledger_id, mid.entry_id, mid.batch_index if mid.batch_index >= 0 else 1 << 62)
        for key, pushed in list(self.window.pushed.items()):
            pid = pushed.message_id
            if pushed.handle is handle and (pid.ledger_id, pid.entry_id, pid.batch_index) <= upto:
                self.window.remove(key)
        self._wake.set()

    async def _unsubscribe(self) -> None:
        assert self.session is not None
        self._send_acks()
        try:
            for handle in list(self.handles.values()):
                if handle.consumer is not None:
                    await handle.consumer.unsubscribe()
        except GatewayError as exc:
            self.session.count_error(type(exc).__name__)
            await self.session.send(frames.command_error(frames.UNKNOWN_ERROR, str(exc)))
            return
        self.handles.clear()
        # The subscription is gone; nothing is left to serve on this session.
        await self.session.close(1000, "Subscription deleted")

    # -- topic discovery (topicsPattern) --------------------------------------------------

    async def _discover(self) -> None:
        """Subscribe to the pattern's topics not subscribed yet; drop deleted ones."""
        multi = self._multi
        assert multi is not None and multi.pattern is not None
        assert multi.pattern_namespace is not None
        regex = topics_regex(multi.pattern)
        names = await self.services.topics.topics(multi.pattern_namespace, multi.pattern_domain)
        listed: set[str] = set()
        for text in names:
            name = parse_topic_name(text)
            base = name.partitioned_topic_name
            if regex.fullmatch(str(base)):
                listed.add(text)
                if text not in self.handles:
                    await self._attach(name, base, from_pattern=True)
        for key, handle in list(self.handles.items()):
            if handle.from_pattern and key not in listed:
                del self.handles[key]
                if handle.consumer is not None:
                    with contextlib.suppress(GatewayError):
                        await handle.consumer.close()

    async def _rediscover(self) -> None:
        while True:
            await asyncio.sleep(PATTERN_REFRESH_SECONDS)
            try:
                await self._discover()
            except GatewayError as exc:
                log.warning("topic discovery for %s failed: %s", self.subscription, exc)

    # -- closing --------------------------------------------------------------------------

    def on_closed_by_gateway(self, handle: _PartitionSink, consumer: ConsumerHandle) -> None:
        """The core closed a consumer (lease lost, seek, topic deleted): end the session
        so the client reconnects and subscribes again."""
        if handle.consumer is not consumer or self.closed:
            return
        handle.consumer = None
        self.handles.pop(handle.key, None)
        if self.session is not None:
            self.session.close_soon(1011, "Consumer closed by the gateway; reconnect")

    async def close(self) -> None:
        """Close every consumer (their unacked messages go back to the subscription),
        timer and dead-letter producer."""
        if self.closed:
            return
        self.closed = True
        self._send_acks()  # before the consumers close: what was acked stays acked
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, GatewayError):
                await task
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        self.queue.clear()
        for handle in list(self.handles.values()):
            consumer, handle.consumer = handle.consumer, None
            if consumer is not None:
                try:
                    await consumer.close()
                except GatewayError as exc:
                    log.warning("releasing consumer %s failed: %s", consumer.uid, exc)
        self.handles.clear()
        for fut in self._dead_letters.values():
            if not fut.done():
                fut.cancel()
            with contextlib.suppress(asyncio.CancelledError, GatewayError):
                producer = await fut
                await producer.close()
