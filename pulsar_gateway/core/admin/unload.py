"""Unloading a topic, a namespace or a bundle, on every gateway of the fleet.

In Pulsar an unload (``PersistentTopicsBase.internalUnloadTopic``,
``NamespaceService.unloadNamespaceBundle``) closes the topic on its owning broker: its
producers get CLOSE_PRODUCER and its consumers CLOSE_CONSUMER, and the clients look the
topic up again and reconnect, carrying on without loss (unacked messages are delivered
again). Here every gateway serves every topic, so an unload must reach the whole fleet: it
is appended to one stream (``P:unloads``, a few hundred bytes each, capped) and announced on
a channel; each gateway reads the entries after the last one it applied and closes its own
producers and consumers of what was unloaded. A gateway that missed the announcement (its
pub/sub connection was away) finds the entries at its next periodic look.

Only clients that reconnect by themselves are closed (binary-protocol ones): a WebSocket
session is, in Pulsar, served by the proxy's own client, which reconnects unseen; here
the session's producer and consumer stay as they are.

A terminated topic travels the same way (an entry with ``kind`` ``terminated``): every
gateway closes its producers of the topic, whatever their front end (their next attach is
refused), and tells its consumers that have read everything (``PersistentTopic.terminate``
disconnects the producers and tells the subscriptions).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

from pulsar_gateway.core.consuming.subscription_service import SubscriptionService
from pulsar_gateway.core.errors import GatewayError
from pulsar_gateway.core.model.topic_name import PARTITION_SUFFIX
from pulsar_gateway.core.periodic import Periodic
from pulsar_gateway.core.producing.producer_service import ProducerService
from pulsar_gateway.core.storage import fleet_store
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.notifier import Notifier

__all__ = ["UnloadService", "in_scope"]

log = logging.getLogger(__name__)

#: Unloads kept in the stream (approximately): far more than a gateway can miss between two
#: periodic looks.
KEPT: Final = 1000
#: Seconds between two looks at the stream when no announcement came.
LOOK_INTERVAL: Final = 2.0
#: An entry's kind: clients to close (an unload), or a topic terminated.
UNLOAD: Final = "unload"
TERMINATED: Final = "terminated"


def in_scope(scope: str, topic: str) -> bool:
    """Whether ``topic`` (a full topic name, maybe a partition) is unloaded by ``scope``: a
    full topic name (a partitioned topic's covers its partitions) or "tenant/namespace"."""
    if "://" in scope:
        return topic == scope or topic.startswith(f"{scope}{PARTITION_SUFFIX}")
    _, _, rest = topic.partition("://")
    return rest.startswith(f"{scope}/") and rest.count("/") == scope.count("/") + 1


class UnloadService:
    """Asks the fleet to unload, and applies what the fleet asked on this gateway."""

    def __init__(
        self,
        lane: Lane,
        notifier: Notifier,
        keys: KeySchema,
        producers: ProducerService,
        subscriptions: SubscriptionService,
    ) -> None:
        self._lane = lane
        self._notifier = notifier
        self._keys = keys
        self._producers = producers
        self._subscriptions = subscriptions
        #: the id of the last entry applied (b"" until the start-up read)
        self._applied: bytes = b""
        #: one reader at a time: a caller waits for the one before it, then reads on from
        #: where it stopped (so an unload is applied here before the request is answered)
        self._reading = asyncio.Lock()
        self._tasks: set[asyncio.Task[int]] = set()
        self._looks = Periodic("unload check", LOOK_INTERVAL, self.apply)

    async def start(self) -> None:
        """Take the newest entry as applied (older unloads were for clients gone since),
        then follow the announcements."""
        newest = await fleet_store.newest_unload(self._lane, self._keys)
        self._applied = newest if newest is not None else b"0-0"
        self._notifier.subscribe(self._keys.unloads_channel, self._announced)
        self._looks.start()

    async def stop(self) -> None:
        await self._looks.stop()
        for task in list(self._tasks):
            task.cancel()

    async def unload(self, scope: str) -> int:
        """Unload ``scope`` (a full topic name or "tenant/namespace") on every gateway;
        returns how many producers and consumers this gateway closed (the others close
        theirs as the announcement reaches them)."""
        return await self._announce(scope, UNLOAD)

    async def terminated(self, topic: str) -> int:
        """Tell every gateway that ``topic`` (a full topic name) was terminated; returns how
        many producers this gateway closed."""
        return await self._announce(topic, TERMINATED)

    async def _announce(self, scope: str, kind: str) -> int:
        await fleet_store.announce_unload(self._lane, self._keys, scope=scope, kind=kind, kept=KEPT)
        self._lane.notify(self._keys.unloads_channel)
        return await self.apply()

    def _announced(self) -> None:
        if self._applied:
            task = asyncio.get_running_loop().create_task(self.apply())
            self._tasks.add(task)
            task.add_done_callback(self._applied_once)

    def _applied_once(self, task: asyncio.Task[int]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and isinstance(task.exception(), GatewayError):
            log.warning("reading unloads failed (%s); the next look retries", task.exception())

    async def apply(self) -> int:
        """Apply the unloads appended since the last one applied (also called periodically,
        for an announcement this gateway missed); returns how many clients were closed."""
        closed = 0
        async with self._reading:
            entries = await fleet_store.unloads_after(self._lane, self._keys, self._applied)
            for entry_id, fields in entries:
                scope, kind = _field(fields, b"scope"), _field(fields, b"kind")
                if kind == TERMINATED:
                    closed += await self._terminated(scope)
                else:
                    closed += await self._close(scope)
                self._applied = entry_id
        return closed

    async def _terminated(self, topic: str) -> int:
        def matches(name: str) -> bool:
            return in_scope(topic, name)

        self._subscriptions.topic_terminated(matches)
        return await self._producers.disconnect_all(matches)

    async def _close(self, scope: str) -> int:
        def matches(topic: str) -> bool:
            return in_scope(scope, topic)

        closed = await self._producers.unload(matches)
        closed += await self._subscriptions.unload(matches)
        if closed:
            log.info("unloaded %s: %d producers and consumers closed here", scope, closed)
        return closed


def _field(fields: Any, name: bytes) -> str:
    """One field of a stream entry (a flat list or a dict, as the client decodes it); ""
    when absent."""
    if isinstance(fields, dict):
        value = fields.get(name, b"")
    else:
        pairs = dict(zip(fields[::2], fields[1::2], strict=True))
        value = pairs.get(name, b"")
    return value.decode() if isinstance(value, bytes) else str(value)
