"""Producers: append entries to a topic's stream.

A Pulsar entry (a single message or a whole client batch) is stored as one stream entry, untouched:
the producer's blob (checksum, ``MessageMetadata``, payload, still compressed and batched) in field
``m``, and the number of messages in field ``n`` when a batch holds more than one
(``CommandSend.num_messages``), which dispatch needs to count permits in messages. The stream id the
append returns is the message id (see :mod:`pulsar_gateway.core.model.message_id`).

Appends go through ``append_entries.lua``, which puts each entry in the topic's current ledger
(consecutive entry ids, :mod:`pulsar_gateway.core.model.ledger`) with its broker timestamp. With
deduplication on (:mod:`pulsar_gateway.core.policies.deduplication`) the same script records the
producer's highest sequence id, and for an exclusive producer checks that no ExclusiveWithFencing
producer took the topic meanwhile. The entries a producer appends during one event-loop tick go
in one call, made at the end of the tick (a call's fixed cost is most of an entry's: see the
script); the topic's dispatchers are woken by the same pipeline.

A producer's registration with the fleet (name, access mode, lease) is kept by
:mod:`pulsar_gateway.core.producing.producer_registry`; this object is one gateway's handle on it.

An entry asking for a delivery time is stored with the time the topic's delayed-delivery policy
gives it (field ``d``, :mod:`pulsar_gateway.core.policies.delayed_delivery`); one the policy refuses
is not stored: the append raises, and the adapter answers the refusal in send order, after the
appends before it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import NamedTuple, Protocol

from pulsar_gateway.core.errors import MessageTooLarge
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.rates import ClientInfo, Meter
from pulsar_gateway.core.futures import read_outcome
from pulsar_gateway.core.model.access_mode import ProducerAccessMode
from pulsar_gateway.core.model.key_shared import sticky_key_hash
from pulsar_gateway.core.policies.delayed_delivery import (
    DelayedDeliveryPolicy,
    DeliveryDelayNotAllowed,
)
from pulsar_gateway.core.policies.rate_limits import PublishRateLimiter
from pulsar_gateway.core.producing.publish_buffer import PublishBuffer
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts.append import (
    AppendOutcome,
    append_entries,
    entry_options,
)
from pulsar_gateway.core.topics.topic import Topic

__all__ = [
    "EntryToAppend",
    "Producer",
    "ProducerHandle",
    "count_in",
    "generate_producer_name",
]

_names = itertools.count()


def _settle(
    waiting: list[asyncio.Future[AppendOutcome] | None],
    tick: asyncio.Future[list[AppendOutcome]] | None,
    done: asyncio.Future[list[AppendOutcome]],
) -> None:
    """Resolve each entry's future (None for an entry of :meth:`Producer.append_to_tick`),
    and the tick's future when there is one, from its tick's append call."""
    if done.cancelled():
        for fut in waiting:
            if fut is not None:
                fut.cancel()
        if tick is not None:
            tick.cancel()
        return
    error = done.exception()
    if error is not None:
        for fut in waiting:
            if fut is not None and not fut.done():
                fut.set_exception(error)
        if tick is not None and not tick.done():
            tick.set_exception(error)
        return
    outcomes = done.result()
    if tick is not None and not tick.done():
        tick.set_result(outcomes)
    for fut, result in zip(waiting, outcomes, strict=True):
        if fut is not None and not fut.done():
            fut.set_result(result)


def count_in(
    metrics: GatewayMetrics, meter: Meter, topic_meter: Meter, num_messages: int, size: int
) -> None:
    """Count an entry a producer sent: the gateway's counters, the producer's and its
    topic's meters (Pulsar ``msgRateIn``/``msgThroughputIn``)."""
    metrics.in_messages += num_messages
    metrics.in_bytes += size
    meter.add(num_messages, size)
    topic_meter.add(num_messages, size)


def generate_producer_name(cluster: str, gateway_id: str) -> str:
    """A fleet-unique producer name, in the shape of Java's ``<cluster>-<broker>-<n>``."""
    return f"{cluster}-{gateway_id}-{next(_names)}"


