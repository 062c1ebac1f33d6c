"""The storage lane on a Redis Cluster: one pipelined :class:`Lane` per master, commands
routed by slot.

Every command the gateway sends names keys of one slot (:mod:`.slots`; the tests check all
of them), so routing a command is looking its slot up in the slot map (``CLUSTER SLOTS``)
and queueing it on that master's lane, which keeps the per-tick pipelining of a single
Redis. Commands of one topic partition share a hash tag, hence a master and a lane, so they
run in the order they were sent, as on one node; a topic's notification goes through the
same lane, after its appends, as a sharded ``SPUBLISH`` that stays within the topic's shard
(:mod:`.notifier` subscribes on the master :meth:`ClusterLane.shard_of` names).

Redirections. A command answered ``MOVED`` (the slot has a new master: failover, resharding)
or ``ASK`` (the slot is being migrated) was not applied, so it is sent again where Redis
says, after ``ASKING`` for ``ASK``, and a ``MOVED`` refreshes the slot map. Nor was one
answered ``TRYAGAIN`` (a multi-key script while its slot migrates, its keys split between
the two masters) or ``CLUSTERDOWN`` (a failover in progress): the slot's commands are held,
in the order they were submitted, and sent again every 50 ms for up to 10 s. A command whose
fate is unknown (the connection to a master was lost mid-pipeline) is failed, never re-sent,
exactly as on one node. A master's lane that loses its connection, or cannot open one, has
the slot map read again every half second until the map no longer names that master (its
replica was promoted) or it answers again (restarted): the gateway may have nothing else
that would notice the failover (no ``MOVED`` comes from a dead node), and new commands must
go to the replica the cluster promotes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from redis.asyncio import ConnectionPool, Redis
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.exceptions import AskError, ClusterDownError, MovedError, TryAgainError

from pulsar_gateway.core.errors import ServiceNotReady, StorageError
from pulsar_gateway.core.storage.lane import Lane, QueuedCommand, ReplicaAcks
from pulsar_gateway.core.storage.scripts import Script
from pulsar_gateway.core.storage.slots import first_key

__all__ = ["ClusterLane", "is_cluster"]

log = logging.getLogger(__name__)

#: How many redirections one command may follow before it fails.
MAX_REDIRECTS: Final = 5
#: Seconds between two slot-map refreshes caused by lost connections.
REFRESH_INTERVAL: Final = 0.5
#: Seconds before commands refused with TRYAGAIN or CLUSTERDOWN are sent again, and how
#: long after its submission a command may still be sent again.
HOLD_RETRY: Final = 0.05
HOLD_SECONDS: Final = 10.0


#: Entries of the slot cache before it is emptied (a key's slot never changes).
SLOT_CACHE_SIZE: Final = 65_536


@dataclass(slots=True)
class _Hold:
    """A slot's commands waiting to be sent again, in submission order: those Redis refused
    (TRYAGAIN, CLUSTERDOWN), then those submitted since."""

    refused: list[QueuedCommand] = field(default_factory=list)
    waiting: list[QueuedCommand] = field(default_factory=list)
    #: each lane's pipelines sent when the hold began: every command of the slot sent
    #: before it has been answered (and, if refused, held) once these are answered
    marks: dict[Lane, int] = field(default_factory=dict)


async def is_cluster(redis: Redis) -> bool:
    """Whether ``redis`` is a node of a Redis Cluster (``INFO cluster``)."""
    info = await redis.info("cluster")
    return bool(int(info.get("cluster_enabled", 0)))


class ClusterLane(Lane):
    """A :class:`Lane` front over one lane per master of the cluster ``seed`` belongs to."""

    def __init__(
        self,
        seed: Redis,
        replica_acks: ReplicaAcks | None = None,
        on_error: Callable[[str, int], None] | None = None,
        hint: bytes = b"",
    ) -> None:
        super().__init__(seed, replica_acks, sharded_pubsub=True, on_error=on_error, hint=hint)
        self._nodes: dict[tuple[str, int], Lane] = {}
        self._slots: list[tuple[str, int] | None] = [None] * REDIS_CLUSTER_HASH_SLOTS
        #: the masters serving slots now, in slot order (a lost one leaves the list)
        self._masters: list[tuple[str, int]] = []
        self._refreshing: asyncio.Task[None] | None = None
        #: masters whose lane lost its connection, watched until the map moves on
        self._unreachable: set[tuple[str, int]] = set()
        self._watching: asyncio.Task[None] | None = None
        #: slots whose commands are held (TRYAGAIN, CLUSTERDOWN)
        self._held: dict[int, _Hold] = {}
        #: redirections followed, and the loop time a hold gives up, per command (future)
        self._redirects: dict[asyncio.Future[Any], int] = {}
        self._hold_until: dict[asyncio.Future[Any], float] = {}
        self._slot_cache: dict[Any, int] = {}
        self._refreshed_at = 0.0

    # -- the slot map -----------------------------------------------------------------

    async def refresh(self) -> None:
        """Read the slot map (``CLUSTER SLOTS``) from any node that answers and open a lane
        for each master not seen before."""
        clients = [self.redis, *(lane.redis for lane in self._nodes.values())]
        last: Exception | None = None
        for client in clients:
            try:
                ranges = await client.execute_command("CLUSTER SLOTS")  # type: ignore[no-untyped-call]
                break
            except Exception as exc:  # a dead node: ask the next one
                last = exc
        else:
            raise StorageError(f"no node of the Redis Cluster answers: {last!r}")
        slots: list[tuple[str, int] | None] = [None] * REDIS_CLUSTER_HASH_SLOTS
        for entry in ranges:
            start, end, master = int(entry[0]), int(entry[1]), entry[2]
            host = master[0].decode() if isinstance(master[0], bytes) else str(master[0])
            address = (host or self._seed_host(), int(master[1]))
            for slot in range(start, end + 1):
                slots[slot] = address
            if address not in self._nodes:
                self._nodes[address] = self._node_lane(address)
                await self._nodes[address].load_scripts()
        self._slots = slots
        self._masters = list(dict.fromkeys(a for a in slots if a is not None))
        self._refreshed_at = time.monotonic()

    def _seed_host(self) -> str:
        return str(self.redis.connection_pool.connection_kwargs.get("host", "127.0.0.1"))

    def _node_client(self, address: tuple[str, int]) -> Redis:
        # the seed's connection settings (credentials, protocol, timeouts), another address
        seed = self.redis.connection_pool
        kwargs = dict(seed.connection_kwargs)
        kwargs.update(host=address[0], port=address[1])
        return Redis(
            connection_pool=ConnectionPool(connection_class=seed.connection_class, **kwargs)
        )

    def _node_lane(self, address: tuple[str, int]) -> Lane:
        lane = Lane(
            self._node_client(address),
            self.replica_acks,
            sharded_pubsub=True,
            on_error=self.on_error,
            hint=self.hint,
        )
        lane.on_refused = self._refused
        lane.on_lost = partial(self._master_lost, address)
        lane.on_notified = self._notified
        lane.backlog.subscribe(self._node_backlog_changed)
        return lane

    def _node_backlog_changed(self, is_open: bool) -> None:
        """The cluster's backlog gate is closed while any master's lane is behind."""
        if not is_open:
            self.backlog.close()
        elif all(lane.backlog.is_open for lane in self._nodes.values()):
            self.backlog.open()

    def _notified(self, channels: set[str]) -> None:
        if self.on_notified is not None:
            self.on_notified(channels)

    def _master_lost(self, address: tuple[str, int]) -> None:
        """``address``'s lane lost its connection: read the slot map until the cluster has
        moved its slots to another master, or the node answers again."""
        if self._closed:
            return
        self._unreachable.add(address)
        if self._watching is None:
            self._watching = asyncio.get_running_loop().create_task(self._watch_unreachable())

    async def _watch_unreachable(self) -> None:
        try:
            while self._unreachable and not self._closed:
                await asyncio.sleep(REFRESH_INTERVAL)
                try:
                    await self.refresh()
                except StorageError as exc:
                    log.warning("cannot refresh the Redis Cluster slot map: %s", exc)
                    continue
                for address in list(self._unreachable):
                    if address not in self._masters:
                        self._unreachable.discard(address)  # failed over
                        continue
                    with contextlib.suppress(StorageError):
                        await self._nodes[address].ping()
                        self._unreachable.discard(address)  # back (restarted)
        finally:
            self._watching = None

    def _refresh_soon(self) -> None:
        if self._refreshing is not None or self._closed:
            return
        if time.monotonic() - self._refreshed_at < REFRESH_INTERVAL:
            delay = REFRESH_INTERVAL
        else:
            delay = 0.0

        async def run() -> None:
            try:
                await asyncio.sleep(delay)
                await self.refresh()
            except StorageError as exc:
                log.warning("cannot refresh the Redis Cluster slot map: %s", exc)
            finally:
                self._refreshing = None

        self._refreshing = asyncio.get_running_loop().create_task(run())

    def _lane_for(self, slot: int | None) -> Lane:
        if slot is None:  # a keyless command: any master serving slots
            address = self._masters[0] if self._masters else None
        else:
            address = self._slots[slot]
        if address is None or address not in self._nodes:
            raise StorageError(f"no master of the Redis Cluster serves slot {slot}")
        return self._nodes[address]

    def shard_of(self, channel: str) -> tuple[tuple[str, int], Redis]:
        """The master serving ``channel``'s slot and its client: where a sharded
        subscription to it goes (``SSUBSCRIBE``, :mod:`.notifier`).

        Raises:
            StorageError: no master serves the slot now.
        """
        address = self._slots[self._slot(channel)]
        if address is None or address not in self._nodes:
            raise StorageError(f"no master of the Redis Cluster serves channel {channel}")
        return address, self._nodes[address].redis

    def node_clients(self) -> list[Redis]:
        """A client of every master known (the notifier moves to one when its node is
        lost)."""
        return [self._nodes[address].redis for address in self._masters]

    def master_clients(self) -> dict[tuple[str, int], Redis]:
        """A client of every master serving slots, by its address in the slot map (the
        fleet overview reads each one's ``INFO``, :mod:`.topology`)."""
        return {address: self._nodes[address].redis for address in self._masters}

    # -- submitting -------------------------------------------------------------------

    def _slot(self, key: Any) -> int:
        slot = self._slot_cache.get(key)
        if slot is None:
            if len(self._slot_cache) >= SLOT_CACHE_SIZE:
                self._slot_cache.clear()
            raw = key if isinstance(key, bytes) else str(key).encode()
            slot = self._slot_cache[key] = key_slot(raw)
        return slot

    def _slot_of(self, args: tuple[Any, ...]) -> int | None:
        key = first_key(args)
        return None if key is None else self._slot(key)

    def _submit(
        self,
        args: tuple[Any, ...],
        script: Script | None,
        decode: Callable[[Any], Any] | None,
    ) -> asyncio.Future[Any]:
        if self.audit is not None:
            self.audit(args, script)
        slot = self._slot_of(args)
        if slot is not None:
            hold = self._held.get(slot)
            if hold is not None:  # behind the slot's held commands
                fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                hold.waiting.append((args, fut, script, decode))
                return fut
        try:
            lane = self._lane_for(slot)
        except StorageError as exc:
            fut = asyncio.get_running_loop().create_future()
            fut.set_exception(exc)
            self._refresh_soon()
            return fut
        # the master's lane resolves the future itself; refusals come back to _refused
        return lane._submit(args, script, decode)

    def _refused(self, command: QueuedCommand, error: Exception) -> bool:
        """A master refused ``command`` before running it: take it over and send it again
        where, or when, Redis says (True); False lets the error fail it."""
        args, fut, _, _ = command
        if fut is None:
            return False
        if isinstance(error, AskError):  # MovedError is one too
            count = self._redirects.get(fut, 0)
            if count >= MAX_REDIRECTS:
                return False
            self._track(fut)
            self._redirects[fut] = count + 1
            moved = isinstance(error, MovedError)
            to = (error.host or self._seed_host(), int(error.port))
            if moved:
                self._refresh_soon()
            lane = self._nodes.get(to)
            if lane is None:
                lane = self._nodes[to] = self._node_lane(to)
            if not moved:
                lane.call("ASKING")  # just before the command, in the same pipeline
            lane.requeue(command)
            return True
        if isinstance(error, TryAgainError | ClusterDownError):
            # TRYAGAIN: a multi-key command while its slot migrates, some keys moved;
            # CLUSTERDOWN: the cluster is electing a new master. Hold the slot's commands,
            # in submission order, and try again shortly.
            slot = self._slot_of(args)
            now = asyncio.get_running_loop().time()
            if fut not in self._hold_until:
                self._track(fut)
                self._hold_until[fut] = now + HOLD_SECONDS
            if slot is None or now >= self._hold_until[fut]:
                return False
            if isinstance(error, ClusterDownError):
                self._refresh_soon()
            self._hold(slot).refused.append(command)
            return True
        return False

    def _track(self, fut: asyncio.Future[Any]) -> None:
        """Forget ``fut``'s redirections and hold deadline once it is resolved."""
        if fut not in self._redirects and fut not in self._hold_until:
            fut.add_done_callback(self._forget)

    def _forget(self, fut: asyncio.Future[Any]) -> None:
        self._redirects.pop(fut, None)
        self._hold_until.pop(fut, None)

    def _hold(self, slot: int) -> _Hold:
        hold = self._held.get(slot)
        if hold is None:
            marks = {lane: lane.pipelines_sent for lane in self._nodes.values()}
            hold = self._held[slot] = _Hold(marks=marks)
            asyncio.get_running_loop().call_later(HOLD_RETRY, self._send_held, slot)
        return hold

    def _send_held(self, slot: int) -> None:
        hold = self._held.get(slot)
        if hold is None or self._closed:
            return
        if any(lane.pipelines_answered < mark for lane, mark in hold.marks.items()):
            # a command of the slot sent before the hold may still come back refused
            asyncio.get_running_loop().call_later(HOLD_RETRY, self._send_held, slot)
            return
        del self._held[slot]
        for command in hold.refused + hold.waiting:
            fut = command[1]
            if fut is not None and fut.done():
                continue
            if fut in self._redirects:
                # A migrating slot sends a script to the source (ASK), then to the target
                # (TRYAGAIN), then back to a hold, once per HOLD_RETRY: the hold's deadline
                # bounds that round, so each try from a hold has MAX_REDIRECTS of its own.
                self._redirects[fut] = 0
            try:
                self._lane_for(slot).requeue(command)
            except StorageError as exc:
                if fut is not None:
                    fut.set_exception(exc)
                self._refresh_soon()

    def notify(self, channel: str) -> None:
        # on the topic's own master, after the commands queued there
        try:
            self._lane_for(self._slot(channel)).notify(channel)
        except StorageError:
            self._refresh_soon()

    def flush_now(self) -> None:
        for lane in self._nodes.values():
            lane.flush_now()

    @property
    def queued(self) -> int:
        return sum(lane.queued for lane in self._nodes.values())

    # -- lifecycle --------------------------------------------------------------------

    async def load_scripts(self) -> None:
        if not self._nodes:
            await self.refresh()  # loads the scripts on every master it finds
            return
        await asyncio.gather(*(self._nodes[a].load_scripts() for a in self._masters))

    async def replicas(self) -> int:
        """The fewest replicas any master has."""
        counts = await asyncio.gather(*(self._nodes[a].replicas() for a in self._masters))
        return min(counts, default=0)

    async def ping(self) -> None:
        """Every master serving slots answers (a lost master stops counting once the slot
        map no longer names it)."""
        await asyncio.gather(*(self._nodes[address].ping() for address in self._masters))

    async def drain(self) -> None:
        for lane in list(self._nodes.values()):
            await lane.drain()

    async def close(self) -> None:
        self._closed = True
        for task in (self._refreshing, self._watching):
            if task is not None:
                task.cancel()
        for hold in self._held.values():
            for _, fut, _, _ in hold.refused + hold.waiting:
                if fut is not None and not fut.done():
                    fut.set_exception(ServiceNotReady("the gateway is shutting down"))
        self._held.clear()
        for lane in list(self._nodes.values()):
            await lane.close()
            # the pool is the lane's own (Redis.aclose leaves a given pool open)
            await lane.redis.connection_pool.disconnect()
