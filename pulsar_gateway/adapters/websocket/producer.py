"""The WebSocket producer: ``/ws/v2/producer/{domain}/{tenant}/{namespace}/{topic}``.

Each text frame is one ``ProducerMessage`` (:mod:`pulsar_gateway.adapters.websocket.frames`); the
gateway builds the stored entry a binary producer with the same settings would send
(:func:`pulsar_gateway.entry_codec.encode_entry`: ``MessageMetadata`` with producer name,
sequence id, publish time, key, properties, event time, delivery time, and the payload compressed
with ``compressionType``), appends it and answers a ``ProducerAck`` carrying the message id as
base64 ``MessageIdData``, the form official clients' ``MessageId.serialize()`` use.

Each frame is its own entry, never batched with others: Pulsar's WebSocket producer batches
inside its Java client only when ``batchingEnabled=true``, and there an ack waits for the
batch to be flushed; here the append is already a single pipelined Redis call, so an ack
is as quick as a batch flush would be and a message id never has a batch index. The batching
parameters are validated and otherwise have no effect.

Deduplication: the producer has a sequence id per message, as a Java producer does: the
message's ``sequenceId`` when given, else one more than the last (starting after
``initialSequenceId``, or after the topic's stored last sequence id of a named producer,
whichever is higher). With the topic's ``deduplication`` policy on, appends go through the
core's deduplication check (``ProducerHandle.append``) and a repeated sequence id is answered
``ok`` with message id ``(-1, -1)``, as Pulsar answers a duplicate.

On a partitioned topic the gateway creates one producer per partition and routes each
message (:mod:`pulsar_gateway.adapters.websocket.routing`); message ids carry the partition index.

A topic's ``publishRate``: each message takes its tokens from its partition's limiter on this
gateway, and once one is empty the session reads no frame until it holds tokens again, as
a binary connection is not read (:mod:`pulsar_gateway.core.policies.rate_limits`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from collections.abc import Sequence

from pulsar_gateway.adapters.websocket import frames
from pulsar_gateway.adapters.websocket.params import ProducerParams
from pulsar_gateway.adapters.websocket.routing import PartitionRouter
from pulsar_gateway.adapters.websocket.session import Session
from pulsar_gateway.core import (
    AppendOutcome,
    AppendStatus,
    DeliveryDelayNotAllowed,
    GatewayError,
    MessageId,
    MessageTooLarge,
    ProducerHandle,
    PublishThrottle,
    Services,
    TopicName,
)
from pulsar_gateway.entry_codec import (
    OutgoingMessage,
    encode_entry,
    encode_message_id,
    entry_to_append,
)

__all__ = ["ProducerSession", "TopicProducer"]

log = logging.getLogger(__name__)


class TopicProducer:
    """Producers on a topic's partitions (or on the topic itself), with routing and
    per-partition sequence ids. Also used by consumers to publish dead letters."""

    def __init__(
        self,
        services: Services,
        producers: Sequence[ProducerHandle],
        params: ProducerParams,
        router: PartitionRouter | None,
    ) -> None:
        self.services = services
        self.producers = list(producers)
        self.params = params
        self.router = router
        #: the producers' topic publish rates that pause this producer
        self.throttle = PublishThrottle()
        first = params.initial_sequence_id
        # ProducerImpl: the next id follows the higher of initialSequenceId and the
        # broker's last stored one (PRODUCER_SUCCESS.last_sequence_id).
        self._next_sequence = [max(first, p.last_sequence_id) + 1 for p in self.producers]

    @classmethod
    async def create(
        cls, services: Services, topic: TopicName, params: ProducerParams
    ) -> TopicProducer:
        """Attach to ``topic`` (each of its partitions when it is partitioned).

        Raises:
            GatewayError: as ``ProducerService.create`` (ProducerBusy, ...).
        """
        partitions = await services.topics.client_partitions(topic)
        names = [topic.partition(i) for i in range(partitions)] if partitions else [topic]
        producers: list[ProducerHandle] = []
        try:
            for name in names:
                producers.append(await services.producers.create(name, params.producer_name))
        except BaseException:
            for producer in producers:
                with contextlib.suppress(GatewayError):
                    await services.producers.close(producer)
            raise
        router = (
            PartitionRouter(partitions, params.routing_mode, params.hashing_scheme)
            if partitions
            else None
        )
        return cls(services, producers, params, router)

    def send(
        self, message: OutgoingMessage, sequence_id: int | None = None
    ) -> tuple[int, asyncio.Future[AppendOutcome]]:
        """Append one message; returns the partition index (-1 when not partitioned) and
        the append's future.

        Raises:
            DeliveryDelayNotAllowed: the topic's policy refuses the delivery time.
            MessageTooLarge: the entry exceeds the gateway's max message size.
        """
        index = self.router.choose(message.key) if self.router is not None else 0
        producer = self.producers[index]
        if sequence_id is None:
            sequence_id = self._next_sequence[index]
        self._next_sequence[index] = max(self._next_sequence[index], sequence_id + 1)
        publish_time = int(time.time() * 1000)
        blob = encode_entry(
            message, producer.name, sequence_id, publish_time, self.params.compression
        )
        limit = self.services.limits.max_message_size
        if len(blob) > limit:
            raise MessageTooLarge(f"Message size {len(blob)} exceeds the maximum of {limit} bytes")
        fut = producer.append(entry_to_append(message, blob, sequence_id, publish_time))
        rate = producer.publish_rate
        if rate.limited:  # the topic's publishRate (the session waits before its next frame)
            self.throttle.acquire(rate, 1, len(blob))
        return (index if self.router is not None else -1), fut

    async def close(self) -> None:
        for producer in self.producers:
            try:
                await self.services.producers.close(producer)
            except GatewayError as exc:
                log.warning("releasing producer %s failed: %s", producer.name, exc)


def dead_letter_producer_name(topic: str, subscription: str, consumer_name: str) -> str:
    """The Java client's dead-letter producer name (``ConsumerImpl``)."""
    return f"{topic}-{subscription}-{consumer_name}-{secrets.token_hex(3)[:5]}-DLQ"


