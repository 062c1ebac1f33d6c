"""All Redis traffic of a gateway, gathered into one pipeline per event-loop tick.

Strategy (``shared/reference/redis-limits.md``): a Redis round trip costs 55-120 us here and
redis-py about 6 us per pipelined command, so awaiting one command per message caps a
gateway near 8k msg/s. Instead every producer, consumer and connection submits its commands
to :class:`Storage`, which queues them and, once per loop tick, sends everything queued as
one non-transactional pipeline. Only one pipeline is in flight at a time; commands submitted
meanwhile form the next. That single lane is what keeps a producer's appends in send order
(so receipts go out in order, as the client requires), and it batches naturally: the slower
Redis answers, the bigger the next pipeline.

Scripts are sent with ``EVALSHA``. When Redis answers ``NOSCRIPT`` (restart, ``SCRIPT
FLUSH``), the scripts are loaded and the refused commands are sent again, in order, before
any later command.

``notify(channel)`` asks for a ``PUBLISH`` on the channel after the current batch: producers
use it so consumers on every gateway wake up, once per topic per tick instead of once per
message.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.connection import Connection
from redis.exceptions import NoScriptError, RedisError, ResponseError

from gateway.errors import ServiceNotReady, StorageError
from gateway.scripts import SCRIPTS, Script

__all__ = ["Notifier", "Storage", "pack_commands"]

log = logging.getLogger(__name__)

#: Seconds a whole pipeline may take before the connection is considered dead.
PIPELINE_TIMEOUT = 30.0

_Command = tuple[tuple[Any, ...], "asyncio.Future[Any]", Script | None]


def _arg(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int):
        return b"%d" % value
    if isinstance(value, float):
        return repr(value).encode()
    return bytes(value)


def pack_commands(commands: Sequence[tuple[Any, ...]]) -> bytes:
    """Encode commands as RESP arrays of bulk strings, in one buffer."""
    out: list[bytes] = []
    append = out.append
    for args in commands:
        append(b"*%d\r\n" % len(args))
        for value in args:
            data = _arg(value)
            append(b"$%d\r\n" % len(data))
            append(data)
            append(b"\r\n")
    return b"".join(out)


class Storage:
    """Per-tick pipelining front of one Redis client."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._queue: list[_Command] = []
        self._notify: set[str] = set()
        self._in_flight = False
        self._scheduled = False
        self._closed = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._conn: Connection | None = None
        #: pipelines sent and commands carried, for metrics and the bench
        self.pipelines_sent = 0
        self.commands_sent = 0

    # -- submitting -------------------------------------------------------------------

    def call(self, *args: Any) -> asyncio.Future[Any]:
        """Queue one Redis command; the future resolves with its reply."""
        return self._submit(args, None)

    def eval(
        self, script: str, keys: Sequence[str | bytes], args: Sequence[Any]
    ) -> asyncio.Future[Any]:
        """Queue ``EVALSHA`` of the named script in ``gateway/lua``."""
        s = SCRIPTS[script]
        return self._submit(("EVALSHA", s.sha, len(keys), *keys, *args), s)

    def notify(self, channel: str) -> None:
        """Publish an empty message on ``channel`` after the commands queued so far."""
        self._notify.add(channel)
        self._schedule()

    def _submit(self, args: tuple[Any, ...], script: Script | None) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self._closed:
            fut.set_exception(ServiceNotReady("the gateway is shutting down"))
            return fut
        self._queue.append((args, fut, script))
        self._schedule()
        return fut

    def _schedule(self) -> None:
        if not self._scheduled and not self._in_flight:
            self._scheduled = True
            self._idle.clear()
            asyncio.get_running_loop().call_soon(self._start_flush)

    # -- flushing ---------------------------------------------------------------------

    def _start_flush(self) -> None:
        self._scheduled = False
        if not self._queue and not self._notify:
            self._idle.set()
            return
        batch, self._queue = self._queue, []
        channels, self._notify = self._notify, set()
        self._in_flight = True
        asyncio.get_running_loop().create_task(self._flush(batch, channels))

    async def _flush(self, batch: list[_Command], channels: set[str]) -> None:
        try:
            commands = [args for args, _, _ in batch]
            commands.extend(("PUBLISH", channel, b"") for channel in channels)
            try:
                replies = await self._execute(commands)
                replies = await self._retry_noscript(batch, replies)
            except (RedisError, TimeoutError) as exc:
                error = StorageError(f"Redis is unavailable: {exc!r}")
                for _, fut, _ in batch:
                    if not fut.done():
                        fut.set_exception(error)
                return
            for (_, fut, _), reply in zip(batch, replies, strict=False):
                if fut.done():
                    continue
                if isinstance(reply, Exception):
                    fut.set_exception(StorageError(str(reply)))
                else:
                    fut.set_result(reply)
        finally:
            self._in_flight = False
            if self._queue or self._notify:
                self._schedule()
            else:
                self._idle.set()

    async def _execute(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send ``commands`` as one pipeline on the lane's connection; replies in order,
        error replies as exception objects.

        redis-py's ``Pipeline`` costs about 6 us per command in Python (packing, response
        callbacks, one coroutine per reply). Here commands are packed to RESP in one pass
        and replies come raw from the hiredis parser, which is what the reference's
        "raw RESP" row measures. redis-py still owns connecting (URL, auth, TLS, unix
        sockets). No automatic retry: a pipeline that may have been applied is failed, not
        re-sent, so a connection error cannot append an entry twice.
        """
        conn = self._conn
        if conn is None:
            conn = self._conn = await self.redis.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        self.pipelines_sent += 1
        self.commands_sent += len(commands)
        try:
            # One deadline for the whole pipeline, not redis-py's per-reply socket timeout
            # (a timer created and cancelled for every reply).
            async with asyncio.timeout(PIPELINE_TIMEOUT):
                await conn.send_packed_command(pack_commands(commands), check_health=False)
                replies: list[Any] = []
                for _ in commands:
                    try:
                        replies.append(
                            await conn.read_response(disable_decoding=True, timeout=math.inf)
                        )
                    except ResponseError as exc:
                        replies.append(exc)
        except BaseException:
            self._conn = None
            await conn.disconnect(nowait=True)
            await self.redis.connection_pool.release(conn)
            raise
        return replies

    async def _retry_noscript(self, batch: list[_Command], replies: list[Any]) -> list[Any]:
        refused = [i for i, r in enumerate(replies[: len(batch)]) if isinstance(r, NoScriptError)]
        if not refused:
            return replies
        log.info("Redis lost the gateway's Lua scripts; loading them again")
        await self.load_scripts()
        again = await self._execute([batch[i][0] for i in refused])
        for i, reply in zip(refused, again, strict=True):
            replies[i] = reply
        return replies

    async def load_scripts(self) -> None:
        """``SCRIPT LOAD`` every script (start-up and the NOSCRIPT path)."""
        pipe = self.redis.pipeline(transaction=False)
        for script in SCRIPTS.values():
            pipe.script_load(script.source)
        await pipe.execute()

    async def drain(self) -> None:
        """Wait until everything submitted so far has been answered."""
        while not self._idle.is_set() or self._queue:
            await self._idle.wait()
            await asyncio.sleep(0)

    async def close(self) -> None:
        """Refuse new commands, finish queued ones, give the connection back."""
        await self.drain()
        self._closed = True
        if self._conn is not None:
            await self.redis.connection_pool.release(self._conn)
            self._conn = None


class Notifier:
    """Topic notifications over Redis Pub/Sub: "there is new work on this topic".

    A gateway subscribes to the channels of topics it has dispatchers for. Notifications
    are only hints: after a lost pub/sub connection every callback is called once, since
    messages sent meanwhile were missed, and dispatchers also poll slowly as a fallback.
    """

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._callbacks: dict[str, Callable[[], None]] = {}
        self._pubsub = redis.pubsub(ignore_subscribe_messages=True)
        self._task: asyncio.Task[None] | None = None
        self._changes: asyncio.Queue[tuple[bool, str]] = asyncio.Queue()
        self._stopping = False

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="notifier")

    def subscribe(self, channel: str, callback: Callable[[], None]) -> None:
        self._callbacks[channel] = callback
        self._changes.put_nowait((True, channel))

    def unsubscribe(self, channel: str) -> None:
        if self._callbacks.pop(channel, None) is not None:
            self._changes.put_nowait((False, channel))

    async def _apply_changes(self) -> None:
        while not self._changes.empty():
            add, channel = self._changes.get_nowait()
            if add and channel in self._callbacks:
                await self._pubsub.subscribe(channel)
                # Anything published before the SUBSCRIBE took effect was missed: wake the
                # channel's listener once, now that later notifications will arrive.
                wake = self._callbacks.get(channel)
                if wake is not None:
                    wake()
            elif not add and channel not in self._callbacks:
                await self._pubsub.unsubscribe(channel)

    async def _run(self) -> None:
        connected = False
        while not self._stopping:
            try:
                if not connected:
                    channels = list(self._callbacks)
                    if channels:
                        await self._pubsub.subscribe(*channels)
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
                    message = await self._pubsub.get_message(timeout=0)
            except asyncio.CancelledError:
                raise
            except RedisError as exc:
                if connected:
                    log.warning("pub/sub connection lost (%s); reconnecting", exc)
                connected = False
                await self._reset()
                await asyncio.sleep(0.2)

    async def _reset(self) -> None:
        try:
            await self._pubsub.aclose()  # type: ignore[no-untyped-call]
        except RedisError:
            pass
        self._pubsub = self._redis.pubsub(ignore_subscribe_messages=True)

    async def close(self) -> None:
        # A flag, not Task.cancel(): on Python 3.11 a cancel racing the expiry of the
        # asyncio.timeout inside redis-py's get_message(timeout=...) can be swallowed.
        self._stopping = True
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 5)
            except TimeoutError:
                self._task.cancel()
        await self._pubsub.aclose()  # type: ignore[no-untyped-call]
