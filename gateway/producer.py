"""Producers: append entries to a topic's stream.

A Pulsar entry (a single message or a whole client batch) is stored as one stream entry,
untouched: the producer's blob (checksum, ``MessageMetadata``, payload, still compressed and
batched) in field ``m``, and the number of messages in field ``n`` when a batch holds more than one
(``CommandSend.num_messages``), which dispatch needs to count permits in messages.
The stream id the append returns is the message id (see :mod:`gateway.message_id`).
"""

from __future__ import annotations

import asyncio
import itertools

from gateway.key_shared import sticky_key_hash
from gateway.metrics import GatewayMetrics
from gateway.storage import Storage
from gateway.topic import Topic

__all__ = ["ENTRY_BLOB", "ENTRY_KEY_HASH", "ENTRY_NUM_MESSAGES", "Producer"]

#: Stream entry field holding the stored blob.
ENTRY_BLOB = b"m"
#: Stream entry field holding the number of messages of a client batch (absent when 1).
ENTRY_NUM_MESSAGES = b"n"
#: Stream entry field holding the Key_Shared sticky-key hash (absent for keyless entries).
ENTRY_KEY_HASH = b"h"

_names = itertools.count()


class Producer:
    """One producer attached to a topic on this gateway."""

    def __init__(self, topic: Topic, name: str, storage: Storage, metrics: GatewayMetrics) -> None:
        self.topic = topic
        self.name = name
        self._storage = storage
        self._metrics = metrics
        self._stream = topic.keys.stream
        self.closed = False

    @staticmethod
    def generate_name(cluster: str, gateway_id: str) -> str:
        """A fleet-unique producer name, in the shape of Java's ``<cluster>-<broker>-<n>``."""
        return f"{cluster}-{gateway_id}-{next(_names)}"

    def publish(
        self, blob: bytes, num_messages: int, sticky_key: bytes | None = None
    ) -> asyncio.Future[bytes]:
        """Append one entry; the future resolves with its stream id (``b"ms-seq"``).

        Args:
            blob: the stored form of the entry (see :mod:`gateway.producer`).
            num_messages: messages in the entry (1 unless it is a client batch).
            sticky_key: the entry's ordering key, else its partition key (a batch's is
                its first message's), for Key_Shared routing; None when it has none.
        """
        args: list[bytes | str | int] = ["XADD", self._stream, "*", ENTRY_BLOB, blob]
        if num_messages > 1:
            args += [ENTRY_NUM_MESSAGES, num_messages]
        if sticky_key is not None:
            args += [ENTRY_KEY_HASH, sticky_key_hash(sticky_key)]
        fut = self._storage.call(*args)
        self._storage.notify(self.topic.keys.notify_channel)
        self._metrics.in_messages += num_messages
        self._metrics.in_bytes += len(blob)
        return fut

    def close(self) -> None:
        self.closed = True
