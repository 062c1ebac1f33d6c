"""The fleet: which gateways are alive, and which one answers for a topic in ``/metrics``.

Every gateway can serve every topic, so nothing needs an owner, except a metric that must
be counted once: Prometheus sums a topic's series over every gateway it scrapes, as it sums
a Pulsar topic over brokers, where each topic has exactly one owner. Each gateway renews a
lease in the ``gateways`` zset (``gateway_heartbeat.lua``, Redis clock) and reads the
members back; a topic's metrics are exported by the member with the highest rendezvous
hash (Murmur3 of gateway id and topic), so when a gateway joins or leaves only its share
of topics moves, and every gateway agrees once their views of the members agree (within
one renewal).
"""

from __future__ import annotations

import mmh3

from pulsar_gateway.core.periodic import Periodic
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import metadata

__all__ = ["Fleet", "owner"]


def owner(topic: str, members: list[str]) -> str | None:
    """The member that answers for ``topic`` (rendezvous hashing), None for no members."""
    return max(members, key=lambda member: mmh3.hash(f"{member}\x00{topic}"), default=None)


class Fleet:
    """This gateway's membership of the fleet and its last view of the members.

    Args:
        lane: storage; ``gateways``: the fleet's lease zset (:meth:`KeySchema.gateways`).
        gateway_id: this gateway.
        lease_ms: the membership lease, renewed every third of it (as a consumer's).
    """

    def __init__(self, lane: Lane, gateways: str, gateway_id: str, lease_ms: int) -> None:
        self._lane = lane
        self._gateways = gateways
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
        return self.members

    async def leave(self) -> None:
        """Stop heart-beating and leave the fleet (shutdown)."""
        await self._heartbeats.stop()
        await metadata.gateway_heartbeat(
            self._lane, self._gateways, gateway_id=self.gateway_id, lease_ms=0
        )

    def owns(self, topic: str) -> bool:
        """Whether this gateway exports ``topic``'s metrics."""
        members = self.members
        if self.gateway_id not in members:
            members = [*members, self.gateway_id]
        return owner(topic, members) == self.gateway_id
