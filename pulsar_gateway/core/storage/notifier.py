"""Topic notifications over Redis Pub/Sub: "there is new work on this topic".

A gateway subscribes to the channels of topics it has dispatchers for (and to the policies
and producer-event channels). Notifications are only hints: after a lost pub/sub connection
every callback is called once, since messages sent meanwhile were missed, and dispatchers
also poll slowly as a fallback. Publishing goes through the lane (:meth:`.Lane.notify`), so
a notification follows the commands of its tick.

The same connections carry the channels whose messages are data, not hints: a
non-persistent topic's messages (:meth:`Notifier.listen`). What is published there while
a connection is down is lost, as non-persistent delivery allows.

On a Redis Cluster a plain ``PUBLISH`` is broadcast over the cluster bus to every node, so
its cost grows with the cluster. A topic's channels carry the topic's hash tag and use
sharded pub/sub instead (``SSUBSCRIBE``/``SPUBLISH``, Redis 7): the message stays within the
shard (master and replicas) serving the topic's slot. The notifier therefore keeps one
connection per master for the sharded channels of its slots (``route`` names the master of a
channel), and one plain connection for the fleet-wide channels (policies), which moves to a
live node when its node is lost. When a master is lost, or a slot moves (Redis then
``SUNSUBSCRIBE``s its channels' subscribers), the channels are subscribed again where the
slot map now says, and their callbacks are called once. On one Redis (6.2 or later) every
channel is plain.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from pulsar_gateway.core.errors import StorageError
from pulsar_gateway.core.storage.slots import has_hash_tag

__all__ = ["Notifier", "ShardRouter"]

log = logging.getLogger(__name__)

#: Seconds between two attempts to subscribe channels whose connection was lost.
RETRY_INTERVAL: Final = 0.2

#: channel -> (master address, client of that master); raises StorageError when no master
#: serves the channel's slot
ShardRouter = Callable[[str], tuple[tuple[str, int], Redis]]


class _Link:
    """One pub/sub connection and the channels subscribed on it."""

    def __init__(self, notifier: Notifier, redis: Redis, *, sharded: bool) -> None:
        self.notifier = notifier
        self.redis = redis
        self.sharded = sharded
        #: channels this connection should carry
        self.channels: set[str] = set()
        #: channels whose subscription took effect on the current connection
        self.active: set[str] = set()
        self.changes: asyncio.Queue[tuple[bool, str]] = asyncio.Queue()
        self.pubsub = redis.pubsub()
        self.task: asyncio.Task[None] | None = None
        self.closing = False

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name="notifier")

    def add(self, channel: str) -> None:
        self.channels.add(channel)
        self.changes.put_nowait((True, channel))

    def remove(self, channel: str) -> None:
        self.channels.discard(channel)
        self.changes.put_nowait((False, channel))

    async def _subscribe(self, *channels: str) -> None:
        if not self.sharded:
            await self.pubsub.subscribe(*channels)
            return
        # SSUBSCRIBE takes channels of one slot only, and every topic has its own slot
        for channel in channels:
            await self.pubsub.ssubscribe(channel)

    def _unsubscribe(self, channel: str) -> Awaitable[Any]:
        if self.sharded:
            return self.pubsub.sunsubscribe(channel)
        return self.pubsub.unsubscribe(channel)

    def _took_effect(self, channel: str) -> None:
        self.active.add(channel)
        self.notifier._subscribed(channel)

    async def _apply_changes(self) -> None:
        while not self.changes.empty():
            add, channel = self.changes.get_nowait()
            if add and channel in self.channels:
                await self._subscribe(channel)
                self._took_effect(channel)
                # Anything published before the subscription took effect was missed: wake
                # the channel's listener once, now that later notifications will arrive.
                self.notifier._wake(channel)
            elif not add and channel not in self.channels and channel in self.active:
                self.active.discard(channel)
                await self._unsubscribe(channel)

    def _handle(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        kind = kind.decode() if isinstance(kind, bytes) else kind
        channel = message["channel"]
        channel = channel.decode() if isinstance(channel, bytes) else channel
        if kind in ("message", "smessage"):
            self.notifier._wake(channel)
            self.notifier._deliver(channel, message["data"])
        elif kind == "sunsubscribe" and channel in self.channels and channel in self.active:
            # Not asked for: the slot moved to another master (resharding, failover).
            self.channels.discard(channel)
            self.active.discard(channel)
            self.notifier._rehome([channel])

    async def _run(self) -> None:
        connected = False
        while not self.closing:
            try:
                if not connected:
                    channels = list(self.channels)
                    if channels:
                        await self._subscribe(*channels)
                    for channel in channels:
                        self._took_effect(channel)
                    connected = True
                    for channel in channels:
                        self.notifier._wake(channel)
                await self._apply_changes()
                if not self.pubsub.subscribed:
                    await asyncio.sleep(0.01)
                    continue
                message = await self.pubsub.get_message(timeout=0.05)
                while message is not None:
                    self._handle(message)
                    message = await self.pubsub.get_message(timeout=0)
            except asyncio.CancelledError:
                raise
            except (RedisError, OSError) as exc:
                if connected:
                    log.warning("pub/sub connection lost (%s); reconnecting", exc)
                connected = False
                self.active.clear()
                await self._close_pubsub()
                if self.sharded:
                    # the master may be gone: subscribe again where the slot map says
                    self.closing = True
                    self.notifier._link_lost(self)
                    return
                self.redis = await self.notifier._live_node(self.redis)
                self.pubsub = self.redis.pubsub()
                await asyncio.sleep(RETRY_INTERVAL)

    async def _close_pubsub(self) -> None:
        try:
            await self.pubsub.aclose()  # type: ignore[no-untyped-call]
        except (RedisError, OSError):
            pass

    async def close(self) -> None:
        # A flag, not Task.cancel(): on Python 3.11 a cancel racing the expiry of the
        # asyncio.timeout inside redis-py's get_message(timeout=...) can be swallowed.
        self.closing = True
        if self.task is not None and self.task is not asyncio.current_task():
            try:
                await asyncio.wait_for(asyncio.shield(self.task), 5)
            except TimeoutError:
                self.task.cancel()
        await self._close_pubsub()


class Notifier:
    """One gateway's pub/sub connections: hint channels (:meth:`subscribe`) and data
    channels (:meth:`listen`)."""

    def __init__(
        self,
        redis: Redis,
        candidates: Callable[[], Sequence[Redis]] | None = None,
        route: ShardRouter | None = None,
        refresh: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """On a Redis Cluster: ``candidates`` gives every master's client, one of which the
        plain connection moves to when its node is lost (a cluster passes ``PUBLISH`` to
        the subscribers of every node, so any node will do); ``route`` names the master of
        a sharded channel and ``refresh`` re-reads the slot map when a master is lost."""
        self._candidates = candidates
        self._route = route
        self._refresh = refresh
        self._callbacks: dict[str, Callable[[], None]] = {}
        self._listeners: dict[str, Callable[[bytes], None]] = {}
        #: listen() calls waiting for their subscription to take effect, by channel
        self._listening: dict[str, list[asyncio.Future[None]]] = {}
        self._plain = _Link(self, redis, sharded=False)
        #: sharded connections by master address
        self._shards: dict[tuple[str, int], _Link] = {}
        #: the connection carrying each channel
        self._link_of: dict[str, _Link] = {}
        #: sharded channels waiting for a master to subscribe on
        self._homeless: set[str] = set()
        self._rehoming: asyncio.Task[None] | None = None
        self._started = False
        self._stopping = False

    async def start(self) -> None:
        self._started = True
        self._plain.start()
        for link in self._shards.values():
            link.start()
        if self._homeless:
            self._rehome([])

    def subscribe(self, channel: str, callback: Callable[[], None]) -> None:
        """Call ``callback`` on every hint published on ``channel`` (and once after the
        subscription takes effect or the connection comes back)."""
        self._callbacks[channel] = callback
        self._carry(channel)

    def unsubscribe(self, channel: str) -> None:
        if self._callbacks.pop(channel, None) is not None:
            self._drop(channel)

    async def listen(self, channel: str, on_message: Callable[[bytes], None]) -> None:
        """Call ``on_message`` with every message published on ``channel`` from now on:
        returns once the subscription is in effect, so nothing published after it is
        missed (a non-persistent consumer is told it is subscribed only then)."""
        self._listeners[channel] = on_message
        link = self._link_of.get(channel)
        if link is not None and channel in link.active:
            return
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._listening.setdefault(channel, []).append(ready)
        self._carry(channel)
        await ready

    def unlisten(self, channel: str) -> None:
        if self._listeners.pop(channel, None) is not None:
            self._drop(channel)

    # -- which connection carries a channel -------------------------------------------

    def _wanted(self, channel: str) -> bool:
        return channel in self._callbacks or channel in self._listeners

    def _carry(self, channel: str) -> None:
        if channel in self._link_of or channel in self._homeless:
            link = self._link_of.get(channel)
            if link is not None:
                link.add(channel)  # a re-subscribe: wakes the callback once more
            return
        if self._route is None or not has_hash_tag(channel):
            self._attach(channel, self._plain)
            return
        try:
            address, client = self._route(channel)
        except StorageError:
            self._homeless.add(channel)
            self._rehome([])
            return
        link = self._shards.get(address)
        if link is None:
            link = self._shards[address] = _Link(self, client, sharded=True)
            if self._started:
                link.start()
        self._attach(channel, link)

    def _attach(self, channel: str, link: _Link) -> None:
        self._link_of[channel] = link
        link.add(channel)

    def _drop(self, channel: str) -> None:
        if self._wanted(channel):
            return
        self._homeless.discard(channel)
        link = self._link_of.pop(channel, None)
        if link is not None:
            link.remove(channel)

    def _link_lost(self, link: _Link) -> None:
        """A master's sharded connection failed: its channels look for their master."""
        for address, known in list(self._shards.items()):
            if known is link:
                del self._shards[address]
        channels = [c for c, carrier in self._link_of.items() if carrier is link]
        self._rehome(channels)

    def _rehome(self, channels: list[str]) -> None:
        for channel in channels:
            if self._link_of.get(channel) is not None:
                del self._link_of[channel]
            if self._wanted(channel):
                self._homeless.add(channel)
        if self._rehoming is None and self._homeless and self._started and not self._stopping:
            self._rehoming = asyncio.get_running_loop().create_task(self._rehome_soon())

    async def _rehome_soon(self) -> None:
        try:
            while self._homeless and not self._stopping:
                await asyncio.sleep(RETRY_INTERVAL)
                if self._refresh is not None:
                    try:
                        await self._refresh()
                    except StorageError as exc:
                        log.warning("cannot read the Redis Cluster slot map: %s", exc)
                        continue
                waiting, self._homeless = self._homeless, set()
                for channel in waiting:
                    if self._wanted(channel):
                        self._carry(channel)
        finally:
            self._rehoming = None

    # -- called by the connections ----------------------------------------------------

    def _subscribed(self, channel: str) -> None:
        for ready in self._listening.pop(channel, ()):
            if not ready.done():
                ready.set_result(None)

    def _wake(self, channel: str) -> None:
        wake = self._callbacks.get(channel)
        if wake is not None:
            wake()

    def _deliver(self, channel: str, data: bytes) -> None:
        listener = self._listeners.get(channel)
        if listener is not None:
            listener(data)

    async def _live_node(self, current: Redis) -> Redis:
        """The current node if it answers, else the first cluster node that does."""
        if self._candidates is None:
            return current
        for client in [current, *self._candidates()]:
            try:
                await client.ping()
            except (RedisError, OSError):
                continue
            return client
        return current

    async def close(self) -> None:
        self._stopping = True
        for waiting in self._listening.values():
            for ready in waiting:
                ready.cancel()
        self._listening.clear()
        if self._rehoming is not None:
            self._rehoming.cancel()
        for link in [self._plain, *self._shards.values()]:
            await link.close()
