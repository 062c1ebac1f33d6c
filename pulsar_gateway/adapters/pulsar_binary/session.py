"""Binds one binary connection's commands to the core's services.

The :class:`Session` keeps the per-connection tables Pulsar's ``ServerCnx`` keeps
(producers by ``producer_id``, consumers by ``consumer_id``; the client numbers them per
client, so they are only unique within a connection) and turns each command into core calls.
Requests that need Redis run as tasks; their responses are written when they finish, each
with its own request id. SEND is the hot path and takes no task: each producer's answers
(receipts, and refusals of the delayed-delivery policy) wait in a queue in send order, the
client's requirement (``ProducerImpl::ackReceived``), and are written from its head as the appends
complete. A Redis pipeline resolves its appends in order and in one go, so one callback
answers a whole pipeline's SENDs instead of one callback per message.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any

from pulsar_gateway.adapters.pulsar_binary import codec
from pulsar_gateway.adapters.pulsar_binary import commands as c
from pulsar_gateway.adapters.pulsar_binary.connection import ServerConnection
from pulsar_gateway.adapters.pulsar_binary.errors import server_error
from pulsar_gateway.adapters.pulsar_binary.throttle import (
    ConcurrencyLimit,
    PendingLimit,
    Throttle,
    ThrottleType,
)
from pulsar_gateway.core import (
    AuthAction,
    AuthorizationError,
    ClientInfo,
    ConsumerHandle,
    Delivery,
    DeliveryDelayNotAllowed,
    EncryptionRequired,
    GatewayError,
    InitialPosition,
    KeySharedMode,
    KeySharedPolicy,
    MessageTooLarge,
    NotAllowed,
    ProducerAccessMode,
    ProducerHandle,
    PublishThrottle,
    Services,
    SubscriptionType,
    TopicName,
    UnknownListener,
    decode_version,
    encode_version,
    parse_topic_name,
    redeliver_unacknowledged,
    start_position,
    stream_id,
    time_position,
    to_record,
)
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["Session"]

log = logging.getLogger(__name__)

#: ``CommandConnect.client_version`` prefix of the C++ library and clients built on it.
CPP_CLIENT = "Pulsar-CPP"

#: How long SENDs for a producer the gateway closed are ignored rather than refused
#: (Pulsar ``ServerCnx.recentlyClosedProducers``, for ``keepAliveIntervalSeconds``: 30 by
#: default): they were in flight before the client read CLOSE_PRODUCER, and it sends them
#: again once its producer is back.
RECENTLY_CLOSED_SECONDS = 30.0

_NON_PERSISTENT = "non-persistent://"
#: Pulsar's answer to a lookup past ``maxConcurrentLookupRequest`` (``ServerCnx``).
TOO_MANY_LOOKUPS = "Failed due to too many pending lookup requests"
#: -1 as a MessageIdData field: the receipt of a deduplicated SEND is (-1, -1).
_MINUS_ONE = (1 << 64) - 1

#: A SEND waiting for its answer: producer id, sequence id, and either the append's future
#: or the delayed-delivery policy's refusal.
_Answer = tuple[int, int, "asyncio.Future[bytes | int | None] | None", "GatewayError | None"]

#: An authorization check of the core (``AuthorizationService.can_*``).
_Check = Callable[[TopicName, str | None], Awaitable[bool]]


class _ConsumerHandle:
    """The sink the core delivers one consumer's messages to."""

    __slots__ = ("consumer_id", "partition", "session")

    def __init__(self, session: Session, consumer_id: int, partition: int) -> None:
        self.session = session
        self.consumer_id = consumer_id
        self.partition = partition

    def deliver(self, consumer: ConsumerHandle, deliveries: list[Delivery]) -> None:
        self.session.conn.send_messages(self.consumer_id, self.partition, deliveries)
        self.session.wants_flush()

    def active_changed(self, consumer: ConsumerHandle, active: bool) -> None:
        if self.session.consumers.get(self.consumer_id) is consumer:
            self.session.conn.send_active_consumer_change(self.consumer_id, active)
            self.session.wants_flush()

    def closed_by_gateway(self, consumer: ConsumerHandle) -> None:
        if self.session.consumers.get(self.consumer_id) is consumer:
            del self.session.consumers[self.consumer_id]
            self.session.conn.send_close_consumer(self.consumer_id)
            self.session.wants_flush()

    def reached_end_of_topic(self, consumer: ConsumerHandle) -> None:
        conn = self.session.conn
        if self.session.consumers.get(self.consumer_id) is consumer and conn.takes_end_of_topic:
            self.session.conn.send_reached_end_of_topic(self.consumer_id)
            self.session.wants_flush()


