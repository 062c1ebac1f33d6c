"""All Redis traffic of a gateway, gathered into one pipeline per event-loop tick.

Strategy (docs/benchmarks.md "Raw Redis on this machine"): a Redis round trip costs 55-120 us
here and redis-py about 6 us per pipelined command, so awaiting one command per message caps a
gateway near 8k msg/s. Instead every producer, consumer and connection submits its commands to
:class:`Lane`, which queues them and, once per loop tick, writes everything queued as one
pipeline on its single dedicated connection, without waiting for the previous pipeline's
replies; one reader resolves replies in order. Redis runs one connection's commands in the order
written, so a producer's appends stay in send order (receipts go out in order, as the client
requires) and a consumer's release always follows its dispatches, while the gateway packs the
next pipeline as Redis executes the last one. Commands are packed to RESP here and replies read
raw with the hiredis parser: redis-py's ``Pipeline`` costs about 6 us per command, which this
lane avoids (redis-py still connects: URL, auth, TLS, unix sockets). Nothing is retried on a
connection error: a pipeline that may have been applied is failed, never re-sent, so an append
cannot happen twice.

Scripts are sent with ``EVALSHA``. When Redis answers ``NOSCRIPT`` (restart, ``SCRIPT
FLUSH``), the scripts are loaded on another connection and the refused calls are queued
ahead of everything not yet sent.

``notify(channel)`` asks for a ``PUBLISH`` on the channel after the current batch: producers
use it so consumers on every gateway wake up, once per topic per tick instead of once per
message. On a Redis Cluster a topic's channels are sharded (``SPUBLISH``, :mod:`.notifier`).
The message published is the lane's ``hint`` (a token unique to the gateway process): the
listeners on this
gateway are woken by the lane itself (``on_notified``) as soon as the pipeline is answered,
one pub/sub hop and one loop wake-up sooner, and the notifier drops the message when it
comes back.

Replica acknowledgements (``--redis-replica-acks N``). Redis replicates asynchronously: a
master killed right after answering may take its last writes with it, and its promoted
replica never had them. With ``N`` > 0 every pipeline that writes ends with one ``WAIT N
timeout`` (after its commands, before its ``PUBLISH`` hints), and the pipeline's replies are
handed out only once ``WAIT`` has answered, so a receipt, a REST or WebSocket ack, or an ack
receipt leaves the gateway only after ``N`` replicas hold the write. When fewer than ``N``
confirm in time, the pipeline's writes are failed as a lost connection fails them: applied
on the master, maybe not on a failover, so not acknowledged (the client resends; with
deduplication the resend is recognised). Reads of the pipeline are answered as usual.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import hiredis
from mypy_extensions import mypyc_attr
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError, ResponseError

try:  # what redis-py's hiredis parser returns when no whole reply is buffered
    from redis._parsers.hiredis import NOT_ENOUGH_DATA as _NOT_ENOUGH_DATA
except ImportError:  # pragma: no cover - another redis-py layout: the public path
    _NOT_ENOUGH_DATA = None

from pulsar_gateway.core.errors import ServiceNotReady, StorageError
from pulsar_gateway.core.gate import Gate
from pulsar_gateway.core.storage.connections import LaneConnection, direct_connection
from pulsar_gateway.core.storage.scripts import SCRIPTS, Script
from pulsar_gateway.core.storage.slots import has_hash_tag, is_read_only

__all__ = [
    "Lane",
    "QueuedCommand",
    "ReplicaAcks",
    "pack_commands",
    "read_replies_forever",
]

log = logging.getLogger(__name__)

#: Seconds a pipeline may go unanswered after it was written before the connection is
#: considered dead.
PIPELINE_TIMEOUT = 30.0
#: Pipelines written and not yet answered, at most; beyond it commands wait in the queue.
MAX_PIPELINES_IN_FLIGHT = 16
#: Commands queued and not yet written, at which the lane's ``backlog`` gate closes: Redis
#: is behind (MAX_PIPELINES_IN_FLIGHT unanswered) or away, and the front ends stop reading
#: their clients until the queue is down to half. Appends count once per producer and tick,
#: and their bytes are bounded by the publish buffer, so this counts calls, not bytes.
MAX_QUEUED_COMMANDS = 10_000
#: Seconds the health check waits for Redis's PONG before it says Redis is unavailable
#: (a stopped Redis accepts connections and never answers).
PING_TIMEOUT = 2.0
#: Seconds a connection attempt may take before it counts as failed.
CONNECT_TIMEOUT = 10.0
#: Back-off between connection attempts after a failed one: doubles from RECONNECT_MIN up
#: to RECONNECT_MAX seconds, and starts again from nothing once a connection is opened.
RECONNECT_MIN = 0.05
RECONNECT_MAX = 2.0

#: (arguments, future or None for fire-and-forget PUBLISH, script for NOSCRIPT handling,
#: decoder of the reply)
QueuedCommand = tuple[
    tuple[Any, ...],
    "asyncio.Future[Any] | None",
    Script | None,
    Callable[[Any], Any] | None,
]


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


#: The RESP encoding of recently packed strings (command names, keys, script hashes): every
#: append repeats its command name and stream key, so each is encoded once. Cleared when
#: it outgrows _ENCODED_MAX, and only strings up to _ENCODED_LONGEST characters are kept
#: (a client may name a topic with 300,000 characters), so it stays within a few MiB.
_encoded: dict[str, bytes] = {}
_ENCODED_MAX = 20_000
_ENCODED_LONGEST = 256


def _bulk(value: Any) -> bytes:
    data = _arg(value)
    return b"$%d\r\n%b\r\n" % (len(data), data)


def pack_commands(commands: Sequence[tuple[Any, ...]]) -> bytes:
    """Encode commands as RESP arrays of bulk strings, in one buffer."""
    out: list[bytes] = []
    append = out.append
    encoded = _encoded
    for args in commands:
        append(b"*%d\r\n" % len(args))
        for value in args:
            if type(value) is str:
                bulk = encoded.get(value)
                if bulk is None:
                    bulk = _bulk(value)
                    if len(value) <= _ENCODED_LONGEST:
                        if len(encoded) >= _ENCODED_MAX:
                            encoded.clear()
                        encoded[value] = bulk
                append(bulk)
            elif type(value) is bytes:
                if len(value) < 4096:  # one piece; a large value is not copied twice
                    append(b"$%d\r\n%b\r\n" % (len(value), value))
                else:
                    append(b"$%d\r\n" % len(value))
                    append(value)
                    append(b"\r\n")
            else:
                append(_bulk(value))
    return b"".join(out)


def _direct_reader(
    conn: LaneConnection,
) -> tuple[Callable[[bool], Any], Callable[[], Awaitable[Any]]] | None:
    """hiredis's ``gets`` and the parser's socket read of ``conn``, when its parser is
    hiredis's (always, with the gateway's dependencies); None otherwise.

    Replies taken from the reader directly, reading the socket only when no whole reply is
    buffered, skip redis-py's ``read_response``: three coroutines, a timeout and push
    checks per reply (about 1 µs of the lane's 6 per command)."""
    parser = conn._parser
    reader = getattr(parser, "_reader", None)
    read_more = getattr(parser, "read_from_socket", None)
    if _NOT_ENOUGH_DATA is None or not isinstance(reader, hiredis.Reader) or read_more is None:
        return None
    return reader.gets, read_more


async def _read_replies_of(conn: LaneConnection, count: int) -> list[Any]:
    """The next ``count`` replies on ``conn``, raw; an error reply is its ResponseError.
    The lane's connection speaks RESP2 and subscribes to nothing, so no push message can
    come."""
    direct = _direct_reader(conn)
    if direct is None:
        return [await _read_one(conn) for _ in range(count)]
    gets, read_more = direct
    replies: list[Any] = []
    append = replies.append
    while len(replies) < count:
        reply = gets(False)
        if reply is _NOT_ENOUGH_DATA:
            await read_more()  # raises ConnectionError at EOF
        elif isinstance(reply, RedisConnectionError):
            raise reply
        else:
            append(reply)
    return replies


async def read_replies_forever(conn: LaneConnection, handle: Callable[[Any], None]) -> None:
    """Call ``handle`` with each reply of ``conn`` as it arrives (raw, an error reply as
    its ResponseError), every reply already buffered in the same loop turn, until the
    connection fails (ConnectionError): how the notifier reads its pub/sub messages."""
    direct = _direct_reader(conn)
    if direct is None:
        while True:
            handle(await _read_one(conn))
    gets, read_more = direct
    while True:
        reply = gets(False)
        if reply is _NOT_ENOUGH_DATA:
            await read_more()
        elif isinstance(reply, RedisConnectionError):
            raise reply
        else:
            handle(reply)


async def _read_one(conn: LaneConnection) -> Any:
    try:
        return await conn.read_response(disable_decoding=True, timeout=math.inf)
    except ResponseError as exc:
        return exc


class _Pipeline(NamedTuple):
    """A pipeline written and not yet answered."""

    commands: list[QueuedCommand]
    #: the channels it notifies (told to ``on_notified`` once it is answered)
    notified: set[str]
    #: the loop time it was written at
    sent_at: float


def _resolve(fut: asyncio.Future[Any], decode: Callable[[Any], Any], reply: Any) -> None:
    try:
        value = decode(reply)
    except Exception as exc:  # a reply the script contract does not allow: a bug, surfaced
        fut.set_exception(exc)
    else:
        fut.set_result(value)


@dataclass(frozen=True, slots=True)
class ReplicaAcks:
    """How many replicas must confirm a pipeline's writes (``WAIT replicas timeout_ms``)
    before its replies are handed out."""

    replicas: int
    timeout_ms: int

    @property
    def command(self) -> tuple[str, int, int]:
        return ("WAIT", self.replicas, self.timeout_ms)


#: Commands a lane is asked to queue, told to :attr:`Lane.audit` (a command's arguments and
#: its script, or None).
Audit = Callable[[tuple[Any, ...], Script | None], None]


# Interpreted subclasses allowed: the unit tests' in-memory lane derives from this class.
# Compiled with mypyc (setup.py), a class refuses interpreted subclasses unless it allows
# them ("interpreted classes cannot inherit from compiled"), and then its compiled callers
# reach their overrides (mypyc's docs, "Native classes": "Inheritance"). ClusterLane is
# compiled with it; the cost for the lane's own instances is small (mypyc's
# analysis/attrdefined.py: its attributes are not known always defined, so reads check).
@mypyc_attr(allow_interpreted_subclasses=True)
class Lane:
    """Per-tick pipelining front of one Redis client, on one dedicated connection."""

    def __init__(
        self,
        redis: Redis,
        replica_acks: ReplicaAcks | None = None,
        *,
        sharded_pubsub: bool = False,
        on_error: Callable[[str, int], None] | None = None,
        hint: bytes = b"",
    ) -> None:
        """``sharded_pubsub``: publish on a topic's channels (those with a hash tag) with
        ``SPUBLISH``, as a Redis Cluster wants (:mod:`.notifier`). ``hint``: the message
        :meth:`notify` publishes. ``on_error(kind, n)``:
        told of ``n`` commands failed by Redis trouble, ``kind`` ``"unavailable"`` (no
        connection, or lost with the command in flight) or ``"unconfirmed"`` (replicas did
        not confirm in time), for the gateway's metrics."""
        self.redis = redis
        self.on_error = on_error
        self.sharded_pubsub = sharded_pubsub
        self.hint = hint
        self.replica_acks = replica_acks if replica_acks and replica_acks.replicas > 0 else None
        #: the WAIT command ending a writing pipeline, one object: found by identity. A
        #: tuple of any length to mypyc (setup.py), which keeps a fixed-length tuple type
        #: as a value and boxes it afresh wherever it becomes an object, so that identity
        #: would be lost (mypyc's docs, "Using type annotations": "Value and heap types")
        self._wait: tuple[Any, ...] | None = (
            self.replica_acks.command if self.replica_acks else None
        )
        self._queue: list[QueuedCommand] = []
        #: closed while MAX_QUEUED_COMMANDS or more wait to be written, until half are left
        #: (the front ends hold their clients back meanwhile: docs/operations.md)
        self.backlog = Gate("storage queue")
        #: calls refused with NOSCRIPT, in the order they were first sent; sent before _queue
        self._retry: list[QueuedCommand] = []
        self._notify: set[str] = set()
        self._in_flight: deque[_Pipeline] = deque()
        #: fails the connection when the oldest pipeline in flight is not answered within
        #: PIPELINE_TIMEOUT; one timer for the lane, not a timeout per pipeline (an
        #: ``asyncio.timeout`` per pipeline read cost ~6% of the gateway's CPU when each
        #: round carries one or two messages)
        self._watchdog: asyncio.TimerHandle | None = None
        self._timed_out = False
        self._conn: LaneConnection | None = None
        self._connecting: asyncio.Task[None] | None = None
        #: seconds to wait before the next connection attempt (0: the last one worked)
        self._reconnect_delay = 0.0
        self._reader: asyncio.Task[None] | None = None
        self._scheduled = False
        self._closed = False
        #: the event loop of the lane's connection, found on first use: asking for the
        #: running loop per command costs a getpid() system call on Python 3.11
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        #: pipelines written so far (tests check that a tick's commands share one), and
        #: pipelines answered or failed since
        self.pipelines_sent = 0
        self.pipelines_answered = 0
        #: given an error reply before it fails its command: True when it took the command
        #: over (a Redis Cluster's redirections, :mod:`.cluster_lane`)
        self.on_refused: Callable[[QueuedCommand, Exception], bool] | None = None
        #: told when the connection is lost or cannot be opened (a Redis Cluster reads its
        #: slot map again: the master may have failed over, :mod:`.cluster_lane`)
        self.on_lost: Callable[[], None] | None = None
        #: given the channels a pipeline notified once it is answered (or failed): the
        #: notifier wakes this gateway's listeners of them (:meth:`.Notifier.wake`)
        self.on_notified: Callable[[set[str]], None] | None = None
        #: told of every command before it is queued: the tests check that each would
        #: suit a Redis Cluster (tests/conftest.py); an attribute rather than a method
        #: the tests replace, as a compiled build's instances have no ``__dict__``
        self.audit: Audit | None = None

    # -- submitting -------------------------------------------------------------------

    def call(self, *args: Any, decode: Callable[[Any], Any] | None = None) -> asyncio.Future[Any]:
        """Queue one Redis command; the future resolves with its raw reply, passed through
        ``decode`` when given (the typed commands of :mod:`.commands`)."""
        return self._submit(args, None, decode)

    def eval(
        self,
        script: Script,
        keys: Sequence[str | bytes],
        args: Sequence[Any],
        decode: Callable[[Any], Any] | None = None,
    ) -> asyncio.Future[Any]:
        """Queue ``EVALSHA`` of ``script``; the future resolves with its reply, passed
        through ``decode`` when given (the typed calls of :mod:`.scripts`)."""
        return self._submit(("EVALSHA", script.sha, len(keys), *keys, *args), script, decode)

    async def ping(self) -> None:
        """Check that Redis answers, on a connection of its own (the health check must not
        wait behind a long pipeline).

        Raises:
            StorageError: Redis did not answer.
        """
        try:
            async with asyncio.timeout(PING_TIMEOUT):
                await self.redis.ping()
        except TimeoutError:
            raise StorageError(f"Redis did not answer within {PING_TIMEOUT:g} s") from None
        except (RedisError, OSError) as exc:
            raise StorageError(f"Redis is unavailable: {exc}") from exc

    def notify(self, channel: str) -> None:
        """Publish the lane's hint on ``channel`` after the commands queued so far, and
        tell ``on_notified`` once they are applied."""
        self._notify.add(channel)
        self._schedule()

    def publish(self, channel: str, message: bytes) -> asyncio.Future[Any]:
        """Queue a publish of ``message`` on ``channel``; resolves with the number of
        subscribers that got it (on a cluster: of the shard's nodes, or of the node)."""
        return self._submit((self._publish_command(channel), channel, message), None, None)

    def _publish_command(self, channel: str) -> str:
        return "SPUBLISH" if self.sharded_pubsub and has_hash_tag(channel) else "PUBLISH"

    def _submit(
        self,
        args: tuple[Any, ...],
        script: Script | None,
        decode: Callable[[Any], Any] | None,
    ) -> asyncio.Future[Any]:
        if self.audit is not None:
            self.audit(args, script)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        if self._closed:
            fut.set_exception(ServiceNotReady("the gateway is shutting down"))
            return fut
        queue = self._queue
        queue.append((args, fut, script, decode))
        if len(queue) >= MAX_QUEUED_COMMANDS:
            self._check_backlog()
        self._schedule()
        return fut

    def requeue(self, command: QueuedCommand) -> None:
        """Queue a command taken over from another lane (its future unchanged)."""
        if self._closed:
            self._fail([command], ServiceNotReady("the gateway is shutting down"))
            return
        self._queue.append(command)
        if len(self._queue) >= MAX_QUEUED_COMMANDS:
            self._check_backlog()
        self._schedule()

    @property
    def queued(self) -> int:
        """Commands waiting to be written (metrics)."""
        return len(self._queue) + len(self._retry)

    def _check_backlog(self) -> None:
        """Close the backlog gate when MAX_QUEUED_COMMANDS wait and cannot be written now
        (MAX_PIPELINES_IN_FLIGHT unanswered, or no connection): a long queue the next
        flush takes at once is no sign that Redis is behind."""
        if self.queued >= MAX_QUEUED_COMMANDS and (
            self._conn is None or len(self._in_flight) >= MAX_PIPELINES_IN_FLIGHT
        ):
            self.backlog.close()

    def _queue_taken(self) -> None:
        if not self.backlog.is_open and self.queued <= MAX_QUEUED_COMMANDS // 2:
            self.backlog.open()

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self._idle.clear()
            (self._loop or asyncio.get_running_loop()).call_soon(self._flush)

    def flush_now(self) -> None:
        """Send what is queued now rather than at the end of this loop tick: lets Redis
        work on a request while the caller does CPU work on the previous reply."""
        if self._scheduled:
            self._flush()

    # -- sending ----------------------------------------------------------------------

    def _flush(self) -> None:
        """Write everything queued as one pipeline, without waiting for earlier replies."""
        self._scheduled = False
        if not self._queue and not self._notify and not self._retry:
            self._check_idle()
            return
        conn = self._conn
        if conn is None:
            if self._connecting is None:
                self._connecting = asyncio.get_running_loop().create_task(self._connect())
            self._check_backlog()
            return
        if len(self._in_flight) >= MAX_PIPELINES_IN_FLIGHT:
            self._check_backlog()
            return  # the reader schedules a flush as replies come back
        batch, self._retry, self._queue = self._retry + self._queue, [], []
        self._queue_taken()
        if self._wait is not None and any(not is_read_only(cmd[0], cmd[2]) for cmd in batch):
            batch.append((self._wait, None, None, None))
        notified = self._notify
        for channel in notified:
            batch.append(((self._publish_command(channel), channel, self.hint), None, None, None))
        self._notify = set()
        loop = self._loop or asyncio.get_running_loop()
        sent_at = loop.time()
        self._in_flight.append(_Pipeline(batch, notified, sent_at))
        if self._watchdog is None:
            self._watchdog = loop.call_at(sent_at + PIPELINE_TIMEOUT, self._check_answered)
        self.pipelines_sent += 1
        # The write is synchronous: bytes go to the socket now and the next tick's pipeline
        # can follow before Redis has answered this one.
        if not conn.write_now(pack_commands([command[0] for command in batch])):
            # disconnected under us: the reader fails what was in flight
            self._drop_connection(conn, StorageError("Redis connection lost"))
            return
        if self._reader is None:
            self._reader = loop.create_task(self._read_replies(conn))

    def _check_answered(self) -> None:
        """The watchdog: fail the connection if the oldest pipeline in flight has waited
        PIPELINE_TIMEOUT, else look again when it will have."""
        self._watchdog = None
        if not self._in_flight:
            return  # the next pipeline written starts the watchdog again
        loop = self._loop or asyncio.get_running_loop()
        due = self._in_flight[0].sent_at + PIPELINE_TIMEOUT
        if loop.time() < due:
            self._watchdog = loop.call_at(due, self._check_answered)
        elif self._reader is not None:
            self._timed_out = True  # the reader fails the connection as it stops
            self._reader.cancel()

    async def _connect(self) -> None:
        """Open the lane's connection, after the back-off a failed attempt left. Any
        failure (not only Redis's and the socket's: a TLS or credentials error, a bug)
        fails what is queued and doubles the back-off, so a Redis that stays away costs
        one attempt per RECONNECT_MAX seconds, not a loop of them."""
        conn: LaneConnection | None = None
        try:
            if self._reconnect_delay:
                await asyncio.sleep(self._reconnect_delay)
            conn = direct_connection(self.redis.connection_pool)
            # a Redis that accepts TCP but never answers (stopped) must not hold the
            # connection attempt, and everything queued behind it, forever
            async with asyncio.timeout(CONNECT_TIMEOUT):
                await conn.connect()  # type: ignore[no-untyped-call]
        except Exception as exc:
            if conn is not None:
                asyncio.get_running_loop().create_task(self._release(conn))
            self._connect_failed(exc)
        else:
            self._conn = conn
            if self._reconnect_delay:
                log.info("Redis is reachable again")
                self._reconnect_delay = 0.0
        finally:
            self._connecting = None
            self._schedule()

    def _connect_failed(self, exc: Exception) -> None:
        if not self._reconnect_delay:
            log.warning(
                "Redis is unreachable (%r); reconnecting with back-off up to %.1f s",
                exc,
                RECONNECT_MAX,
            )
        self._reconnect_delay = min(RECONNECT_MAX, max(RECONNECT_MIN, 2 * self._reconnect_delay))
        self._fail(self._take_queue(), StorageError(f"Redis is unavailable: {exc!r}"))
        self._lost()

    def _take_queue(self) -> list[QueuedCommand]:
        batch, self._retry, self._queue = self._retry + self._queue, [], []
        self._notify = set()
        self._queue_taken()
        return batch

    # -- receiving --------------------------------------------------------------------

    async def _read_replies(self, conn: LaneConnection) -> None:
        """Resolve in-flight pipelines in order, as Redis answers them."""
        try:
            while self._in_flight:
                batch, notified, _ = self._in_flight[0]
                replies = await _read_replies_of(conn, len(batch))
                self._in_flight.popleft()
                self.pipelines_answered += 1
                if self._queue or self._notify or self._retry:
                    self._schedule()
                refused: list[QueuedCommand] = []
                unconfirmed = self._unconfirmed(batch, replies)
                take_over = self.on_refused
                for command, reply in zip(batch, replies, strict=True):
                    args, fut, script, decode = command
                    if isinstance(reply, NoScriptError):
                        refused.append(command)
                        continue
                    if fut is None or fut.done():
                        continue
                    if unconfirmed is not None and not is_read_only(args, script):
                        fut.set_exception(StorageError(unconfirmed))
                        self._count_error("unconfirmed", 1)
                    elif isinstance(reply, Exception):
                        if take_over is not None and take_over(command, reply):
                            continue
                        error = StorageError(str(reply))
                        error.__cause__ = reply  # the Redis error (a cluster's MOVED, ASK)
                        fut.set_exception(error)
                    elif decode is None:
                        fut.set_result(reply)
                    else:
                        _resolve(fut, decode, reply)
                if notified and self.on_notified is not None:
                    self.on_notified(notified)
                if refused:
                    # Everything Redis answered is resolved above; the refused calls are
                    # this reader's alone now (the pipeline left _in_flight), so a reload
                    # that fails must fail them here or nobody would.
                    try:
                        await self._resend_after_script_load(refused)
                    except BaseException as exc:
                        self._fail(refused, self._failure(exc))
                        raise
        except (RedisError, OSError) as lost:
            self._drop_connection(conn, StorageError(f"Redis is unavailable: {lost!r}"))
        except BaseException as exc:
            if not (self._timed_out and isinstance(exc, asyncio.CancelledError)):
                self._drop_connection(conn, ServiceNotReady("the gateway is shutting down"))
                raise
            # cancelled by the watchdog (this task is the lane's own): the connection is dead
            self._timed_out = False
            self._drop_connection(
                conn,
                StorageError(f"Redis is unavailable: no reply within {PIPELINE_TIMEOUT} s"),
            )
        finally:
            self._reader = None
            if self._in_flight and self._conn is conn:
                self._reader = asyncio.get_running_loop().create_task(self._read_replies(conn))
            self._check_idle()

    def _failure(self, exc: BaseException) -> Exception:
        """What commands fail with when the reader stops on ``exc``: shutdown for a
        cancellation (but the watchdog's), else Redis trouble."""
        if isinstance(exc, asyncio.CancelledError) and not self._timed_out:
            return ServiceNotReady("the gateway is shutting down")
        return StorageError(f"Redis is unavailable: {exc!r}")

    def _unconfirmed(self, batch: list[QueuedCommand], replies: list[Any]) -> str | None:
        """Why the batch's writes fail when its ``WAIT`` fell short, else None."""
        if self.replica_acks is None:
            return None
        for (args, _, _, _), reply in zip(batch, replies, strict=True):
            if args is not self._wait:
                continue
            confirmed = reply if isinstance(reply, int) else -1
            if confirmed >= self.replica_acks.replicas:
                return None
            return (
                f"the write reached {max(confirmed, 0)} of {self.replica_acks.replicas} "
                f"Redis replicas within {self.replica_acks.timeout_ms} ms; it may not "
                "survive a failover"
            )
        return None

    async def _resend_after_script_load(self, refused: list[QueuedCommand]) -> None:
        """Redis lost the scripts (restart, SCRIPT FLUSH): load them on another connection
        and send the refused calls again ahead of anything not yet sent. Script calls in
        later pipelines already sent were refused too and join the retry list after these,
        so retries keep their original order."""
        log.info("Redis lost the gateway's Lua scripts; loading them again")
        await self.load_scripts()
        self._retry.extend(refused)
        self._schedule()

    def _drop_connection(self, conn: LaneConnection, error: Exception) -> None:
        if self._conn is conn:
            self._conn = None
        pending = [cmd for pipeline in self._in_flight for cmd in pipeline.commands]
        notified = set().union(*(pipeline.notified for pipeline in self._in_flight))
        self.pipelines_answered += len(self._in_flight)
        self._in_flight.clear()
        self._fail(pending, error)
        if notified and self.on_notified is not None:
            # maybe applied, maybe not: a listener woken for nothing finds nothing
            self.on_notified(notified)
        asyncio.get_running_loop().create_task(self._release(conn))
        if isinstance(error, StorageError):
            self._lost()

    def _lost(self) -> None:
        if self.on_lost is not None and not self._closed:
            self.on_lost()

    async def _release(self, conn: LaneConnection) -> None:
        await conn.disconnect(nowait=True)

    def _fail(self, commands: list[QueuedCommand], error: Exception) -> None:
        failed = 0
        for _, fut, _, _ in commands:
            if fut is not None and not fut.done():
                # one instance each: a raised exception carries its own traceback
                fut.set_exception(type(error)(*error.args))
                failed += 1
        if failed and isinstance(error, StorageError):
            self._count_error("unavailable", failed)

    def _count_error(self, kind: str, count: int) -> None:
        if self.on_error is not None:
            self.on_error(kind, count)

    def _check_idle(self) -> None:
        if (
            not self._queue
            and not self._retry
            and not self._notify
            and not self._in_flight
            and not self._scheduled
            and self._connecting is None
        ):
            self._idle.set()

    # -- lifecycle --------------------------------------------------------------------

    async def load_scripts(self) -> None:
        """``SCRIPT LOAD`` every script (start-up and the NOSCRIPT path)."""
        pipe = self.redis.pipeline(transaction=False)
        for script in SCRIPTS.values():
            pipe.script_load(script.source)
        await pipe.execute()

    async def replicas(self) -> int:
        """How many replicas the Redis master has now (``INFO replication``)."""
        info = await self.redis.info("replication")
        return int(info.get("connected_slaves", 0))

    async def check_replicas(self) -> None:
        """Warn at start when replica acknowledgements ask for more replicas than Redis has:
        every write would then fail after the timeout."""
        if self.replica_acks is None:
            return
        have = await self.replicas()
        if have < self.replica_acks.replicas:
            log.warning(
                "--redis-replica-acks %d but the Redis master has %d replica(s): writes fail "
                "until enough replicas connect",
                self.replica_acks.replicas,
                have,
            )

    async def drain(self) -> None:
        """Wait until everything submitted so far has been answered."""
        while not self._idle.is_set():
            await self._idle.wait()
            await asyncio.sleep(0)

    async def close(self) -> None:
        """Refuse new commands, finish queued ones, give the connection back."""
        await self.drain()
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if self._conn is not None:
            await self._conn.disconnect()
            self._conn = None
