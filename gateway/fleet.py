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

from typing import TYPE_CHECKING

import mmh3

if TYPE_CHECKING:
    from gateway.broker import Broker

__all__ = ["Fleet", "owner"]


def owner(topic: str, members: list[str]) -> str | None:
    """The member that answers for ``topic`` (rendezvous hashing), None for no members."""
    return max(members, key=lambda member: mmh3.hash(f"{member}\x00{topic}"), default=None)


class Fleet:
    """This gateway's membership of the fleet and its last view of the members."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.members: list[str] = [broker.gateway_id]

    async def heartbeat(self) -> list[str]:
        """Renew this gateway's lease (as long as a consumer's) and return the members."""
        broker = self._broker
        lease_ms = int(broker.config.consumer_lease_seconds * 1000)
        members = await broker.storage.eval(
            "gateway_heartbeat", [broker.schema.gateways], [broker.gateway_id, lease_ms]
        )
        self.members = sorted(m.decode() if isinstance(m, bytes) else m for m in members)
        return self.members

    async def leave(self) -> None:
        await self._broker.storage.eval(
            "gateway_heartbeat", [self._broker.schema.gateways], [self._broker.gateway_id, 0]
        )

    def owns(self, topic: str) -> bool:
        """Whether this gateway exports ``topic``'s metrics."""
        members = self.members
        if self._broker.gateway_id not in members:
            members = [*members, self._broker.gateway_id]
        return owner(topic, members) == self._broker.gateway_id
