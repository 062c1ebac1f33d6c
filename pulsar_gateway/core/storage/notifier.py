"""Topic notifications over Redis Pub/Sub: "there is new work on this topic".

A gateway subscribes to the channels of topics it has dispatchers for (and to the policies
and producer-event channels). Notifications are only hints: after a lost pub/sub connection
every callback is called once, since messages sent meanwhile were missed, and dispatchers
also poll slowly as a fallback. Publishing goes through the lane (:meth:`.Lane.notify`), so
a notification follows the commands of its tick.

The same connection carries the channels whose messages are data, not hints: a
non-persistent topic's messages (:meth:`Notifier.listen`). What is published there while
the connection is down is lost, as non-persistent delivery allows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from redis.asyncio import Redis
from redis.exceptions import RedisError

__all__ = ["Notifier"]

log = logging.getLogger(__name__)


class Notifier:
    """One gateway's pub/sub connection: hint channels (:meth:`subscribe`) and data
    channels (:meth:`listen`)."""

    def __init__(
        self, redis: Redis, candidates: Callable[[], Sequence[Redis]] | None = None
    ) -> None:
        """``candidates``: on a Redis Cluster, every node's client, one of which the
        connection moves to when its node is lost (a cluster passes ``PUBLISH`` to the
        subscribers of every node, so any node will do)."""
        self._redis = redis
        self._candidates = candidates
        self._callbacks: dict[str, Callable[[], None]] = {}
        self._listeners: dict[str, Callable[[bytes], None]] = {}
        #: listen() calls waiting for their SUBSCRIBE to take effect, by channel
        self._listening: dict[str, list[asyncio.Future[None]]] = {}
        #: channels whose SUBSCRIBE took effect on the current connection
        self._active: set[str] = set()
        self._pubsub = redis.pubsub(ignore_subscribe_messages=True)
        self._task: asyncio.Task[None] | None = None
        self._changes: asyncio.Queue[tuple[bool, str]] = asyncio.Queue()
        self._stopping = False

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="notifier")

    def subscribe(self, channel: str, callback: Callable[[], None]) -> None:
        """Call ``callback`` on every hint published on ``channel`` (and once after the
        subscription takes effect or the connection comes back)."""
        self._callbacks[channel] = callback
        self._changes.put_nowait((True, channel))

    def unsubscribe(self, channel: str) -> None:
        if self._callbacks.pop(channel, None) is not None:
            self._changes.put_nowait((False, channel))

    async def listen(self, channel: str, on_message: Callable[[bytes], None]) -> None:
        """Call ``on_message`` with every message published on ``channel`` from now on:
        returns once the subscription is in effect, so nothing published after it is
        missed (a non-persistent consumer is told it is subscribed only then)."""
        self._listeners[channel] = on_message
        if channel in self._active:
            return
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._listening.setdefault(channel, []).append(ready)
        self._changes.put_nowait((True, channel))
        await ready

    def _subscribed(self, channel: str) -> None:
        self._active.add(channel)
        for ready in self._listening.pop(channel, ()):
            if not ready.done():
                ready.set_result(None)

    def unlisten(self, channel: str) -> None:
        if self._listeners.pop(channel, None) is not None:
            self._changes.put_nowait((False, channel))

    def _channels(self) -> set[str]:
        return set(self._callbacks) | set(self._listeners)

    async def _apply_changes(self) -> None:
        while not self._changes.empty():
            add, channel = self._changes.get_nowait()
            wanted = channel in self._callbacks or channel in self._listeners
            if add and wanted:
                await self._pubsub.subscribe(channel)
                self._subscribed(channel)
                # Anything published before the SUBSCRIBE took effect was missed: wake the
                # channel's listener once, now that later notifications will arrive.
                wake = self._callbacks.get(channel)
                if wake is not None:
                    wake()
            elif not add and not wanted:
                self._active.discard(channel)
                await self._pubsub.unsubscribe(channel)

    async def _run(self) -> None:
        connected = False
        while not self._stopping:
            try:
                if not connected:
                    channels = list(self._channels())
                    if channels:
                        await self._pubsub.subscribe(*channels)
                    for channel in channels:
                        self._subscribed(channel)
                    connected = True
                    for callback in list(self._callbacks.values()):
                        callback()
                await self._apply_changes()
                if not self._pubsub.subscribed:
                    await asyncio.sleep(0.01)
                    continue
                message = await self._pubsub.get_message(timeout=0.05)
                while message is not None:
                    channel = message["channel"]
                    if isinstance(channel, bytes):
                        channel = channel.decode()
                    wake = self._callbacks.get(channel)
                    if wake is not None:
                        wake()
                    listener = self._listeners.get(channel)
                    if listener is not None:
                        listener(message["data"])
                    message = await self._pubsub.get_message(timeout=0)
            except asyncio.CancelledError:
                raise
            except RedisError as exc:
                if connected:
                    log.warning("pub/sub connection lost (%s); reconnecting", exc)
                connected = False
                self._active.clear()
                await self._reset()
                await asyncio.sleep(0.2)

    async def _reset(self) -> None:
        try:
            await self._pubsub.aclose()  # type: ignore[no-untyped-call]
        except RedisError:
            pass
        if self._candidates is not None:
            self._redis = await self._live_node()
        self._pubsub = self._redis.pubsub(ignore_subscribe_messages=True)

    async def _live_node(self) -> Redis:
        """The current node if it answers, else the first cluster node that does."""
        assert self._candidates is not None
        for client in [self._redis, *self._candidates()]:
            try:
                await client.ping()
            except (RedisError, OSError):
                continue
            return client
        return self._redis

    async def close(self) -> None:
        # A flag, not Task.cancel(): on Python 3.11 a cancel racing the expiry of the
        # asyncio.timeout inside redis-py's get_message(timeout=...) can be swallowed.
        self._stopping = True
        for waiting in self._listening.values():
            for ready in waiting:
                ready.cancel()
        self._listening.clear()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 5)
            except TimeoutError:
                self._task.cancel()
        await self._pubsub.aclose()  # type: ignore[no-untyped-call]
