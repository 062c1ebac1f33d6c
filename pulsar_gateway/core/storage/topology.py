"""What the fleet's Redis is made of, for the admin API's fleet overview: its mode and
version, and each node (masters with their slots, replicas with their master) with its
memory and clients where the gateway can ask it.

One Redis (with or without replicas): the master the gateway writes to answers ``INFO``
(https://redis.io/docs/latest/commands/info/), whose ``replication`` section lists its
replicas as ``slaveN:ip=...,port=...,state=online,...`` lines; a replica is not asked (the
gateway has no connection to it), so its memory and clients are unknown (None). A Redis
Cluster: any node's ``CLUSTER NODES`` (https://redis.io/docs/latest/commands/cluster-nodes/)
lists every node, its flags, its master and its slots; each master serving slots is asked
``INFO`` over the gateway's own connection to it (:meth:`.ClusterLane.master_clients`).
Nothing here is cached: the overview is asked for by an operator, now and then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from redis.asyncio import Redis

from pulsar_gateway.core.errors import StorageError
from pulsar_gateway.core.storage.cluster_lane import ClusterLane
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import text

__all__ = ["RedisNode", "RedisTopology", "parse_cluster_nodes", "redis_topology"]

#: ``CLUSTER NODES`` flags of a node the answering node cannot reach: ``fail`` (the
#: cluster agreed it is down), ``fail?`` (this node suspects it), ``noaddr`` (no address
#: known), ``handshake`` (not yet a member).
_UNREACHABLE_FLAGS = frozenset({"fail", "fail?", "noaddr", "handshake"})


@dataclass(frozen=True, slots=True)
class RedisNode:
    """One Redis node.

    Attributes:
        id: its cluster node id; for one Redis, the master's ``run_id`` and a replica's
            ``ip:port`` (a master does not tell its replicas' run ids).
        address: ``host:port`` (a Unix socket's path for a master reached by one).
        role: ``master`` or ``replica``.
        master: the id of a replica's master, None for a master.
        slots: a cluster master's slot ranges (``0-5460 10923``), None otherwise.
        used_memory, max_memory: ``INFO memory``'s ``used_memory`` and ``maxmemory``
            (bytes; 0: no limit); None for a node not asked.
        connected_clients: ``INFO clients``' ``connected_clients``; None when not asked.
        connected: whether the node is reachable (cluster link connected and not failed;
            a replica's replication link ``online``).
    """

    id: str
    address: str
    role: str
    master: str | None = None
    slots: str | None = None
    used_memory: int | None = None
    max_memory: int | None = None
    connected_clients: int | None = None
    connected: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "address": self.address,
            "role": self.role,
            "master": self.master,
            "slots": self.slots,
            "usedMemory": self.used_memory,
            "maxMemory": self.max_memory,
            "connectedClients": self.connected_clients,
            "linkState": "connected" if self.connected else "disconnected",
        }


@dataclass(frozen=True, slots=True)
class RedisTopology:
    """The fleet's Redis: ``mode`` ``standalone`` or ``cluster``, its version, its nodes
    (each master followed by its replicas)."""

    mode: str
    version: str
    nodes: tuple[RedisNode, ...]

    @property
    def used_memory(self) -> int:
        """The memory the masters use, summed over those asked (bytes)."""
        return sum(n.used_memory or 0 for n in self.nodes if n.role == "master")

    @property
    def max_memory(self) -> int:
        """The masters' ``maxmemory`` summed, 0 when any master asked has no limit (the
        data set may then grow without one)."""
        limits = [n.max_memory for n in self.nodes if n.role == "master"]
        known = [limit for limit in limits if limit is not None]
        if not known or 0 in known:
            return 0
        return sum(known)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "version": self.version,
            "usedMemory": self.used_memory,
            "maxMemory": self.max_memory,
            "nodes": [node.to_json() for node in self.nodes],
        }


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _with_info(node: RedisNode, info: Mapping[str, Any] | None) -> RedisNode:
    if info is None:
        return node
    return replace(
        node,
        used_memory=_int(info.get("used_memory")),
        max_memory=_int(info.get("maxmemory")),
        connected_clients=_int(info.get("connected_clients")),
    )


def parse_cluster_nodes(reply: str) -> list[RedisNode]:
    """The nodes of a ``CLUSTER NODES`` reply, each master followed by its replicas,
    masters in slot order (masters without slots after, then replicas whose master is not
    listed).

    A line is ``<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv>
    <config-epoch> <link-state> <slot> <slot> ...``; a slot is ``n`` or ``a-b``, and
    ``[n->-id]`` / ``[n-<-id]`` mark slots migrating or importing, which the node does not
    serve yet and are left out.
    """
    masters: list[tuple[int, RedisNode]] = []
    replicas: list[RedisNode] = []
    for line in reply.splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        node_id, endpoint, flags, master, link_state = (
            fields[0],
            fields[1],
            set(fields[2].split(",")),
            fields[3],
            fields[7],
        )
        address = endpoint.split("@", 1)[0]
        connected = link_state == "connected" and not flags & _UNREACHABLE_FLAGS
        if "master" in flags:
            ranges = [slot for slot in fields[8:] if not slot.startswith("[")]
            first = min((int(r.split("-", 1)[0]) for r in ranges), default=1 << 16)
            node = RedisNode(
                node_id, address, "master", slots=" ".join(ranges) or None, connected=connected
            )
            masters.append((first, node))
        elif "slave" in flags or "replica" in flags:
            parent = master if master != "-" else None
            replicas.append(RedisNode(node_id, address, "replica", parent, connected=connected))
    out: list[RedisNode] = []
    for _, node in sorted(masters, key=lambda pair: (pair[0], pair[1].id)):
        out.append(node)
        out.extend(sorted((r for r in replicas if r.master == node.id), key=lambda r: r.address))
    known = {node.id for node in out}
    out.extend(sorted((r for r in replicas if r.id not in known), key=lambda r: r.address))
    return out


def _replicas(info: Mapping[str, Any], master_id: str) -> list[RedisNode]:
    """The replicas ``INFO replication`` lists (``slave0``, ``slave1``, ...; redis-py reads
    each ``ip=...,port=...,state=...`` line into a dict)."""
    out = []
    index = 0
    while isinstance(entry := info.get(f"slave{index}"), Mapping):
        address = f"{entry.get('ip', '')}:{entry.get('port', '')}"
        online = entry.get("state") == "online"
        out.append(RedisNode(address, address, "replica", master_id, connected=online))
        index += 1
    return out


def _address(redis: Redis) -> str:
    kwargs = redis.connection_pool.connection_kwargs
    if "path" in kwargs:
        return str(kwargs["path"])
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


async def _standalone(redis: Redis) -> RedisTopology:
    info = await redis.info()
    master_id = str(info.get("run_id", _address(redis)))
    master = _with_info(RedisNode(master_id, _address(redis), "master"), info)
    return RedisTopology(
        "standalone", str(info.get("redis_version", "")), (master, *_replicas(info, master_id))
    )


async def _info_or_none(redis: Redis) -> dict[str, Any] | None:
    try:
        return dict(await redis.info())
    except Exception:  # a master that does not answer: its figures are unknown
        return None


async def _cluster(lane: ClusterLane) -> RedisTopology:
    clients = lane.master_clients()
    reply: Any = None
    last: Exception | None = None
    for client in (lane.redis, *clients.values()):
        try:
            # CLUSTER and NODES as two arguments: redis-py parses "CLUSTER NODES" into
            # a dict of its own, the text is wanted here
            reply = await client.execute_command("CLUSTER", "NODES")  # type: ignore[no-untyped-call]
            break
        except Exception as exc:  # a dead node: ask the next one
            last = exc
    else:
        raise StorageError(f"no node of the Redis Cluster answers: {last!r}")
    nodes = parse_cluster_nodes(text(reply))
    by_address = {f"{host}:{port}": client for (host, port), client in clients.items()}
    by_port: dict[int, list[Redis]] = {}
    for (_, port), client in clients.items():
        by_port.setdefault(port, []).append(client)

    def client_of(node: RedisNode) -> Redis | None:
        # the slot map and CLUSTER NODES name a node alike unless the map gives a hostname
        # (cluster-preferred-endpoint-type): then its port, when no other master shares it
        found = by_address.get(node.address)
        if found is None:
            same_port = by_port.get(_int(node.address.rsplit(":", 1)[-1]) or -1, [])
            found = same_port[0] if len(same_port) == 1 else None
        return found

    asked = [(i, client_of(n)) for i, n in enumerate(nodes) if n.role == "master" and n.connected]
    targets = [(i, client) for i, client in asked if client is not None]
    infos = await asyncio.gather(*(_info_or_none(client) for _, client in targets))
    described = list(nodes)
    for (i, _), info in zip(targets, infos, strict=True):
        described[i] = _with_info(nodes[i], info)
    version = next((str(info["redis_version"]) for info in infos if info), "")
    return RedisTopology("cluster", version, tuple(described))


async def redis_topology(lane: Lane) -> RedisTopology:
    """The Redis behind ``lane``: one Redis and its replicas, or a Redis Cluster's nodes.

    Raises:
        StorageError: Redis does not answer.
    """
    try:
        if isinstance(lane, ClusterLane):
            return await _cluster(lane)
        return await _standalone(lane.redis)
    except StorageError:
        raise
    except Exception as exc:  # redis-py's connection and reply errors
        raise StorageError(f"cannot read the Redis topology: {exc}") from exc