class Session:
    """The broker side of one binary connection."""

    def __init__(
        self,
        services: Services,
        conn: ServerConnection,
        service_url: str,
        wants_flush: Callable[[], None],
        service_url_tls: str | None = None,
        *,
        throttle: Throttle | None = None,
        max_pending: int = 1000,
        lookups: ConcurrencyLimit | None = None,
    ) -> None:
        """``service_url`` and ``service_url_tls`` (``pulsar+ssl://``, None without TLS):
        where LOOKUP sends clients. ``throttle`` pauses reading the connection: the session
        marks it when ``max_pending`` publishes, or as many other requests, wait for Redis
        (released at half), and when the publish buffer is full. ``lookups``: the
        gateway-wide count of lookups in progress."""
        self.services = services
        self.conn = conn
        self.service_url = service_url
        self.service_url_tls = service_url_tls
        self.wants_flush = wants_flush
        self.throttle = throttle or Throttle(lambda _: None)
        self._pending_publishes = PendingLimit(
            self.throttle, ThrottleType.PENDING_PUBLISHES, max_pending
        )
        self._pending_requests = PendingLimit(
            self.throttle, ThrottleType.PENDING_REQUESTS, max_pending
        )
        self._lookups = lookups or ConcurrencyLimit(50_000)
        self._publish_buffer = services.publish_buffer.gate
        #: the connection's send buffer is under its high water mark
        self.writable = True
        self.producers: dict[int, ProducerHandle] = {}
        #: producer id -> loop time the gateway closed it (CLOSE_PRODUCER)
        self._recently_closed: dict[int, float] = {}
        #: per producer, its SENDs not answered yet, in send order: (producer id, sequence
        #: id, the append's future or None, the refusal or None)
        self._answers: dict[ProducerHandle, deque[_Answer]] = {}
        #: the producers' topic publish rates that paused the connection, and when to look
        #: at them again
        self._publish_throttle = PublishThrottle()
        self._rate_check: asyncio.TimerHandle | None = None
        self.consumers: dict[int, ConsumerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.closed = False
        #: the client's "host:port", for the stats' ``address`` (set by the server)
        self.client_address = ""

    @property
    def busy(self) -> bool:
        """Requests are still being answered."""
        return bool(self._tasks)

    def _client_info(self) -> ClientInfo:
        return ClientInfo(
            address=self.client_address, version=self.conn.client_version, reconnects=True
        )

    # -- plumbing ------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        self._pending_requests.add()
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._pending_requests.done()
        if not task.cancelled() and task.exception() is not None:
            log.error("request handler failed", exc_info=task.exception())
        self.wants_flush()

    def _count(self, command: c.Command) -> None:
        name = command.type_name if isinstance(command, c.Unsupported) else type(command).__name__
        self.services.metrics.count_command("binary", name)

    def _error(self, request_id: int, exc: BaseException) -> None:
        code, message = server_error(exc)
        self.conn.send_error(request_id, code, message)

    @property
    def role(self) -> str | None:
        """The role CONNECT authenticated (None when authentication is off)."""
        authenticated = self.conn.authenticated
        return None if authenticated is None else authenticated.role

    async def _refusal(self, topic: str, check: _Check, message: str) -> GatewayError | None:
        """Why the connection's role may not do this on ``topic`` (``ServerCnx``
        ``isTopicOperationAllowed``): None when allowed (always, with authorization off),
        else the error to answer with (AuthorizationError with Pulsar's message, or the
        failure of the check itself)."""
        if not self.services.authorization.enabled:
            return None
        try:
            if await check(parse_topic_name(topic), self.role):
                return None
        except GatewayError as exc:
            return exc
        return AuthorizationError(message)

    def handle(self, command: c.Command) -> None:
        """Handle one command (already accepted by the connection's state table)."""
        self._count(command)
        handler = _HANDLERS.get(type(command))
        if handler is None:
            if isinstance(command, c.Unsupported):
                self.conn.refuse_unsupported(command)
            return
        handler(self, command)

    # -- topic discovery ------------------------------------------------------------------

    def _spawn_lookup(self, answer: Coroutine[Any, Any, None]) -> None:
        """Run a lookup that holds a place among the gateway's lookups in progress
        (taken with ``self._lookups.try_acquire()``; when there is none, the caller answers
        TooManyRequests, as Pulsar's ``ServerCnx`` does) until it ends."""

        async def run() -> None:
            try:
                await answer
            finally:
                self._lookups.release()

        self._spawn(run())

    def _partitioned_metadata(self, cmd: c.PartitionedMetadata) -> None:
        if not self._lookups.try_acquire():
            self.conn.send_partition_metadata_error(
                cmd.request_id, pb.TooManyRequests, TOO_MANY_LOOKUPS
            )
            return

        async def answer() -> None:
            message = "Client is not authorized to Get Partition Metadata"
            refusal = await self._refusal(
                cmd.topic, self.services.authorization.can_lookup, message
            )
            if refusal is not None:
                self.conn.send_partition_metadata_error(cmd.request_id, *server_error(refusal))
                return
            try:
                partitions = await self.services.topics.client_partitions(
                    parse_topic_name(cmd.topic)
                )
            except GatewayError as exc:
                self.conn.send_partition_metadata_error(cmd.request_id, *server_error(exc))
            else:
                self.conn.send_partition_metadata_response(cmd.request_id, partitions)

        self._spawn_lookup(answer())

    def _lookup_answer(self, cmd: c.Lookup) -> None:
        """Connect here: at the URLs of the listener the client named, or the defaults."""
        if not cmd.listener_name:
            self.conn.send_lookup_response(cmd.request_id, self.service_url, self.service_url_tls)
            return
        try:
            listener = self.services.cluster.listener(cmd.listener_name)
        except UnknownListener as exc:
            # NamespaceService's refusal; clients retry ServiceNotReady until they time out
            self.conn.send_lookup_error(cmd.request_id, pb.ServiceNotReady, str(exc))
            return
        self.conn.send_lookup_response(
            cmd.request_id, listener.broker_url, listener.broker_service_url_tls
        )

    def _lookup(self, cmd: c.Lookup) -> None:
        # Every gateway serves every topic: the answer is "connect here", once the client
        # may look the topic up and its namespace exists (TopicNotFound otherwise).
        try:
            topic = parse_topic_name(cmd.topic)
        except GatewayError as exc:
            self.conn.send_lookup_error(cmd.request_id, *server_error(exc))
            return
        if not self._lookups.try_acquire():
            self.conn.send_lookup_error(cmd.request_id, pb.TooManyRequests, TOO_MANY_LOOKUPS)
            return
        authz = self.services.authorization

        async def answer() -> None:
            if authz.enabled:
                refusal = await self._refusal(
                    cmd.topic, authz.can_lookup, "Client is not authorized to Lookup"
                )
                if refusal is not None:
                    self.conn.send_lookup_error(cmd.request_id, *server_error(refusal))
                    return
            try:
                await self.services.tenants.require_topic_namespace(topic.namespace)
            except GatewayError as exc:
                self.conn.send_lookup_error(cmd.request_id, *server_error(exc))
            else:
                self._lookup_answer(cmd)

        self._spawn_lookup(answer())

    def _get_topics_of_namespace(self, cmd: c.GetTopicsOfNamespace) -> None:
        async def run() -> None:
            # Partitions are listed by their own names, as Pulsar lists managed ledgers;
            # the client cuts "-partition-<i>" off itself (``PatternMultiTopicsConsumerImpl``).
            authz = self.services.authorization
            if authz.enabled:
                # NamespaceOperation.GET_TOPICS: tenant admin, or consume on the namespace.
                tenant = cmd.namespace.partition("/")[0]
                try:
                    allowed = await authz.allows(
                        tenant, cmd.namespace, self.role, AuthAction.CONSUME
                    )
                except GatewayError as exc:
                    self._error(cmd.request_id, exc)
                    return
                if not allowed:
                    message = "Client is not authorized to GetTopicsOfNamespace"
                    self._error(cmd.request_id, AuthorizationError(message))
                    return
            try:
                names = await self.services.topics.topics(cmd.namespace)
            except GatewayError as exc:
                self._error(cmd.request_id, exc)
                return
            mode = cmd.mode
            if mode == pb.CommandGetTopicsOfNamespace.PERSISTENT:
                names = [n for n in names if not n.startswith(_NON_PERSISTENT)]
            elif mode == pb.CommandGetTopicsOfNamespace.NON_PERSISTENT:
                names = [n for n in names if n.startswith(_NON_PERSISTENT)]
            self.conn.send_get_topics_of_namespace_response(
                cmd.request_id, names, topics_hash(names)
            )

        self._spawn(run())

    def _get_schema(self, cmd: c.GetSchema) -> None:
        async def run() -> None:
            version: int | None = None
            if cmd.schema_version is not None:
                version = decode_version(cmd.schema_version)
                if version is None:
                    self.conn.send_get_schema_error(
                        cmd.request_id, pb.TopicNotFound, "Invalid schema version"
                    )
                    return
            try:
                topic = parse_topic_name(cmd.topic)
                number, schema = await self.services.schemas.get(topic, version)
            except LookupError as exc:
                # "No schema" is TopicNotFound inside GET_SCHEMA_RESPONSE (docs/binary_protocol.md
                # "Requests and responses"): the client decodes with its own schema.
                self.conn.send_get_schema_error(cmd.request_id, pb.TopicNotFound, str(exc))
                return
            except GatewayError as exc:
                self.conn.send_get_schema_error(cmd.request_id, *server_error(exc))
                return
            self.conn.send_get_schema_response(
                cmd.request_id,
                schema.type,
                schema.name,
                schema.data,
                schema.properties,
                encode_version(number),
            )

        self._spawn(run())

    def _get_or_create_schema(self, cmd: c.GetOrCreateSchema) -> None:
        async def run() -> None:
            try:
                topic = parse_topic_name(cmd.topic)
                version = await self.services.schemas.register(topic, cmd.schema)
            except GatewayError as exc:
                self.conn.send_get_or_create_schema_error(cmd.request_id, *server_error(exc))
                return
            self.conn.send_get_or_create_schema_response(cmd.request_id, encode_version(version))

        self._spawn(run())

    # -- producers ------------------------------------------------------------------------

    def _send_producer_success(self, request_id: int, producer: ProducerHandle) -> None:
        version = producer.schema_version
        self.conn.send_producer_success(
            request_id,
            producer.name,
            producer.last_sequence_id,
            schema_version=None if version is None else encode_version(version),
            topic_epoch=producer.topic_epoch,
        )

    def _producer(self, cmd: c.Producer) -> None:
        existing = self.producers.get(cmd.producer_id)
        if existing is not None:
            # A retried PRODUCER for an id we already serve is idempotent (a queued one is
            # answered when it gets the topic).
            if not existing.waiting:
                self._send_producer_success(cmd.request_id, existing)
            return

        async def run() -> None:
            authz = self.services.authorization
            refusal = await self._refusal(
                cmd.topic, authz.can_produce, "Client is not authorized to Produce"
            )
            if refusal is not None:
                self._error(cmd.request_id, refusal)
                return
            try:
                producer = await self.services.producers.create(
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
                self._error(cmd.request_id, exc)
                return
            except ValueError as exc:  # unknown access mode
                self._error(cmd.request_id, NotAllowed(str(exc)))
                return
            if self.closed or cmd.producer_id in self.producers:
                await self.services.producers.close(producer)
                return
            producer_id = producer.producer_id = cmd.producer_id
            producer.client = self._client_info()
            producer.on_lost = lambda p: self._producer_lost(producer_id, p)
            self.producers[producer_id] = producer
            if producer.waiting:
                # WaitForExclusive: "queued" now, the real answer when it gets the topic.
                self.conn.send_producer_success(cmd.request_id, producer.name, producer_ready=False)
                self.wants_flush()
                try:
                    await producer.ready
                except GatewayError as exc:
                    if self.producers.get(producer_id) is producer:
                        del self.producers[producer_id]
                        self._error(cmd.request_id, exc)
                    return
                if self.closed or self.producers.get(producer_id) is not producer:
                    return
            self._send_producer_success(cmd.request_id, producer)

        self._spawn(run())

    def _producer_lost(self, producer_id: int, producer: ProducerHandle) -> None:
        """The fleet closed this producer (fenced, superseded, lease lost, disconnected by
        a backlog quota): CLOSE_PRODUCER, so the client reconnects and learns its fate from
        the next PRODUCER."""
        if self.producers.get(producer_id) is producer:
            del self.producers[producer_id]
            if not self.closed:
                self._closed_by_gateway(producer_id)
                self.wants_flush()

    def _closed_by_gateway(self, producer_id: int) -> None:
        """CLOSE_PRODUCER for a producer already forgotten; its SENDs still in flight are
        ignored for a while (:data:`RECENTLY_CLOSED_SECONDS`)."""
        self.conn.send_close_producer(producer_id)
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

    def _send(self, cmd: c.Send) -> None:
        producer = self.producers.get(cmd.producer_id)
        if producer is None and self._closed_recently(cmd.producer_id):
            return  # sent before the client read our CLOSE_PRODUCER: it sends it again
        if producer is None or producer.waiting:
            self.conn.send_send_error(
                cmd.producer_id,
                cmd.sequence_id,
                pb.NotAllowedError,
                f"Producer {cmd.producer_id} is not open on this connection",
            )
            return
        if not cmd.payload.checksum_ok:
            # The only per-message failure that keeps the connection
            # (``ClientConnection::handleSendError``).
            self.conn.send_send_error(
                cmd.producer_id, cmd.sequence_id, pb.ChecksumError, "Checksum mismatch"
            )
            return
        # The entry's size comes from its metadata (what consumers will parse), not from
        # SEND.num_messages, which a client could set to anything.
        metadata = cmd.payload.metadata
        if producer.encrypted and not metadata.encryption_keys:
            # Producer.checkAndStartPublish: an encrypting producer's message without keys
            refused = EncryptionRequired("Messages must be encrypted")
            self._queue_answer(producer, (cmd.producer_id, cmd.sequence_id, None, refused))
            return
        size = metadata.num_messages_in_batch if metadata.HasField("num_messages_in_batch") else 1
        sticky_key = _sticky_key(metadata)
        chunk = f"{metadata.chunk_id}:{codec.proto_text(metadata.uuid)}" if cmd.is_chunk else None
        # MessageMetadata.deliver_at_time (19): deliver_at / deliver_after (PIP-26)
        deliver_at = metadata.deliver_at_time if metadata.HasField("deliver_at_time") else None
        producer_id, sequence_id = cmd.producer_id, cmd.sequence_id
        fut: asyncio.Future[bytes | int | None]
        try:
            if producer.checked:
                record = None
                if producer.deduplication:
                    chunked = metadata.HasField("chunk_id")
                    record = to_record(
                        cmd.sequence_id,
                        size,
                        chunk_id=metadata.chunk_id if chunked else None,
                        num_chunks=metadata.num_chunks_from_msg if chunked else None,
                    )
                fut = producer.publish_checked(
                    cmd.payload.blob,
                    max(size, 1),
                    cmd.sequence_id,
                    record,
                    sticky_key,
                    chunk,
                    publish_time=metadata.publish_time,
                    deliver_at=deliver_at,
                )
            else:
                fut = producer.publish(  # type: ignore[assignment]
                    cmd.payload.blob,
                    max(size, 1),
                    sticky_key,
                    chunk,
                    publish_time=metadata.publish_time,
                    deliver_at=deliver_at,
                )
        except (DeliveryDelayNotAllowed, MessageTooLarge) as exc:
            # Answered after the receipts of the messages sent before it: send order.
            self._queue_answer(producer, (producer_id, sequence_id, None, exc))
            return
        self._queue_answer(producer, (producer_id, sequence_id, fut, None))
        rate = producer.publish_rate
        # the topic's publishRate (PublishRateLimiterImpl.handlePublishThrottling)
        if rate.limited and self._publish_throttle.acquire(
            rate, max(size, 1), len(cmd.payload.blob)
        ):
            self.throttle.mark(ThrottleType.TOPIC_PUBLISH_RATE)
            self._arm_rate_check(self._publish_throttle.delay())

    def _arm_rate_check(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        self._rate_check = loop.call_later(delay, self._check_publish_rates)

    def _check_publish_rates(self) -> None:
        """Read the connection again once the publish rates that paused it hold tokens
        (Pulsar's ``unthrottleQueuedProducers``), else look again later."""
        self._rate_check = None
        if self.closed:
            return
        delay = self._publish_throttle.check()
        if delay is None:
            self.throttle.unmark(ThrottleType.TOPIC_PUBLISH_RATE)
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
            self.throttle.mark(ThrottleType.PENDING_PUBLISHES)
        if not self._publish_buffer.is_open:
            self.throttle.mark(ThrottleType.PUBLISH_BUFFER)
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
        answered = 0
        while queue:
            producer_id, sequence_id, fut, refusal = queue[0]
            if fut is not None and not fut.done():
                fut.add_done_callback(partial(self._answer_from_head, producer))
                break
            queue.popleft()
            answered += 1
            if self.closed:
                continue
            if fut is None:
                assert refusal is not None
                self._refuse_send(producer_id, sequence_id, refusal)
            else:
                self._answer_append(producer, producer_id, sequence_id, fut)
        if not queue:
            del self._answers[producer]
        if answered:
            self._pending_publishes.done(answered)
            if not self.closed:
                self.wants_flush()

    def _answer_append(
        self,
        producer: ProducerHandle,
        producer_id: int,
        sequence_id: int,
        fut: asyncio.Future[bytes | int | None],
    ) -> None:
        """SEND_RECEIPT for a stored (or deduplicated) append; for a failed or fenced one,
        close the producer."""
        exc = fut.exception()
        entry_id = None if exc is not None else fut.result()
        if exc is not None or entry_id == 0:
            # Never SEND_ERROR for storage trouble (the client would loop); close the
            # producer so it reconnects and re-sends its pending messages. A fenced
            # producer (0) learns it from the ProducerFenced its reconnection gets.
            if exc is not None:
                log.warning("append failed on %s: %s", producer.topic_name, exc)
            if self.producers.get(producer_id) is producer:
                del self.producers[producer_id]
                self._closed_by_gateway(producer_id)
                self._spawn(self.services.producers.close(producer))
        elif entry_id is None:
            # A duplicate: Pulsar acknowledges it with message id (-1, -1).
            self.conn.send_send_receipt(producer_id, sequence_id, _MINUS_ONE, _MINUS_ONE)
        else:
            assert isinstance(entry_id, bytes)
            ms, _, seq = entry_id.partition(b"-")
            self.conn.send_send_receipt(producer_id, sequence_id, int(ms), int(seq))

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
        if self.conn.client_version.startswith(CPP_CLIENT):
            message = f"{pb.ServerError.Name(error)}: {message}"
            error = pb.ChecksumError
        self.conn.send_send_error(producer_id, sequence_id, error, message)

    def _close_producer(self, cmd: c.CloseProducer) -> None:
        producer = self.producers.pop(cmd.producer_id, None)
        if producer is None:
            # SUCCESS always, also for unknown ids (docs/binary_protocol.md "Sending").
            self.conn.send_success(cmd.request_id)
            return

        async def run() -> None:
            # Released before SUCCESS, so the name is free once the client hears back.
            try:
                await self.services.producers.close(producer)
            except GatewayError as exc:
                log.warning("releasing producer %s failed: %s", producer.name, exc)
            self.conn.send_success(cmd.request_id)

        self._spawn(run())

    # -- consumers ------------------------------------------------------------------------

    def _subscribe(self, cmd: c.Subscribe) -> None:
        if cmd.consumer_id in self.consumers:
            self.conn.send_success(cmd.request_id)
            return

        async def run() -> None:
            authz = self.services.authorization

            async def can_consume(topic: TopicName, role: str | None) -> bool:
                # canConsumeAsync with the subscription: its roles and subscriptionAuthMode
                # (a Prefix refusal raises AuthorizationError with Pulsar's message)
                return await authz.can_consume(topic, role, cmd.subscription)

            refusal = await self._refusal(
                cmd.topic, can_consume, "Client is not authorized to subscribe"
            )
            if refusal is not None:
                self._error(cmd.request_id, refusal)
                return
            try:
                topic = parse_topic_name(cmd.topic)
                sub_type = SubscriptionType(cmd.sub_type)
                if cmd.schema is not None and topic.persistent:
                    # Pulsar registers a consumer's schema, or refuses it with
                    # IncompatibleSchema (ServerCnx addSchemaIfIdleOrCheckCompatible).
                    await self.services.schemas.register(topic, cmd.schema)
                handle = _ConsumerHandle(self, cmd.consumer_id, topic.partition_index)
                consumer = await self.services.subscriptions.subscribe(
                    topic,
                    cmd.subscription,
                    sub_type,
                    cmd.consumer_name,
                    handle,
                    initial_position=InitialPosition(cmd.initial_position),
                    durable=cmd.durable,
                    start_message_id=cmd.start_message_id,
                    read_compacted=cmd.read_compacted,
                    priority_level=cmd.priority_level,
                    key_shared=KeySharedPolicy(
                        KeySharedMode(cmd.key_shared_mode),
                        cmd.hash_ranges,
                        cmd.allow_out_of_order,
                    ),
                    client=self._client_info(),
                    consumer_id=cmd.consumer_id,
                )
            except GatewayError as exc:
                self._error(cmd.request_id, exc)
                return
            except ValueError as exc:
                self._error(cmd.request_id, NotAllowed(str(exc)))
                return
            if self.closed or cmd.consumer_id in self.consumers:
                await consumer.close()
                if not self.closed:
                    self.conn.send_success(cmd.request_id)
                return
            self.consumers[cmd.consumer_id] = consumer
            consumer.client = self._client_info()
            if not self.writable:
                consumer.set_writable(False)
            self.conn.send_success(cmd.request_id)
            if consumer.active is not None:
                # Failover: tell the newcomer whether it is active (Pulsar
                # AbstractDispatcherSingleActiveConsumer.addConsumer); the core learnt it
                # before the consumer was registered here.
                self.conn.send_active_consumer_change(cmd.consumer_id, consumer.active)

        self._spawn(run())

    def _consumer(self, consumer_id: int) -> ConsumerHandle | None:
        consumer = self.consumers.get(consumer_id)
        if consumer is None:
            log.debug("command for unknown consumer %d ignored", consumer_id)
        return consumer

    def _flow(self, cmd: c.Flow) -> None:
        consumer = self._consumer(cmd.consumer_id)
        if consumer is not None:
            consumer.flow(cmd.permits)

    def _ack(self, cmd: c.Ack) -> None:
        consumer = self._consumer(cmd.consumer_id)
        if consumer is None:
            if cmd.request_id is not None:
                self.conn.send_ack_response(
                    cmd.consumer_id, cmd.request_id, pb.ConsumerNotFound, "Consumer not found"
                )
            return
        try:
            fut = _ack_cumulative(consumer, cmd) if cmd.cumulative else _ack(consumer, cmd)
        except GatewayError as exc:
            # Refused (cumulative ack on Shared/Key_Shared): Pulsar answers only when the
            # client asked for a receipt, and otherwise drops the ack.
            log.debug("ack refused on %s: %s", consumer.uid, exc)
            if cmd.request_id is not None:
                self.conn.send_ack_response(cmd.consumer_id, cmd.request_id, *server_error(exc))
            return
        if cmd.request_id is None:
            return
        request_id, consumer_id = cmd.request_id, cmd.consumer_id
        if fut is None:
            self.conn.send_ack_response(consumer_id, request_id)
            return

        def respond(f: asyncio.Future[Any]) -> None:
            exc = f.exception()
            if exc is None:
                self.conn.send_ack_response(consumer_id, request_id)
            else:
                self.conn.send_ack_response(consumer_id, request_id, *server_error(exc))
            self.wants_flush()

        fut.add_done_callback(respond)

    def _redeliver(self, cmd: c.Redeliver) -> None:
        consumer = self._consumer(cmd.consumer_id)
        if consumer is None:
            return
        # The ids count on Shared and Key_Shared only; elsewhere every unacked message of
        # the consumer comes again, in order (the core's rule, as ServerCnx's).
        ids = sorted({stream_id(*i) for i in cmd.message_ids if i[0] >= 0 and i[1] >= 0})
        redeliver_unacknowledged(consumer, ids)

    def _close_consumer(self, cmd: c.CloseConsumer) -> None:
        consumer = self.consumers.pop(cmd.consumer_id, None)
        if consumer is None:
            self.conn.send_success(cmd.request_id)
            return

        async def run() -> None:
            try:
                await consumer.close()
            except GatewayError as exc:
                log.warning("releasing consumer %s failed: %s", consumer.uid, exc)
            self.conn.send_success(cmd.request_id)

        self._spawn(run())

    def _requested_consumer(self, request_id: int, consumer_id: int) -> ConsumerHandle | None:
        """The consumer a request names, or None after answering ConsumerNotFound."""
        consumer = self.consumers.get(consumer_id)
        if consumer is None:
            self.conn.send_error(request_id, pb.ConsumerNotFound, "Consumer not found")
        return consumer

    def _unsubscribe(self, cmd: c.Unsubscribe) -> None:
        consumer = self._requested_consumer(cmd.request_id, cmd.consumer_id)
        if consumer is None:
            return

        async def run() -> None:
            try:
                await consumer.unsubscribe()
            except GatewayError as exc:
                self._error(cmd.request_id, exc)
                return
            self.consumers.pop(cmd.consumer_id, None)
            self.conn.send_success(cmd.request_id)

        self._spawn(run())

    def _get_last_message_id(self, cmd: c.GetLastMessageId) -> None:
        consumer = self._requested_consumer(cmd.request_id, cmd.consumer_id)
        if consumer is None:
            return

        async def run() -> None:
            try:
                last = await consumer.last_message_id()
            except GatewayError as exc:
                self._error(cmd.request_id, exc)
                return
            partition = consumer.partition
            if last.last is None:
                position = (-1, -1, partition, -1)
            else:
                batch_index = last.last_num_messages - 1 if last.last_is_batch else -1
                position = (last.last.ledger_id, last.last.entry_id, partition, batch_index)
            md = last.mark_delete
            self.conn.send_last_message_id_response(
                cmd.request_id, position, (md.ledger_id, md.entry_id) if md else (-1, -1)
            )

        self._spawn(run())

    def _seek(self, cmd: c.Seek) -> None:
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
                self._error(cmd.request_id, exc)
                return
            self.conn.send_success(cmd.request_id)

        self._spawn(run())

    # -- flow control ---------------------------------------------------------------------

    def set_writable(self, writable: bool) -> None:
        """The connection's send buffer went over its high water mark (False) or back under
        its low one (True): its consumers get nothing more until it drains (their permits
        stay), as Pulsar's dispatchers hold back a consumer whose channel is not writable."""
        self.writable = writable
        for consumer in list(self.consumers.values()):
            consumer.set_writable(writable)

    # -- teardown -------------------------------------------------------------------------

    async def close(self) -> None:
        """The connection is gone: close producers, release consumers' unacked messages."""
        self.closed = True
        if self._rate_check is not None:
            self._rate_check.cancel()
            self._rate_check = None
        producers = list(self.producers.values())
        self.producers.clear()
        for producer in producers:
            try:
                await self.services.producers.close(producer)
            except GatewayError as exc:
                log.warning("releasing producer %s failed: %s", producer.name, exc)
        consumers = list(self.consumers.values())
        self.consumers.clear()
        for consumer in consumers:
            try:
                await consumer.close()
            except GatewayError as exc:
                log.warning("releasing consumer %s failed: %s", consumer.uid, exc)
        for task in list(self._tasks):
            if not task.done():
                try:
                    await task
                except (GatewayError, asyncio.CancelledError):
                    pass


def _sticky_key(metadata: pb.MessageMetadata) -> bytes | None:
    """The Key_Shared key of an entry: ordering key, else partition key (Pulsar
    ``Commands.peekStickyKey``; a batch carries its first message's)."""
    if metadata.HasField("ordering_key"):
        return metadata.ordering_key
    if metadata.HasField("partition_key"):
        key = codec.proto_text(metadata.partition_key)
        if metadata.partition_key_b64_encoded:
            with contextlib.suppress(ValueError):
                return base64.b64decode(key)
        return key.encode()
    return None


def _ack(consumer: ConsumerHandle, cmd: c.Ack) -> asyncio.Future[Any] | None:
    """Individual ack. An id with an ack_set is a partly acknowledged batch (batch-index
    ack, Pulsar's ``MessageIdData.ack_set``): only its cleared bits are acked."""
    whole: list[bytes] = []
    partial: list[tuple[bytes, tuple[int, ...]]] = []
    for i, (ledger, entry) in enumerate(cmd.message_ids):
        if ledger < 0 or entry < 0:
            continue
        ack_set = cmd.ack_sets.get(i)
        if ack_set:
            partial.append((stream_id(ledger, entry), ack_set))
        else:
            whole.append(stream_id(ledger, entry))
    calls = []
    if whole:
        calls.append(consumer.ack(whole))
    if partial:
        calls.append(consumer.ack_batch_indexes(partial))
    return _all_of(calls)


def _all_of(calls: list[asyncio.Future[int]]) -> asyncio.Future[Any] | None:
    """One future for the core calls one ACK made: done when all are, failed if any
    fails (an ACK_RESPONSE must not report success while one of them failed)."""
    if not calls:
        return None
    if len(calls) == 1:
        return calls[0]
    joined = asyncio.gather(*calls)
    # an ACK without a request id is never answered: its failure is the consumer's
    # business (it is abandoned), not an error nobody retrieved
    joined.add_done_callback(_retrieve)
    return joined


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


def topics_hash(topics: list[str]) -> str:
    """Pulsar's ``TopicList.calculateHash``: CRC32C of the sorted names joined by ``,``,
    printed as Guava's ``HashCode.toString`` does (the int's bytes little-endian, in hex)."""
    crc = codec.crc32c(",".join(sorted(topics)).encode())
    return crc.to_bytes(4, "little").hex()


def _ack_cumulative(consumer: ConsumerHandle, cmd: c.Ack) -> asyncio.Future[Any] | None:
    """Cumulative ack of ``(L, E)``; with an ack_set, everything before the entry and the
    entry's cleared bits; for ``(L, -1)``, everything before ``(L, 0)`` (docs/binary_protocol.md
    "Consuming, acknowledging, seeking")."""
    if not cmd.message_ids:
        return None
    ledger, entry = cmd.message_ids[0]
    if ledger < 0:
        return None
    ack_set = cmd.ack_sets.get(0)
    if entry < 0 or ack_set:
        if entry > 0:
            upto = stream_id(ledger, entry - 1)
        elif ledger > 0:
            upto = stream_id(ledger - 1, (1 << 64) - 1)
        else:
            return None
    else:
        upto = stream_id(ledger, entry)
    calls = [consumer.ack_cumulative(upto)]
    if ack_set and entry >= 0:
        calls.append(consumer.ack_batch_indexes([(stream_id(ledger, entry), ack_set)]))
    return _all_of(calls)


_HANDLERS: dict[type, Callable[[Session, Any], None]] = {
    c.PartitionedMetadata: Session._partitioned_metadata,
    c.Lookup: Session._lookup,
    c.GetTopicsOfNamespace: Session._get_topics_of_namespace,
    c.GetSchema: Session._get_schema,
    c.GetOrCreateSchema: Session._get_or_create_schema,
    c.Producer: Session._producer,
    c.Send: Session._send,
    c.CloseProducer: Session._close_producer,
    c.Subscribe: Session._subscribe,
    c.Flow: Session._flow,
    c.Ack: Session._ack,
    c.Redeliver: Session._redeliver,
    c.CloseConsumer: Session._close_consumer,
    c.Unsubscribe: Session._unsubscribe,
    c.GetLastMessageId: Session._get_last_message_id,
    c.Seek: Session._seek,
}