class EntryToAppend(NamedTuple):
    """One entry a producer appends (a NamedTuple: one is built per message sent).

    Attributes:
        blob: the stored form of the entry (see :mod:`pulsar_gateway.core.producing.producer`).
        num_messages: messages in the entry (1 unless it is a client batch).
        sequence_id: ``CommandSend.sequence_id`` (a batch's first message's).
        record: the sequence id deduplication records once the entry is stored
            (:func:`pulsar_gateway.core.policies.deduplication.to_record`: a batch's
            highest), None for a chunk other than its message's last; read only when the
            topic deduplicates.
        sticky_key: the entry's ordering key, else its partition key (a batch's is its
            first message's), for Key_Shared routing; None when it has none.
        chunk: ``"<chunk id>:<uuid>"`` for a chunk of a chunked message, so that a
            redelivery naming its last chunk brings back every chunk (``redeliver.lua``).
        publish_time: ``MessageMetadata.publish_time`` (ms), stored with the entry for seek
            and reset by time (0: unknown, none stored).
        deliver_at: ``MessageMetadata.deliver_at_time``, None when not set.
    """

    blob: bytes
    num_messages: int = 1
    sequence_id: int = -1
    record: int | None = None
    sticky_key: bytes | None = None
    chunk: str | None = None
    publish_time: int = 0
    deliver_at: int | None = None


class ProducerHandle(Protocol):
    """What adapters use of a producer, persistent or non-persistent.

    Attributes:
        topic_name: the full name of the topic (partition) it appends to.
        waiting: a WaitForExclusive producer still queued; ``ready`` resolves when it gets
            the topic.
        on_lost: set by the adapter: called when the gateway closes the producer itself.
        producer_id, client: what the adapter knows (stats).
        publish_rate: its topic's ``publishRate`` limiter on this gateway (set by the
            producer service; an adapter takes each message's tokens from it and pauses
            the producer when it is spent).
        encrypted: the client said it encrypts its messages (``CommandProducer.encrypted``);
            each of its messages must then carry encryption keys (checked by the adapter,
            which reads the metadata: Pulsar's ``Producer.checkAndStartPublish``).
    """

    name: str
    topic_name: str
    deduplication: bool
    waiting: bool
    ready: asyncio.Future[None]
    topic_epoch: int | None
    last_sequence_id: int
    schema_version: int | None
    producer_id: int
    client: ClientInfo
    on_lost: Callable[[ProducerHandle], None] | None
    encrypted: bool
    publish_rate: PublishRateLimiter

    def append(self, entry: EntryToAppend) -> asyncio.Future[AppendOutcome]:
        """Append one entry, after the deduplication and fencing checks this producer
        needs; resolves with its :class:`AppendOutcome`.

        Raises:
            DeliveryDelayNotAllowed: the topic's policy refuses the delay; nothing stored.
            MessageTooLarge: the entry exceeds the topic's ``maxMessageSize``; nothing
                stored.
        """

    def append_to_tick(
        self, entry: EntryToAppend
    ) -> tuple[asyncio.Future[list[AppendOutcome]], int]:
        """:meth:`append`, answered for the whole tick: the future of the outcomes of the
        entries this producer appends in this loop tick, in order, and this entry's index
        among them.

        Raises:
            DeliveryDelayNotAllowed, MessageTooLarge: as :meth:`append`.
        """


