"""Non-persistent producers: a SEND is a PUBLISH on the topic's channel, acknowledged at once.

Pulsar's ``NonPersistentTopic.publishMessage`` completes before dispatching; here the entry
(the client's blob, untouched, with its message count and an id) is published on the
topic's ``np`` channel and every gateway with consumers on the topic hands it to the ones
that should get it (:mod:`pulsar_gateway.core.consuming.non_persistent`).

Message ids: Pulsar sends ``(0, 0)`` for every non-persistent message; here an id is
``(ms, gateway-bits << 40 | counter)``: the publishing gateway's clock, 20 bits of its id and
a counter, so ids are distinct across the fleet in practice and the client accepts them.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
import time
import zlib
from collections.abc import Callable
from typing import Final

from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.rates import ClientInfo, Meter
from pulsar_gateway.core.futures import resolved
from pulsar_gateway.core.policies.rate_limits import PublishRateLimiter
from pulsar_gateway.core.producing.producer import EntryToAppend, ProducerHandle, count_in
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts.append import AppendOutcome, stored
from pulsar_gateway.core.topics.topic import Topic

__all__ = [
    "CHANNEL_HEADER",
    "NonPersistentIds",
    "NonPersistentProducer",
    "channel_message",
]

#: Channel message: ledger id, entry id, messages in the entry, then the stored blob.
CHANNEL_HEADER: Final = struct.Struct(">QQI")


def channel_message(ledger: int, entry: int, num_messages: int, blob: bytes) -> bytes:
    """The payload published on a non-persistent topic's channel."""
    return CHANNEL_HEADER.pack(ledger, entry, num_messages) + blob


class NonPersistentIds:
    """Message ids of one gateway's non-persistent messages."""

    def __init__(self, gateway_id: str) -> None:
        self._gateway_bits = (zlib.crc32(gateway_id.encode()) & 0xFFFFF) << 40
        self._counter = itertools.count()

    def next_id(self) -> tuple[int, int]:
        counter = next(self._counter) & ((1 << 40) - 1)
        return int(time.time() * 1000), self._gateway_bits | counter


class NonPersistentProducer:
    """A :class:`ProducerHandle` whose SEND publishes on the topic's channel.

    Nothing is registered with the fleet (Pulsar's non-persistent topics keep no producer
    names), deduplicated or fenced, so every append is a plain one.
    """

    def __init__(
        self,
        topic: Topic,
        name: str,
        lane: Lane,
        metrics: GatewayMetrics,
        ids: NonPersistentIds,
        *,
        topic_meter: Meter,
    ) -> None:
        self.topic = topic
        self.topic_name = topic.full_name
        self.name = name
        self.deduplication = False
        self.waiting = False
        self.encrypted = False
        self.publish_rate = PublishRateLimiter()
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.ready.set_result(None)
        self.topic_epoch: int | None = None
        self.last_sequence_id = -1
        self.schema_version: int | None = None
        self.producer_id = 0
        self.client = ClientInfo()
        self.on_lost: Callable[[ProducerHandle], None] | None = None
        self.meter = Meter()
        self.topic_meter = topic_meter
        self._lane = lane
        self._metrics = metrics
        self._ids = ids
        self._channel = topic.keys.non_persistent_channel

    def append(self, entry: EntryToAppend) -> asyncio.Future[AppendOutcome]:
        # Key_Shared is refused on non-persistent topics and chunking needs a persistent
        # one (the client refuses it), so the sticky key and chunk tag are unused. Nothing
        # is stored to hold back, so delivery times are ignored, as Pulsar's non-persistent
        # dispatchers do (they have no delayed-delivery tracker). Never deduplicated nor
        # fenced: every entry is taken.
        blob, num_messages = entry.blob, entry.num_messages
        ledger, entry_id = self._ids.next_id()
        self._lane.publish(self._channel, channel_message(ledger, entry_id, num_messages, blob))
        count_in(self._metrics, self.meter, self.topic_meter, num_messages, len(blob))
        return resolved(stored(ledger, entry_id))

    def append_to_tick(
        self, entry: EntryToAppend
    ) -> tuple[asyncio.Future[list[AppendOutcome]], int]:
        """:meth:`append`'s outcome as the only one of its tick (published at once)."""
        outcome = self.append(entry).result()
        return resolved([outcome]), 0

    def close(self) -> None:
        """Nothing to release: the producer is registered nowhere."""
