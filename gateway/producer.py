"""Producers: append entries to a topic's stream.

A Pulsar entry (a single message or a whole client batch) is stored as one stream entry,
untouched: the producer's blob (checksum, ``MessageMetadata``, payload, still compressed and
batched) in field ``m``, and the number of messages in field ``n`` when a batch holds more than one
(``CommandSend.num_messages``), which dispatch needs to count permits in messages.
The stream id the append returns is the message id (see :mod:`gateway.message_id`).

With deduplication on (:mod:`gateway.deduplication`) the append and the record of the
producer's highest sequence id are one script, which also checks, for an exclusive
producer, that no ExclusiveWithFencing producer took the topic meanwhile; a Shared
producer without deduplication appends with a plain ``XADD``, the hot path.

A producer's registration with the fleet (name, access mode, lease) is kept by
:mod:`gateway.producer_registry`; this object is one gateway's handle on it.

An entry asking for a delivery time is stored with the time the topic's delayed-delivery
policy gives it (field ``d``, :mod:`gateway.delayed_delivery`); one the policy refuses is
not stored, and :meth:`Producer.after_appends` lets the adapter answer the refusal in send
order, after the appends before it.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
from collections.abc import Callable
from typing import Any

from gateway.delayed_delivery import DelayedDeliveryPolicy, DeliveryDelayNotAllowed
from gateway.key_shared import sticky_key_hash
from gateway.metrics import GatewayMetrics
from gateway.rates import ClientInfo, Meter
from gateway.storage import Storage
from gateway.topic import Topic

__all__ = [
    "ENTRY_BLOB",
    "ENTRY_CHUNK",
    "ENTRY_DELIVER_AT",
    "ENTRY_KEY_HASH",
    "ENTRY_NUM_MESSAGES",
    "Producer",
    "ProducerAccessMode",
]

#: Stream entry field holding the stored blob.
ENTRY_BLOB = b"m"
#: Stream entry field holding the number of messages of a client batch (absent when 1).
ENTRY_NUM_MESSAGES = b"n"
#: Stream entry field holding the Key_Shared sticky-key hash (absent for keyless entries).
ENTRY_KEY_HASH = b"h"
#: Stream entry field of a chunk of a chunked message: ``"<chunk id>:<uuid>"``.
ENTRY_CHUNK = b"u"
#: Stream entry field of a delayed message: its deliver-at time, ms since epoch.
ENTRY_DELIVER_AT = b"d"

_names = itertools.count()


class ProducerAccessMode(enum.IntEnum):
    """``CommandProducer.producer_access_mode`` (PIP-68)."""

    SHARED = 0
    EXCLUSIVE = 1
    WAIT_FOR_EXCLUSIVE = 2
    EXCLUSIVE_WITH_FENCING = 3


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
            the broker when policies change).
        ready: resolves when a WaitForExclusive producer gets the topic (already resolved
            for the other modes); fails with ProducerFenced if it is fenced while waiting.
        on_lost: called when the gateway closes the producer itself (fenced, superseded by
            its own reconnection elsewhere, or its lease lost).
    """

    def __init__(
        self,
        topic: Topic,
        name: str,
        storage: Storage,
        metrics: GatewayMetrics,
        *,
        uid: str = "",
        access_mode: ProducerAccessMode = ProducerAccessMode.SHARED,
        epoch: int = 0,
        user_provided_name: bool = True,
    ) -> None:
        self.topic = topic
        self.name = name
        self.uid = uid
        self.access_mode = access_mode
        self.epoch = epoch
        self.user_provided_name = user_provided_name
        self._storage = storage
        self._metrics = metrics
        self._stream = topic.keys.stream
        self._sequence_ids = topic.keys.last_sequence_ids
        self.topic_epoch: int | None = None
        self.deduplication = False
        self.last_sequence_id = -1
        self.schema_version: int | None = None
        self.delayed_delivery = DelayedDeliveryPolicy()
        #: the last append, which a refusal is answered after
        self._last: asyncio.Future[Any] | None = None
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting = False
        self.on_lost: Callable[[Producer], None] | None = None
        self.closed = False
        #: stats (Pulsar ``PublisherStats``): this producer's meter, its topic's (given by
        #: the broker), the adapter's producer id and what it knows of the client
        self.meter = Meter()
        self.topic_meter = Meter()
        self.producer_id = 0
        self.client = ClientInfo()

    def _appended(self, blob: bytes, num_messages: int) -> None:
        """Wake the topic's dispatchers after this tick and count the entry."""
        self._storage.notify(self.topic.keys.notify_channel)
        self._count_in(blob, num_messages)

    def _count_in(self, blob: bytes, num_messages: int) -> None:
        size = len(blob)
        self._metrics.in_messages += num_messages
        self._metrics.in_bytes += size
        self.meter.add(num_messages, size)
        self.topic_meter.add(num_messages, size)

    @staticmethod
    def generate_name(cluster: str, gateway_id: str) -> str:
        """A fleet-unique producer name, in the shape of Java's ``<cluster>-<broker>-<n>``."""
        return f"{cluster}-{gateway_id}-{next(_names)}"

    def _deliver_at(self, publish_time: int, requested: int | None) -> int | None:
        """The entry's stored deliver-at time under the topic's policy, counted in the
        PIP-437 metrics.

        Raises:
            DeliveryDelayNotAllowed: the requested delay exceeds the policy's maximum.
        """
        policy = self.delayed_delivery
        name = self.topic.name
        try:
            at = policy.deliver_at(publish_time, requested)
        except DeliveryDelayNotAllowed:
            self._metrics.delayed_rejected[name.namespace, str(name)] += 1
            raise
        if policy.overrides(requested):
            self._metrics.fixed_delay_overridden[name.namespace, str(name)] += 1
        return at

    def after_appends(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once every append so far is answered, after the callbacks
        already waiting on them, so an answer it sends (a refusal) keeps send order. A
        callback added to a done future still waits its turn in the loop's queue."""
        last = self._last
        if last is None:
            callback()
        else:
            last.add_done_callback(lambda _: callback())

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
        """Append one entry; the future resolves with its stream id (``b"ms-seq"``).

        Args:
            blob: the stored form of the entry (see :mod:`gateway.producer`).
            num_messages: messages in the entry (1 unless it is a client batch).
            sticky_key: the entry's ordering key, else its partition key (a batch's is
                its first message's), for Key_Shared routing; None when it has none.
            chunk: ``"<chunk id>:<uuid>"`` for a chunk of a chunked message, so that a
                redelivery naming its last chunk brings back every chunk (``redeliver.lua``).
            publish_time: ``MessageMetadata.publish_time`` (ms).
            deliver_at: ``MessageMetadata.deliver_at_time``, None when not set.

        Raises:
            DeliveryDelayNotAllowed: the topic's policy refuses the delay; nothing stored.
        """
        at = self._deliver_at(publish_time, deliver_at)
        args: list[bytes | str | int] = ["XADD", self._stream, "*", ENTRY_BLOB, blob]
        if num_messages > 1:
            args += [ENTRY_NUM_MESSAGES, num_messages]
        if sticky_key is not None:
            args += [ENTRY_KEY_HASH, sticky_key_hash(sticky_key)]
        if chunk is not None:
            args += [ENTRY_CHUNK, chunk]
        if at is not None:
            args += [ENTRY_DELIVER_AT, at]
        fut = self._last = self._storage.call(*args)
        self._appended(blob, num_messages)
        return fut

    @property
    def checked(self) -> bool:
        """Whether appends must go through :meth:`publish_checked` (dedup or exclusive)."""
        return self.deduplication or self.access_mode is not ProducerAccessMode.SHARED

    def publish_checked(
        self,
        blob: bytes,
        num_messages: int,
        sequence_id: int,
        record: int | None,
        sticky_key: bytes | None = None,
        chunk: str | None = None,
        *,
        publish_time: int = 0,
        deliver_at: int | None = None,
    ) -> asyncio.Future[bytes | int | None]:
        """Append one entry after the deduplication and fencing checks, atomically.

        The future resolves with the stream id; None for a duplicate (nothing stored, the
        client gets a receipt anyway); 0 when an ExclusiveWithFencing producer took the
        topic from this exclusive producer (nothing stored, the producer must close).
        Raises DeliveryDelayNotAllowed as :meth:`publish` does.

        Args:
            blob: the stored form of the entry.
            num_messages: messages in the entry.
            sequence_id: ``CommandSend.sequence_id``.
            record: the highest sequence id to record for the producer, or None for a chunk
                that is not its message's last (see :func:`gateway.deduplication.to_record`).
            sticky_key, chunk, publish_time, deliver_at: as for :meth:`publish`.
        """
        at = self._deliver_at(publish_time, deliver_at)
        exclusive = self.access_mode is not ProducerAccessMode.SHARED
        fut: asyncio.Future[bytes | int | None] = self._storage.eval(
            "publish_checked",
            [self._stream, self._sequence_ids, self.topic.keys.topic_epoch],
            [
                blob,
                num_messages if num_messages > 1 else "",
                self.topic_epoch if exclusive and self.topic_epoch is not None else "",
                self.name if self.deduplication else "",
                sequence_id,
                "" if record is None else record,
                "" if sticky_key is None else sticky_key_hash(sticky_key),
                "" if chunk is None else chunk,
                "" if at is None else at,
            ],
        )
        self._last = fut
        self._appended(blob, num_messages)
        return fut

    def publish_message(
        self,
        blob: bytes,
        sequence_id: int,
        sticky_key: bytes | None = None,
        *,
        publish_time: int = 0,
        deliver_at: int | None = None,
    ) -> asyncio.Future[bytes | int | None]:
        """Append one whole message (not a client batch, not a chunk), as the adapters
        that build entries themselves do (WebSocket, REST): through :meth:`publish_checked`,
        recording ``sequence_id``, when deduplication or exclusive access needs it, else
        :meth:`publish`. Resolves as :meth:`publish_checked` does."""
        if self.checked:
            return self.publish_checked(
                blob,
                1,
                sequence_id,
                sequence_id if self.deduplication else None,
                sticky_key,
                publish_time=publish_time,
                deliver_at=deliver_at,
            )
        return self.publish(  # type: ignore[return-value]
            blob, 1, sticky_key, publish_time=publish_time, deliver_at=deliver_at
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
