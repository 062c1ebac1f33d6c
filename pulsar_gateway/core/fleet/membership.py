"""The fleet: which gateways are alive, and which one answers for a topic in ``/metrics``.

Every gateway can serve every topic, so nothing needs an owner, except a metric that must
be counted once: Prometheus sums a topic's series over every gateway it scrapes, as it sums
a Pulsar topic over brokers, where each topic has exactly one owner. Each gateway renews a
lease in the ``gateways`` zset (``gateway_heartbeat.lua``, Redis clock) and reads the
members back; a topic's metrics are exported by the scrape target (``host:httpPort``) with
the highest rendezvous hash (Murmur3 of target and topic), so when a gateway joins or leaves
only its share of topics moves, and every gateway agrees once their views of the members
agree (within one renewal). A target is one gateway, or the worker processes of one host
sharing its ports, any of which answers a scrape.

The admin API lists the fleet's gateways as Pulsar lists a cluster's brokers (``GET
/admin/v2/brokers``, by broker id ``host:httpPort``), so with each renewal a gateway whose
ports are bound also writes what it advertises, and when it started, into the
``gateways:info`` hash; a reader keeps only the live members' entries and drops the others
(a gateway that crashed never said goodbye). The fleet's "leader" (``GET
/admin/v2/brokers/leaderBroker``) is its oldest live member: every gateway reads the same
start times, so they agree without an election.

Each gateway's rate reporter also writes a summary of itself (clients, topics, rates) into
the ``gateways:stats`` hash (``fleet/rates.py``); the fleet overview's reader attaches a
member's summary while it is fresh (written within three report intervals) and drops those
of gateways no longer live, as it does their descriptions: the hash is the fleet's and
cannot expire field by field (Redis 7.0 has no hash field TTL).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mmh3

from pulsar_gateway.core.fleet.rates import REPORT_INTERVAL, fresh_reports
from pulsar_gateway.core.periodic import Periodic
from pulsar_gateway.core.storage import fleet_store
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import metadata
from pulsar_gateway.core.topics.cluster import Cluster

__all__ = ["Fleet", "Member", "owner"]


@dataclass(frozen=True, slots=True)
class Member:
    """A live gateway as it advertises itself.

    Attributes:
        gateway_id: its id in the fleet.
        broker_id: ``host:httpPort``, Pulsar's broker id.
        service_url, service_url_tls: its ``http://`` (and ``https://``) admin URL.
        broker_service_url, broker_service_url_tls: its ``pulsar://`` (``pulsar+ssl://``) URL.
        started: when it started (ms since the epoch, its own clock).
        host, pid: the machine (or container) it runs on, by host name, and its process id:
            behind a load balancer every gateway advertises the balancer's address, and the
            worker processes of one host share its ports, so neither URL tells them apart.
        summary: its last fresh summary (``fleet/rates.py``: ``connections``,
            ``producers``, ``consumers``, ``topics``, rates and throughputs, ``t`` the
            report time in ms), None when it has written none lately.
    """

    gateway_id: str
    broker_id: str
    service_url: str
    service_url_tls: str | None
    broker_service_url: str
    broker_service_url_tls: str | None
    started: int
    host: str = ""
    pid: int = 0
    summary: Mapping[str, Any] | None = None

    @classmethod
    def from_json(
        cls, gateway_id: str, text: str, summary: Mapping[str, Any] | None = None
    ) -> Member | None:
        """The member an info entry describes (with its ``summary``); None for an entry it
        cannot read."""
        try:
            data = json.loads(text)
            return cls(
                gateway_id,
                str(data["brokerId"]),
                str(data["serviceUrl"]),
                data.get("serviceUrlTls"),
                str(data["brokerServiceUrl"]),
                data.get("brokerServiceUrlTls"),
                int(data["started"]),
                str(data.get("host", "")),
                int(data.get("pid", 0)),
                summary,
            )
        except (ValueError, KeyError, TypeError):
            return None


def owner(topic: str, members: list[str]) -> str | None:
    """The member that answers for ``topic`` (rendezvous hashing), None for no members."""
    return max(members, key=lambda member: mmh3.hash(f"{member}\x00{topic}"), default=None)


class Fleet:
    """This gateway's membership of the fleet and its last view of the members.

    Args:
        lane: storage; ``gateways``: the fleet's lease zset (:meth:`KeySchema.gateways`).
        info: the members' descriptions (:meth:`KeySchema.gateway_info`), with ``cluster``
            (this gateway's advertised URLs); without them nothing is described.
        gateway_id: this gateway.
        lease_ms: the membership lease, renewed every third of it (as a consumer's).
        stats: the members' summaries (:meth:`KeySchema.gateway_stats`), written every
            ``stats_interval`` seconds by each member's rate reporter; None: not read.
    """

    def __init__(
        self,
        lane: Lane,
        gateways: str,
        gateway_id: str,
        lease_ms: int,
        info: str | None = None,
        cluster: Cluster | None = None,
        stats: str | None = None,
        stats_interval: float = REPORT_INTERVAL,
    ) -> None:
        self._lane = lane
        self._gateways = gateways
        self._stats = stats
        self._stats_interval = stats_interval
        #: the ``gateways:info`` hash and what this gateway advertises (None: not written)
        self._info = info
        self._cluster = cluster
        self.started = int(time.time() * 1000)
        self.gateway_id = gateway_id
        self._lease_ms = lease_ms
        self.members: list[str] = [gateway_id]
        self._heartbeats = Periodic("fleet heartbeat", lease_ms / 3000, self.heartbeat)

    def start(self) -> None:
        self._heartbeats.start()

    async def heartbeat(self) -> list[str]:
        """Renew this gateway's lease and return the members."""
        self.members = await metadata.gateway_heartbeat(
            self._lane, self._gateways, gateway_id=self.gateway_id, lease_ms=self._lease_ms
        )
        description = self._description()
        if description is not None and self._info is not None:
            # every renewal, so a Redis that lost the hash (restart, failover) gets it back
            await fleet_store.describe_gateway(self._lane, self._info, self.gateway_id, description)
        return self.members

    def _description(self) -> str | None:
        cluster = self._cluster
        if cluster is None or not cluster.advertised:
            return None  # the ports are not bound yet: the URLs would name the defaults
        return json.dumps(
            {
                "brokerId": cluster.broker_id,
                "serviceUrl": cluster.service_url,
                "serviceUrlTls": cluster.service_url_tls,
                "brokerServiceUrl": cluster.broker_service_url,
                "brokerServiceUrlTls": cluster.broker_service_url_tls,
                "started": self.started,
                "host": socket.gethostname(),
                "pid": os.getpid(),
            }
        )

    async def described_members(self, *, summaries: bool = False) -> list[Member]:
        """The live members that described themselves, oldest first (ties by id): the
        first is the fleet's leader. With ``summaries`` (the fleet overview), each with its
        summary while fresh; the brokers list and the ``/metrics`` share need none, so they
        do not read them. Descriptions (and the summaries read) of gateways no longer live
        are removed."""
        members = set(await self.heartbeat())
        if self._info is None:
            return []
        stats = self._stats if summaries else None
        if stats is None:
            described = await fleet_store.gateway_descriptions(self._lane, self._info)
            written: dict[str, str] = {}
        else:
            described, written = await asyncio.gather(
                fleet_store.gateway_descriptions(self._lane, self._info),
                fleet_store.gateway_summaries(self._lane, stats),
            )
        out, gone = [], []
        for gateway_id, description in described.items():
            if gateway_id not in members:
                gone.append(gateway_id)
                continue
            summary = written.get(gateway_id)
            fresh = fresh_reports([summary], self._stats_interval) if summary else []
            member = Member.from_json(gateway_id, description, fresh[0] if fresh else None)
            if member is not None:
                out.append(member)
        forget = [fleet_store.forget_gateways(self._lane, self._info, gone)] if gone else []
        stale = [gateway_id for gateway_id in written if gateway_id not in members]
        if stats is not None and stale:
            forget.append(fleet_store.forget_gateways(self._lane, stats, stale))
        if forget:
            await asyncio.gather(*forget)
        return sorted(out, key=lambda member: (member.started, member.gateway_id))

    async def leave(self) -> None:
        """Stop heart-beating and leave the fleet (shutdown)."""
        await self._heartbeats.stop()
        await metadata.gateway_heartbeat(
            self._lane, self._gateways, gateway_id=self.gateway_id, lease_ms=0
        )
        if self._info is not None:
            await fleet_store.forget_gateways(self._lane, self._info, [self.gateway_id])

    async def metrics_share(self) -> Callable[[str], bool]:
        """Which topics this gateway's ``/metrics`` exports: the rendezvous share of its
        scrape target (``host:httpPort``, Pulsar's broker id) among the live members'.

        Prometheus scrapes targets, not processes: the worker processes of one host
        (``pulsar-gateway --workers``) share its ports, so a scrape reaches any one of
        them, and each must export the whole host's share. A gateway alone on its ports is
        its own target. Before this gateway has described itself (its ports not bound),
        its share is its own (:meth:`owns`)."""
        cluster = self._cluster
        members = await self.described_members()
        if cluster is None or not cluster.advertised:
            return self.owns
        target = cluster.broker_id
        targets = sorted({member.broker_id for member in members} | {target})
        return lambda topic: owner(topic, targets) == target

    def owns(self, topic: str) -> bool:
        """Whether ``topic`` is this gateway's share of the fleet's topics (by gateway id):
        the inactive-topic sweeps' share, and the metrics' before the ports are bound."""
        members = self.members
        if self.gateway_id not in members:
            members = [*members, self.gateway_id]
        return owner(topic, members) == self.gateway_id