class ProducerSession:
    """One WebSocket producer session.

    Frames are appended as they arrive (the appends pipeline to Redis); one writer task
    sends the acks in frame order as the appends complete, those ready together in one
    socket write. No frame is read while ``maxPendingMessages`` appends wait for their
    acks or the gateway's publish buffer is full, so a client that floods frames without
    reading its acks is held back by TCP, not buffered; nor while the topic's publish rate
    has paused the producer.
    """

    def __init__(self, session: Session, producer: TopicProducer) -> None:
        self.session = session
        self.producer = producer
        self._replies: deque[_Reply] = deque()
        self._queued = asyncio.Event()
        # Frames are not read while this many publishes wait for their answer, until half
        # are answered (the producer's maxPendingMessages, else the gateway's
        # maxPendingPublishRequestsPerConnection); nor while the publish buffer is full.
        services = session.services
        self._max_pending = (
            producer.params.max_pending_messages or services.limits.max_pending_publishes
        )
        self._room = asyncio.Event()
        self._room.set()
        self._publish_buffer = services.publish_buffer.gate
        self._fenced = False
        self._writer: asyncio.Task[None] | None = None
        for p in producer.producers:
            p.on_lost = self._lost

    def start(self) -> None:
        self._writer = asyncio.get_running_loop().create_task(self._write_replies())

    async def stop(self) -> None:
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        # appends whose acks were never written (the peer left): their outcome is nobody's
        # business now, but a failure must not be logged as never retrieved
        for reply in self._replies:
            if not isinstance(reply, str):
                reply[0].add_done_callback(_retrieve)
        self._replies.clear()

    def _lost(self, producer: ProducerHandle) -> None:
        # Fenced or superseded (e.g. its name was taken over after a lease loss): the
        # client must reconnect and learn its fate from the new upgrade's answer.
        self.session.close_soon(1011, "Producer closed by the gateway; reconnect")

    def _error(self, code: int, name: str, message: str, context: str | None) -> None:
        self.session.count_error(name)
        self._reply(frames.producer_error(code, message, context))

    def _reply(self, reply: _Reply) -> None:
        self._replies.append(reply)
        self._queued.set()

    async def on_text(self, text: str) -> None:
        if len(self._replies) >= self._max_pending:
            self._room.clear()
            await self._room.wait()
        if not self._publish_buffer.is_open:
            await self._publish_buffer.wait_open()
        if self.producer.throttle.throttled:
            await self.producer.throttle.wait()
        self.session.count_command("send")
        now = int(time.time() * 1000)
        try:
            request = frames.parse_producer_message(text, now)
        except frames.FrameError as exc:
            name = "FailedToDeserializeFromJSON" if exc.code == 3 else "PayloadEncodingError"
            self._error(exc.code, name, str(exc), exc.context)
            return
        message = request.message
        try:
            partition, fut = self.producer.send(message, request.sequence_id)
        except (DeliveryDelayNotAllowed, MessageTooLarge) as refused:
            # Pulsar answers a failed send with UnknownError and the exception's text.
            self._error(frames.UNKNOWN_ERROR, type(refused).__name__, str(refused), request.context)
            return
        self._reply((fut, partition, request.context))

    async def _write_replies(self) -> None:
        try:
            await self._write_replies_until_gone()
        finally:
            # the peer is gone (or the session ends): a frame handler waiting for room
            # must not wait forever
            self._room.set()

    async def _write_replies_until_gone(self) -> None:
        replies = self._replies
        while True:
            if not replies:
                self._queued.clear()
                await self._queued.wait()
                continue
            head = replies[0]
            if not isinstance(head, str) and not head[0].done():
                # a tick's appends complete together: one wake-up writes all their acks
                await asyncio.wait((head[0],))
            texts: list[str] = []
            while replies:
                head = replies[0]
                if isinstance(head, str):
                    texts.append(head)
                elif head[0].done():
                    texts.append(self._ack_text(*head))
                else:
                    break
                replies.popleft()
            if len(replies) <= self._max_pending // 2:
                self._room.set()
            if not await self.session.send_many(texts):
                return
            if self._fenced:
                self.session.close_soon(1011, "Producer fenced")
                return

    def _ack_text(
        self, fut: asyncio.Future[AppendOutcome], partition: int, context: str | None
    ) -> str:
        """The ``ProducerAck`` of a completed append."""
        if fut.cancelled():
            self.session.count_error("CancelledError")
            return frames.producer_error(frames.UNKNOWN_ERROR, "The append was cancelled", context)
        try:
            status, ledger_id, entry_id = fut.result()
        except GatewayError as exc:
            log.warning("WebSocket append failed: %s", exc)
            self.session.count_error(type(exc).__name__)
            return frames.producer_error(frames.UNKNOWN_ERROR, str(exc), context)
        if status is AppendStatus.REFUSED:
            self.session.count_error("ProducerFenced")
            self._fenced = True  # the session closes once this reply is written
            return frames.producer_error(
                frames.UNKNOWN_ERROR, "Producer was fenced by an exclusive producer", context
            )
        # a duplicate's outcome is (-1, -1): acknowledged so, as Pulsar's broker does
        message_id = MessageId(ledger_id, entry_id, partition)
        return frames.producer_ok(encode_message_id(message_id), context)


def _retrieve(fut: asyncio.Future[AppendOutcome]) -> None:
    if not fut.cancelled():
        fut.exception()


#: A queued reply: an error frame ready to send, or an append to wait for.
_Reply = str | tuple[asyncio.Future[AppendOutcome], int, str | None]