class Producer:
    """One producer attached to a topic on this gateway.

    Attributes:
        uid: fleet-unique identity of this attachment (``<gateway id>-p<n>``); the registry
            tells a reconnected producer of the same name from this one by it.
        topic_epoch: Pulsar's topic epoch granted with exclusive access (or the topic's
            current one for a Shared producer), None if the topic never had one.
        deduplication: whether appends go through the deduplication script.
        last_sequence_id: the highest stored sequence id of this producer name when it was
            created (PRODUCER_SUCCESS.last_sequence_id), -1 when unknown or dedup is off.
        schema_version: the topic schema version the producer registered, if any.
        delayed_delivery: the topic's effective delayed-delivery policy (kept current by
            the producer service when policies change).
        ready: resolves when a WaitForExclusive producer gets the topic (already resolved
            for the other modes); fails with ProducerFenced if it is fenced while waiting.
        on_lost: called when the gateway closes the producer itself (fenced, superseded by
            its own reconnection elsewhere, or its lease lost).
    """

    def __init__(
        self,
        topic: Topic,
        name: str,
        lane: Lane,
        metrics: GatewayMetrics,
        *,
        topic_meter: Meter,
        uid: str = "",
        access_mode: ProducerAccessMode = ProducerAccessMode.SHARED,
        epoch: int = 0,
        user_provided_name: bool = True,
        publish_buffer: PublishBuffer | None = None,
    ) -> None:
        self.topic = topic
        self.topic_name = topic.full_name
        self.name = name
        self.uid = uid
        self.access_mode = access_mode
        #: appends carry the fencing check (every mode but Shared)
        self._exclusive = access_mode is not ProducerAccessMode.SHARED
        self.epoch = epoch
        self.user_provided_name = user_provided_name
        self._lane = lane
        self._metrics = metrics
        self._keys = topic.keys
        self._rollover = topic.ledger_rollover
        self.topic_epoch: int | None = None
        self.deduplication = False
        self.last_sequence_id = -1
        self.schema_version: int | None = None
        self.delayed_delivery = DelayedDeliveryPolicy()
        #: the topic's ``maxMessageSize`` policy (0: none; the gateway's own limit is the
        #: adapters' frame limit)
        self.max_message_size = 0
        self.encrypted = False
        self.publish_rate = PublishRateLimiter()
        #: the event loop the producer was attached in, where its appends' futures live:
        #: asking for the running loop per append costs a getpid() system call on Python
        #: 3.11 (CPython's ``Modules/_asynciomodule.c``, ``get_running_loop``, compares the
        #: running loop's process id with it): about 0.2 µs, 2-3% of a compiled gateway's
        #: CPU per unbatched message
        self._loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[None] = self._loop.create_future()
        # A queued producer's client may be gone before its turn comes, and nobody awaits
        # the refusal then: reading it here keeps asyncio from logging it as unhandled.
        self.ready.add_done_callback(read_outcome)
        self.waiting = False
        self.on_lost: Callable[[ProducerHandle], None] | None = None
        self.closed = False
        #: stats (Pulsar ``PublisherStats``): this producer's meter, its topic's on this
        #: gateway, the adapter's producer id and what it knows of the client
        self.meter = Meter()
        self.topic_meter = topic_meter
        self.producer_id = 0
        self.client = ClientInfo()
        #: this tick's entries and their futures (None for those of append_to_tick), sent
        #: together at the end of the tick
        self._batch: list[tuple[bytes, str, int]] = []
        self._waiting: list[asyncio.Future[AppendOutcome] | None] = []
        #: the outcomes of this tick's entries, for append_to_tick (None until it is called)
        self._tick: asyncio.Future[list[AppendOutcome]] | None = None
        #: the gateway's publish buffer: entries count from their append until Redis answers
        self._buffer = publish_buffer or PublishBuffer(0)

    def _queue(
        self,
        blob: bytes,
        options: str,
        publish_time: int,
        fut: asyncio.Future[AppendOutcome] | None,
    ) -> None:
        """Queue an entry (blob, :func:`entry_options` and publish time) for this tick's
        append call, with its future (None: the tick's future answers it)."""
        if not self._batch:
            self._loop.call_soon(self._send_batch)
        self._batch.append((blob, options, publish_time))
        self._waiting.append(fut)

    def _send_batch(self) -> None:
        entries, waiting, tick = self._batch, self._waiting, self._tick
        self._batch, self._waiting, self._tick = [], [], None
        # the tick's entries count in the publish buffer until Redis answers their call
        size = sum([len(blob) for blob, _, _ in entries])
        self._buffer.acquire(size)
        reply = append_entries(self._lane, self._keys, rollover=self._rollover, entries=entries)
        # in the same pipeline, after the appends: every gateway's dispatchers wake
        self._lane.notify(self._keys.notify_channel)
        buffer = self._buffer

        def settle(done: asyncio.Future[list[AppendOutcome]]) -> None:
            buffer.release(size)
            _settle(waiting, tick, done)

        reply.add_done_callback(settle)

    def _appended(self, blob: bytes, num_messages: int) -> None:
        """Count the entry.

        Counted when sent, not when stored (Pulsar counts ``msgIn`` in the publish
        context's completion): no per-append callback on the hot path, at the price of
        counting a fenced or failed append too."""
        count_in(self._metrics, self.meter, self.topic_meter, num_messages, len(blob))

    def _check_size(self, blob: bytes, chunk: str | None) -> None:
        """The topic's ``maxMessageSize`` (``AbstractTopic.isExceedMaximumMessageSize``:
        chunks are exempt, as they are how a client sends a larger message).

        Raises:
            MessageTooLarge: the entry is larger; nothing stored.
        """
        if chunk is None and len(blob) > self.max_message_size:
            raise MessageTooLarge("Exceed maximum message size")

    def _deliver_at(self, publish_time: int, requested: int | None) -> int | None:
        """The entry's stored deliver-at time under the topic's policy, counted in the
        PIP-437 metrics.

        Raises:
            DeliveryDelayNotAllowed: the requested delay exceeds the policy's maximum.
        """
        policy = self.delayed_delivery
        if requested is None and not policy.fixed_delay_ms:
            return None  # nothing to refuse or to delay: the common case, no policy calls
        name = self.topic.name
        try:
            at = policy.deliver_at(publish_time, requested)
        except DeliveryDelayNotAllowed:
            self._metrics.delayed_rejected[name.namespace, str(name)] += 1
            raise
        if policy.overrides(requested):
            self._metrics.fixed_delay_overridden[name.namespace, str(name)] += 1
        return at

    def append(self, entry: EntryToAppend) -> asyncio.Future[AppendOutcome]:
        """Append one entry in this tick's call (atomically with the deduplication and
        fencing checks when the producer needs them); resolves with its outcome: stored
        at its position, a duplicate, or refused (fenced or terminated: the producer
        must close).

        Raises:
            DeliveryDelayNotAllowed: the topic's policy refuses the delay; nothing stored.
            MessageTooLarge: the entry exceeds the topic's ``maxMessageSize``; nothing stored.
        """
        options = self._options(entry)
        fut: asyncio.Future[AppendOutcome] = self._loop.create_future()
        self._queue(entry.blob, options, entry.publish_time, fut)
        self._appended(entry.blob, entry.num_messages)
        return fut

    def append_to_tick(
        self, entry: EntryToAppend
    ) -> tuple[asyncio.Future[list[AppendOutcome]], int]:
        """:meth:`append`, answered for the whole tick: the future of the outcomes of this
        tick's entries, in order, and this entry's index among them. One future per tick
        instead of one per entry: the binary adapter's SENDs, whose answers it writes in
        order from the head of a queue anyway, take no future each (a future's creation,
        result and reading cost about 0.25 µs an entry, interpreted).

        Raises:
            DeliveryDelayNotAllowed, MessageTooLarge: as :meth:`append`.
        """
        options = self._options(entry)
        tick = self._tick
        if tick is None:
            tick = self._tick = self._loop.create_future()
        index = len(self._batch)
        self._queue(entry.blob, options, entry.publish_time, None)
        self._appended(entry.blob, entry.num_messages)
        return tick, index

    def _options(self, entry: EntryToAppend) -> str:
        """The :func:`entry_options` of ``entry``, after the checks of :meth:`append`."""
        blob, num_messages, _, _, sticky_key, chunk, publish_time, requested = entry
        if self.max_message_size:
            self._check_size(blob, chunk)
        at = self._deliver_at(publish_time, requested)
        if self.deduplication or self._exclusive:
            options = self._checked_options(entry, at)
        elif num_messages == 1 and sticky_key is None and chunk is None and at is None:
            options = ""  # the common case: no options
        else:
            options = entry_options(
                num_messages=num_messages,
                key_hash=None if sticky_key is None else sticky_key_hash(sticky_key),
                deliver_at=at,
                chunk=chunk,
            )
        return options

    def _checked_options(self, entry: EntryToAppend, deliver_at: int | None) -> str:
        """The options of an entry with the deduplication (sequence id, the id to record,
        the producer's name) and fencing (the exclusive producer's topic epoch) checks."""
        dedup = self.deduplication
        sticky_key = entry.sticky_key
        return entry_options(
            num_messages=entry.num_messages,
            topic_epoch=self.topic_epoch if self._exclusive else None,
            sequence_id=entry.sequence_id if dedup else None,
            record=entry.record if dedup else None,
            key_hash=None if sticky_key is None else sticky_key_hash(sticky_key),
            deliver_at=deliver_at,
            chunk=entry.chunk,
            producer_name=self.name if dedup else None,
        )

    def lost(self) -> None:
        """The fleet took this producer's registration away; tell its owner."""
        if self.closed:
            return
        self.closed = True
        if self.on_lost is not None:
            self.on_lost(self)

    def close(self) -> None:
        self.closed = True
