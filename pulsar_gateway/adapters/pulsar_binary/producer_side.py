"""The producer side of a binary session: PRODUCER, SEND and CLOSE_PRODUCER (Pulsar's
``ServerCnx`` ``handleProducer``, ``handleSend``, ``handleCloseProducer``), with the
producers of the connection by ``producer_id`` (the client numbers them per connection).

SEND is the hot path and takes no task: each producer's answers (receipts, and the
refusals of its topic's policies) wait in a queue in send order, the client's requirement
(``ProducerImpl::ackReceived``), and are written from its head as the appends complete. A
Redis pipeline resolves its appends in order and in one go, so one callback answers a whole
pipeline's SENDs instead of one callback per message, and a SEND takes no future of its
own: it waits on its tick's (``ProducerHandle.append_to_tick``), at its index.

Reading the connection pauses (:class:`.throttle.Throttle`) while ``max_pending`` SENDs
wait for their answers (Pulsar's ``maxPendingPublishRequestsPerConnection``, resumed at
half), while the gateway's publish buffer is full, and while a topic's publish rate is
spent (``PublishRateLimiterImpl.handlePublishThrottling``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections import deque
from functools import partial
from typing import Any

from pulsar_gateway.adapters.pulsar_binary import commands as c
from pulsar_gateway.adapters.pulsar_binary.errors import server_error
from pulsar_gateway.adapters.pulsar_binary.session_state import SessionState
from pulsar_gateway.adapters.pulsar_binary.throttle import PendingLimit, ThrottleType
from pulsar_gateway.core import (
    AppendOutcome,
    AppendStatus,
    AuthorizationService,
    DeliveryDelayNotAllowed,
    EncryptionRequired,
    EntryToAppend,
    Gate,
    GatewayError,
    MessageTooLarge,
    NotAllowed,
    ProducerAccessMode,
    ProducerHandle,
    ProducerService,
    PublishThrottle,
    encode_version,
    to_record,
)
from pulsar_gateway.entry_codec import proto_field
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["CPP_CLIENT", "RECENTLY_CLOSED_SECONDS", "ProducerSide"]

log = logging.getLogger(__name__)

#: ``CommandConnect.client_version`` prefix of the C++ library and clients built on it.
CPP_CLIENT = "Pulsar-CPP"

#: How long SENDs for a producer the gateway closed are ignored rather than refused
#: (Pulsar ``ServerCnx.recentlyClosedProducers``, for ``keepAliveIntervalSeconds``: 30 by
#: default): they were in flight before the client read CLOSE_PRODUCER, and it sends them
#: again once its producer is back.
RECENTLY_CLOSED_SECONDS = 30.0

_new = tuple.__new__
_STORED = AppendStatus.STORED
_DUPLICATE = AppendStatus.DUPLICATE

#: -1 as a MessageIdData field: the receipt of a deduplicated SEND is (-1, -1).
_MINUS_ONE = (1 << 64) - 1

#: A SEND waiting for its answer: producer id, sequence id, and either its tick's appends'
#: future and its index among them, or the refusal of a policy.
_Answer = tuple[int, int, "asyncio.Future[list[AppendOutcome]] | None", int, "GatewayError | None"]


class ProducerSide:
    """Answers one connection's producer commands.

    Args:
        state: the session's connection side.
        authorization: may the role produce.
        producers: creates and releases producers.
        publish_buffer: the gate of the gateway's publish buffer (closed while it is full).
    """

    def __init__(
        self,
        state: SessionState,
        *,
        authorization: AuthorizationService,
        producers: ProducerService,
        publish_buffer: Gate,
    ) -> None:
        self._state = state
        self._conn = state.conn
        self._authorization = authorization
        self._producer_service = producers
        self._publish_buffer = publish_buffer
        self._throttle = state.throttle
        self._pending_publishes = PendingLimit(
            state.throttle, ThrottleType.PENDING_PUBLISHES, state.max_pending
        )
        #: the connection's producers by the client's producer id
        self.producers: dict[int, ProducerHandle] = {}
        #: producer id -> loop time the gateway closed it (CLOSE_PRODUCER)
        self._recently_closed: dict[int, float] = {}
        #: per producer, its SENDs not answered yet, in send order
        self._answers: dict[ProducerHandle, deque[_Answer]] = {}
        #: the producers' topic publish rates that paused the connection, and when to look
        #: at them again
        self._publish_throttle = PublishThrottle()
        self._rate_check: asyncio.TimerHandle | None = None

    # -- PRODUCER -------------------------------------------------------------------------

    def _send_producer_success(self, request_id: int, producer: ProducerHandle) -> None:
        version = producer.schema_version
        self._conn.send_producer_success(
            request_id,
            producer.name,
            producer.last_sequence_id,
            schema_version=None if version is None else encode_version(version),
            topic_epoch=producer.topic_epoch,
        )

    def producer(self, cmd: c.Producer) -> None:
        existing = self.producers.get(cmd.producer_id)
        if existing is not None:
            # A retried PRODUCER for an id we already serve is idempotent (a queued one is
            # answered when it gets the topic).
            if not existing.waiting:
                self._send_producer_success(cmd.request_id, existing)
            return
        self._state.spawn(self._attach(cmd))

    async def _attach(self, cmd: c.Producer) -> None:
        state = self._state
        refusal = await state.refusal(
            cmd.topic, self._authorization.can_produce, "Client is not authorized to Produce"
        )
        if refusal is not None:
            state.error(cmd.request_id, refusal)
            return
        service = self._producer_service
        try:
            producer = await service.create(
                cmd.topic,
                cmd.producer_name,
                access_mode=ProducerAccessMode(cmd.access_mode),
                epoch=cmd.epoch,
                user_provided_name=cmd.user_provided_name,
                topic_epoch=cmd.topic_epoch,
                schema=cmd.schema,
                encrypted=cmd.encrypted,
            )
        except GatewayError as exc:
            state.error(cmd.request_id, exc)
            return
        except ValueError as invalid:  # unknown access mode
            state.error(cmd.request_id, NotAllowed(str(invalid)))
            return
        if state.closed or cmd.producer_id in self.producers:
            await service.close(producer)
            return
        producer_id = producer.producer_id = cmd.producer_id
        producer.client = state.client_info()
        producer.on_lost = lambda p: self._producer_lost(producer_id, p)
        self.producers[producer_id] = producer
        if producer.waiting:
            # WaitForExclusive: "queued" now, the real answer when it gets the topic.
            self._conn.send_producer_success(cmd.request_id, producer.name, producer_ready=False)
            state.wants_flush()
            try:
                await producer.ready
            except GatewayError as exc:
                if self.producers.get(producer_id) is producer:
                    del self.producers[producer_id]
                    state.error(cmd.request_id, exc)
                return
            if state.closed or self.producers.get(producer_id) is not producer:
                return
        self._send_producer_success(cmd.request_id, producer)

    def _producer_lost(self, producer_id: int, producer: ProducerHandle) -> None:
        """The fleet closed this producer (fenced, superseded, lease lost, disconnected by
        a backlog quota): CLOSE_PRODUCER, so the client reconnects and learns its fate from
        the next PRODUCER."""
        if self.producers.get(producer_id) is producer:
            del self.producers[producer_id]
            if not self._state.closed:
                self._closed_by_gateway(producer_id)
                self._state.wants_flush()

    def _closed_by_gateway(self, producer_id: int) -> None:
        """CLOSE_PRODUCER for a producer already forgotten; its SENDs still in flight are
        ignored for a while (:data:`RECENTLY_CLOSED_SECONDS`)."""
        self._conn.send_close_producer(producer_id)
        now = asyncio.get_running_loop().time()
        self._recently_closed = {
            pid: at
            for pid, at in self._recently_closed.items()
            if now - at < RECENTLY_CLOSED_SECONDS
        }
        self._recently_closed[producer_id] = now

    def _closed_recently(self, producer_id: int) -> bool:
        at = self._recently_closed.get(producer_id)
        return at is not None and asyncio.get_running_loop().time() - at < RECENTLY_CLOSED_SECONDS

    # -- SEND -----------------------------------------------------------------------------

    def send(self, cmd: c.Send) -> None:
        producer = self.producers.get(cmd.producer_id)
        if producer is None and self._closed_recently(cmd.producer_id):
            return  # sent before the client read our CLOSE_PRODUCER: it sends it again
        if producer is None or producer.waiting:
            self._conn.send_send_error(
                cmd.producer_id,
                cmd.sequence_id,
                pb.NotAllowedError,
                f"Producer {cmd.producer_id} is not open on this connection",
            )
            return
        if not cmd.payload.checksum_ok:
            # The only per-message failure that keeps the connection
            # (``ClientConnection::handleSendError``).
            self._conn.send_send_error(
                cmd.producer_id, cmd.sequence_id, pb.ChecksumError, "Checksum mismatch"
            )
            return
        metadata = cmd.payload.metadata
        producer_id, sequence_id = cmd.producer_id, cmd.sequence_id
        if producer.encrypted and not metadata.encryption_keys:
            # Producer.checkAndStartPublish: an encrypting producer's message without keys
            refused = EncryptionRequired("Messages must be encrypted")
            self._queue_answer(producer, (producer_id, sequence_id, None, 0, refused))
            return
        # The entry to append (built here, not in a function of its own: once per SEND).
        # Its size comes from its metadata (what consumers will parse), not from
        # SEND.num_messages, which a client could set to anything. Deduplication records a
        # batch's highest sequence id, and nothing for a chunk but its message's last (read
        # only when the topic deduplicates).
        size = metadata.num_messages_in_batch if metadata.HasField("num_messages_in_batch") else 1
        record: int | None = sequence_id
        chunked = producer.deduplication and metadata.HasField("chunk_id")
        if size > 1 or chunked:
            record = to_record(
                sequence_id,
                size,
                chunk_id=metadata.chunk_id if chunked else None,
                num_chunks=metadata.num_chunks_from_msg if chunked else None,
            )
        chunk = f"{metadata.chunk_id}:{proto_field(metadata, 'uuid')}" if cmd.is_chunk else None
        # MessageMetadata.deliver_at_time (19): deliver_at / deliver_after (PIP-26)
        deliver_at = metadata.deliver_at_time if metadata.HasField("deliver_at_time") else None
        entry = _new(  # a plain tuple's construction: two thirds of the NamedTuple call's time
            EntryToAppend,
            (
                cmd.payload.blob,
                max(size, 1),
                sequence_id,
                record,
                _sticky_key(metadata),
                chunk,
                metadata.publish_time,
                deliver_at,
            ),
        )
        try:
            fut, index = producer.append_to_tick(entry)
        except (DeliveryDelayNotAllowed, MessageTooLarge) as exc:
            # Answered after the receipts of the messages sent before it: send order.
            self._queue_answer(producer, (producer_id, sequence_id, None, 0, exc))
            return
        self._queue_answer(producer, (producer_id, sequence_id, fut, index, None))
        rate = producer.publish_rate
        # the topic's publishRate (PublishRateLimiterImpl.handlePublishThrottling)
        if rate.limited and self._publish_throttle.acquire(
            rate, entry.num_messages, len(entry.blob)
        ):
            self._throttle.mark(ThrottleType.TOPIC_PUBLISH_RATE)
            self._arm_rate_check(self._publish_throttle.delay())

    def _arm_rate_check(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        self._rate_check = loop.call_later(delay, self._check_publish_rates)

    def _check_publish_rates(self) -> None:
        """Read the connection again once the publish rates that paused it hold tokens
        (Pulsar's ``unthrottleQueuedProducers``), else look again later."""
        self._rate_check = None
        if self._state.closed:
            return
        delay = self._publish_throttle.check()
        if delay is None:
            self._throttle.unmark(ThrottleType.TOPIC_PUBLISH_RATE)
        else:
            self._arm_rate_check(delay)

    def _queue_answer(self, producer: ProducerHandle, answer: _Answer) -> None:
        queue = self._answers.get(producer)
        if queue is None:
            queue = self._answers[producer] = deque()
        queue.append(answer)
        pending = self._pending_publishes  # PendingLimit.add, inline: once per SEND
        pending.count += 1
        if pending.count >= pending.limit:
            self._throttle.mark(ThrottleType.PENDING_PUBLISHES)
        if not self._publish_buffer.is_open:
            self._throttle.mark(ThrottleType.PUBLISH_BUFFER)
        if len(queue) == 1:  # the new head: answer it (and what follows) once it can be
            self._answer_from_head(producer)

    def _answer_from_head(
        self, producer: ProducerHandle, _done: asyncio.Future[Any] | None = None
    ) -> None:
        """Write the answers at the head of ``producer``'s queue whose appends are complete,
        in order; wait for the first that is not."""
        queue = self._answers.get(producer)
        if queue is None:
            return
        closed = self._state.closed
        answered = 0
        # the last tick future found done, with its failure or outcomes: the SENDs of one
        # tick share it, so it is read once for all of them
        done: asyncio.Future[list[AppendOutcome]] | None = None
        error: BaseException | None = None
        outcomes: list[AppendOutcome] = []
        while queue:
            producer_id, sequence_id, fut, index, refusal = queue[0]
            if fut is not None and fut is not done:
                if not fut.done():
                    fut.add_done_callback(partial(self._answer_from_head, producer))
                    break
                done = fut
                # cancelled only if the gateway stops under it: a failure like any other
                error = asyncio.CancelledError() if fut.cancelled() else fut.exception()
                outcomes = fut.result() if error is None else []
            queue.popleft()
            answered += 1
            if closed:
                continue
            if fut is None:
                assert refusal is not None
                self._refuse_send(producer_id, sequence_id, refusal)
            elif error is None:
                self._answer_append(producer, producer_id, sequence_id, outcomes[index], None)
            else:
                self._answer_append(producer, producer_id, sequence_id, None, error)
        if not queue:
            del self._answers[producer]
        if answered:
            self._pending_publishes.done(answered)
            if not closed:
                self._state.wants_flush()

    def _answer_append(
        self,
        producer: ProducerHandle,
        producer_id: int,
        sequence_id: int,
        outcome: AppendOutcome | None,
        exc: BaseException | None,
    ) -> None:
        """SEND_RECEIPT for a stored (or deduplicated) append (``outcome``); for a failed
        (``exc``) or refused one, close the producer."""
        if outcome is not None:
            status, ledger_id, entry_id = outcome
            if status is _STORED:
                self._conn.send_send_receipt(producer_id, sequence_id, ledger_id, entry_id)
                return
            if status is _DUPLICATE:
                # Pulsar acknowledges a duplicate with message id (-1, -1)
                self._conn.send_send_receipt(producer_id, sequence_id, _MINUS_ONE, _MINUS_ONE)
                return
        else:
            log.warning("append failed on %s: %s", producer.topic_name, exc)
        # Never SEND_ERROR for storage trouble (the client would loop); close the producer
        # so it reconnects and re-sends its pending messages. A fenced producer, or one of
        # a terminated topic, learns why from the answer its reconnection gets.
        if self.producers.get(producer_id) is producer:
            del self.producers[producer_id]
            self._closed_by_gateway(producer_id)
            self._state.spawn(self._producer_service.close(producer))

    def _refuse_send(self, producer_id: int, sequence_id: int, exc: GatewayError) -> None:
        """SEND_ERROR for a message a policy refuses: the delayed-delivery policy or the
        topic's ``maxMessageSize`` (NotAllowedError, ``PersistentTopic.publishMessage``), a
        message without encryption keys from an encrypting producer (MetadataError,
        ``Producer.checkAndStartPublish``). Java and other clients fail just that message
        on it; the C++ library (under the Python client) closes the whole connection on any
        SEND_ERROR but ChecksumError (``ClientConnection::handleSendError``) and re-sends
        the message forever, disrupting every producer and consumer on the connection. So
        a C++ client gets the one per-message failure it honours, ChecksumError, with the
        error's name and reason in its message (logged by the client)."""
        error, message = server_error(exc)
        if self._conn.client_version.startswith(CPP_CLIENT):
            message = f"{pb.ServerError.Name(error)}: {message}"
            error = pb.ChecksumError
        self._conn.send_send_error(producer_id, sequence_id, error, message)

    # -- CLOSE_PRODUCER -------------------------------------------------------------------

    def close_producer(self, cmd: c.CloseProducer) -> None:
        producer = self.producers.pop(cmd.producer_id, None)
        if producer is None:
            # SUCCESS always, also for unknown ids (docs/binary_protocol.md "Sending").
            self._conn.send_success(cmd.request_id)
            return

        async def run() -> None:
            # Released before SUCCESS, so the name is free once the client hears back.
            try:
                await self._producer_service.close(producer)
            except GatewayError as exc:
                log.warning("releasing producer %s failed: %s", producer.name, exc)
            self._conn.send_success(cmd.request_id)

        self._state.spawn(run())

    async def close(self) -> None:
        """The connection is gone: close its producers."""
        if self._rate_check is not None:
            self._rate_check.cancel()
            self._rate_check = None
        producers = list(self.producers.values())
        self.producers.clear()
        for producer in producers:
            try:
                await self._producer_service.close(producer)
            except GatewayError as exc:
                log.warning("releasing producer %s failed: %s", producer.name, exc)


def _sticky_key(metadata: pb.MessageMetadata) -> bytes | None:
    """The Key_Shared key of an entry: ordering key, else partition key (Pulsar
    ``Commands.peekStickyKey``; a batch carries its first message's)."""
    if metadata.HasField("ordering_key"):
        return metadata.ordering_key
    if metadata.HasField("partition_key"):
        key = proto_field(metadata, "partition_key")
        if metadata.partition_key_b64_encoded:
            with contextlib.suppress(ValueError):
                return base64.b64decode(key)
        return key.encode()
    return None
