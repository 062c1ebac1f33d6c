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
exactly as on one node; the lost connection also refreshes the slot map, so new commands go
to the replica the cluster promotes.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from redis.asyncio import ConnectionPool, Redis
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.exceptions import AskError, ClusterDownError, MovedError, TryAgainError

from pulsar_gateway.core.errors import ServiceNotReady, StorageError
from pulsar_gateway.core.storage.lane import Lane, ReplicaAcks
from pulsar_gateway.core.storage.scripts import Script
from pulsar_gateway.core.storage.slots import command_slot

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


@dataclass(order=True, slots=True)
class _Pending:
    """A command on its way to the master of its slot; ordered by submission."""

    sequence: int
    outer: asyncio.Future[Any] = field(compare=False)
    args: tuple[Any, ...] = field(compare=False)
    script: Script | None = field(compare=False)
    decode: Callable[[Any], Any] | None = field(compare=False)
    #: redirections (MOVED, ASK) it may still follow
    redirects: int = field(compare=False)
    #: loop time after which a TRYAGAIN or CLUSTERDOWN fails it
    hold_until: float = field(compare=False)


async def is_cluster(redis: Redis) -> bool:
    """Whether ``redis`` is a node of a Redis Cluster (``INFO cluster``)."""
    info = await redis.info("cluster")
    return bool(int(info.get("cluster_enabled", 0)))


class ClusterLane(Lane):
    """A :class:`Lane` front over one lane per master of the cluster ``seed`` belongs to."""

    def __init__(self, seed: Redis, replica_acks: ReplicaAcks | None = None) -> None:
        super().__init__(seed, replica_acks, sharded_pubsub=True)
        self._nodes: dict[tuple[str, int], Lane] = {}
        self._slots: list[tuple[str, int] | None] = [None] * REDIS_CLUSTER_HASH_SLOTS
        #: the masters serving slots now, in slot order (a lost one leaves the list)
        self._masters: list[tuple[str, int]] = []
        self._refreshing: asyncio.Task[None] | None = None
        #: commands refused with TRYAGAIN or CLUSTERDOWN, by slot, in submission order; the
        #: slot's new commands wait behind them so a partition's commands keep their order
        self._held: dict[int, list[_Pending]] = {}
        self._sequence = 0
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
        return Lane(self._node_client(address), self.replica_acks, sharded_pubsub=True)

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
        address = self._slots[key_slot(channel.encode())]
        if address is None or address not in self._nodes:
            raise StorageError(f"no master of the Redis Cluster serves channel {channel}")
        return address, self._nodes[address].redis

    def node_clients(self) -> list[Redis]:
        """A client of every master known (the notifier moves to one when its node is
        lost)."""
        return [self._nodes[address].redis for address in self._masters]

    # -- submitting -------------------------------------------------------------------

    def _submit(
        self,
        args: tuple[Any, ...],
        script: Script | None,
        decode: Callable[[Any], Any] | None,
    ) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        self._sequence += 1
        command = _Pending(
            self._sequence,
            loop.create_future(),
            args,
            script,
            decode,
            MAX_REDIRECTS,
            loop.time() + HOLD_SECONDS,
        )
        try:
            slot = command_slot(args)
        except ValueError as exc:
            command.outer.set_exception(StorageError(str(exc)))
            return command.outer
        if slot is not None and slot in self._held:
            bisect.insort(self._held[slot], command)  # behind the slot's held commands
        else:
            self._route(command, slot)
        return command.outer

    def _route(
        self,
        command: _Pending,
        slot: int | None,
        *,
        asking: bool = False,
        address: tuple[str, int] | None = None,
    ) -> None:
        try:
            lane = self._nodes[address] if address is not None else self._lane_for(slot)
        except StorageError as exc:
            command.outer.set_exception(exc)
            self._refresh_soon()
            return
        if asking:
            lane.call("ASKING")  # same pipeline, just before the command
        inner = lane._submit(command.args, command.script, command.decode)
        inner.add_done_callback(lambda fut: self._answered(command, slot, fut))

    def _answered(self, command: _Pending, slot: int | None, fut: asyncio.Future[Any]) -> None:
        outer = command.outer
        if outer.done():
            return
        error = fut.exception()
        if error is None:
            outer.set_result(fut.result())
            return
        # Redirections and refusals Redis gives before running a command: not applied, so
        # safe to send again.
        refusal = error.__cause__
        if command.redirects > 0 and isinstance(refusal, AskError):  # MovedError is one too
            moved = isinstance(refusal, MovedError)
            to = (refusal.host or self._seed_host(), int(refusal.port))
            if moved:
                self._refresh_soon()
            if to not in self._nodes:
                self._nodes[to] = self._node_lane(to)
            command.redirects -= 1
            self._route(command, slot, asking=not moved, address=to)
            return
        if (
            isinstance(refusal, TryAgainError | ClusterDownError)
            and slot is not None
            and asyncio.get_running_loop().time() < command.hold_until
        ):
            # TRYAGAIN: a multi-key command while its slot migrates, some keys moved;
            # CLUSTERDOWN: the cluster is electing a new master. Hold the slot's commands,
            # in submission order, and try again shortly.
            if isinstance(refusal, ClusterDownError):
                self._refresh_soon()
            self._hold(command, slot)
            return
        text = str(error)
        if "unavailable" in text or "connection lost" in text:
            self._refresh_soon()
        outer.set_exception(error)

    def _hold(self, command: _Pending, slot: int) -> None:
        held = self._held.get(slot)
        if held is None:
            held = self._held[slot] = []
            asyncio.get_running_loop().call_later(HOLD_RETRY, self._send_held, slot)
        bisect.insort(held, command)

    def _send_held(self, slot: int) -> None:
        for command in self._held.pop(slot, []):
            self._route(command, slot)

    def notify(self, channel: str) -> None:
        # on the topic's own master, after the commands queued there
        try:
            self._lane_for(key_slot(channel.encode())).notify(channel)
        except StorageError:
            self._refresh_soon()

    def flush_now(self) -> None:
        for lane in self._nodes.values():
            lane.flush_now()

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
        if self._refreshing is not None:
            self._refreshing.cancel()
        for held in self._held.values():
            for command in held:
                if not command.outer.done():
                    command.outer.set_exception(ServiceNotReady("the gateway is shutting down"))
        self._held.clear()
        for lane in list(self._nodes.values()):
            await lane.close()
            # the pool is the lane's own (Redis.aclose leaves a given pool open)
            await lane.redis.connection_pool.disconnect()
