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
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from pulsar_gateway.core.errors import StorageError
from pulsar_gateway.core.storage.connections import LaneConnection, direct_connection
from pulsar_gateway.core.storage.lane import pack_commands, read_replies_forever
from pulsar_gateway.core.storage.slots import has_hash_tag

__all__ = ["Notifier", "ShardRouter"]

log = logging.getLogger(__name__)

#: Seconds between two attempts to subscribe channels whose connection was lost.
RETRY_INTERVAL: Final = 0.2

#: channel -> (master address, client of that master); raises StorageError when no master
#: serves the channel's slot
ShardRouter = Callable[[str], tuple[tuple[str, int], Redis]]


class _Link:
    """One pub/sub connection and the channels subscribed on it.

    The connection is the lane's kind (:func:`.connections.direct_connection`): (un)subscribe
    commands are written when asked for, and messages are read straight from hiredis's
    reader and handled in the loop turn that read them, every buffered one at once.
    redis-py's ``PubSub.get_message`` costs a timeout and a stack of coroutines per call,
    and a wake-up took two calls; each lone notification is one wake-up of the gateway, so
    at low rates that is a cost per message (``docs/benchmarks.md``)."""

    def __init__(self, notifier: Notifier, redis: Redis, *, sharded: bool) -> None:
        self.notifier = notifier
        self.redis = redis
        self.sharded = sharded
        self._subscribe_command = "SSUBSCRIBE" if sharded else "SUBSCRIBE"
        self._unsubscribe_command = "SUNSUBSCRIBE" if sharded else "UNSUBSCRIBE"
        #: channels this connection should carry
        self.channels: set[str] = set()
        #: channels whose subscription Redis confirmed on the current connection
        self.active: set[str] = set()
        #: channels subscribed on the current connection (confirmed or not)
        self._written: set[str] = set()
        #: unsubscriptions asked for and not yet confirmed, by channel: a confirmation
        #: beyond these is Redis's own (the channel's slot moved)
        self._unsubscribing: Counter[str] = Counter()
        self._conn: LaneConnection | None = None
        self.task: asyncio.Task[None] | None = None
        self.closing = False

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name="notifier")

    def add(self, channel: str) -> None:
        """Carry ``channel``; subscribing again a channel already carried wakes its
        callback once more when Redis confirms."""
        self.channels.add(channel)
        if self._conn is not None:
            self._write_subscribe([channel])

    def remove(self, channel: str) -> None:
        self.channels.discard(channel)
        conn = self._conn
        if conn is not None and channel in self._written:
            self._written.discard(channel)
            self._unsubscribing[channel] += 1
            conn.write_now(pack_commands([(self._unsubscribe_command, channel)]))

    def _write_subscribe(self, channels: list[str]) -> None:
        conn = self._conn
        if conn is None:
            return
        self._written.update(channels)
        commands: list[tuple[str, ...]]
        if self.sharded:
            # SSUBSCRIBE takes channels of one slot only, and every topic has its own slot
            commands = [(self._subscribe_command, channel) for channel in channels]
        else:
            commands = [(self._subscribe_command, *channels)]
        conn.write_now(pack_commands(commands))  # False when lost: the reader reconnects

    def _handle(self, reply: Any) -> None:
        if isinstance(reply, Exception):  # refused (a moved slot's MOVED): start again
            raise reply
        kind, channel_bytes = reply[0], reply[1]
        channel = channel_bytes.decode()
        if kind == b"message" or kind == b"smessage":
            data = reply[2]
            if data != self.notifier.own_hint:  # else the lane woke this gateway already
                self.notifier._wake(channel)
            self.notifier._deliver(channel, data)
        elif kind == b"subscribe" or kind == b"ssubscribe":
            if channel in self.channels:
                self.active.add(channel)
                self.notifier._subscribed(channel)
                # Anything published before the subscription took effect was missed: wake
                # the channel's listener once, now that later notifications will arrive.
                self.notifier._wake(channel)
        elif kind == b"unsubscribe" or kind == b"sunsubscribe":
            if self._unsubscribing[channel] > 0:  # asked for
                self._unsubscribing[channel] -= 1
                if not self._unsubscribing[channel]:
                    del self._unsubscribing[channel]
                if channel not in self._written:
                    self.active.discard(channel)
            elif kind == b"sunsubscribe" and channel in self.channels:
                # Not asked for: the slot moved to another master (resharding, failover).
                self.channels.discard(channel)
                self.active.discard(channel)
                self._written.discard(channel)
                self.notifier._rehome([channel])

    async def _connect(self) -> LaneConnection:
        conn = direct_connection(self.redis.connection_pool)
        try:
            await conn.connect()  # type: ignore[no-untyped-call]
        except BaseException:
            await conn.disconnect(nowait=True)
            raise
        self._conn = conn
        self._written = set()
        self._unsubscribing = Counter()
        if self.channels:
            self._write_subscribe(sorted(self.channels))
        return conn

    async def _run(self) -> None:
        while not self.closing:
            try:
                conn = await self._connect()
                await read_replies_forever(conn, self._handle)
            except asyncio.CancelledError:
                raise
            except (RedisError, OSError) as exc:
                if self._conn is not None:
                    log.warning("pub/sub connection lost (%s); reconnecting", exc)
                await self._disconnect()
                if self.sharded:
                    # the master may be gone: subscribe again where the slot map says
                    self.closing = True
                    self.notifier._link_lost(self)
                    return
                self.redis = await self.notifier._live_node(self.redis)
                await asyncio.sleep(RETRY_INTERVAL)

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        self.active.clear()
        if conn is not None:
            await conn.disconnect(nowait=True)

    async def close(self) -> None:
        self.closing = True
        task = self.task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._disconnect()


class Notifier:
    """One gateway's pub/sub connections: hint channels (:meth:`subscribe`) and data
    channels (:meth:`listen`)."""

    def __init__(
        self,
        redis: Redis,
        candidates: Callable[[], Sequence[Redis]] | None = None,
        route: ShardRouter | None = None,
        refresh: Callable[[], Awaitable[None]] | None = None,
        own_hint: bytes | None = None,
    ) -> None:
        """``own_hint``: what this gateway's lane publishes as a hint (:attr:`.Lane.hint`);
        the lane wakes this gateway's listeners itself (:meth:`wake`), so such a hint coming
        back is dropped. On a Redis Cluster: ``candidates`` gives every master's client, one
        of which the plain connection moves to when its node is lost (a cluster passes
        ``PUBLISH`` to the subscribers of every node, so any node will do); ``route`` names
        the master of a sharded channel and ``refresh`` re-reads the slot map when a master
        is lost."""
        self.own_hint = own_hint
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

    def wake(self, channels: set[str]) -> None:
        """Wake this gateway's listeners of ``channels``: hints this gateway published, now
        applied (:attr:`.Lane.on_notified`)."""
        for channel in channels:
            self._wake(channel)

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
