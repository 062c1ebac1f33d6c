"""Topic maintenance: the fleet's background rounds of message TTL and retention.

Theory of operation. Every gateway runs a round every ``--topic-maintenance-interval-seconds``
(Pulsar checks retention every ``retentionCheckIntervalInSeconds`` and expiry every
``messageExpiryCheckIntervalInMinutes``). A round lists the topics known in Redis (the
namespace topic sets), shuffled so gateways start at different topics, resolves each topic's
policies (topic level, else namespace level, else the gateway defaults) and calls
``topic_maintenance.lua`` for it. The script first takes the topic's round lock (``SET NX PX``
for one interval, owned by this gateway's id), so one gateway of the fleet does each topic
per round and the others skip it with one cheap call. In the script, entries older than the
message TTL are acknowledged on every subscription, then entries every subscription has
consumed are removed while they are older than the retention time or the stream is over the
retention size. The work of one call is bounded (``BUDGET`` entries), so a large backlog is
worked through in several calls instead of one long script.

What "retention" means for a topic without subscriptions is a choice (docs/lifecycle.md):
Pulsar keeps no data for it beyond the retention policy, but trims only when a ledger rolls
over (10 minutes or 50,000 entries at the least), so in practice a producer can publish
first and a consumer subscribe with Earliest moments later. Here a topic without
subscriptions is trimmed only under an explicit retention policy (topic or namespace
level); the gateway-wide defaults never remove anything from it.

:meth:`TopicMaintenance.run_once` is one round, callable from tests; :meth:`TopicMaintenance.start`
loops it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter

from pulsar_gateway.core.errors import GatewayError
from pulsar_gateway.core.model.topic_name import TopicName, parse_topic_name
from pulsar_gateway.core.periodic import Periodic
from pulsar_gateway.core.policies.policies import Policies
from pulsar_gateway.core.policies.retention import Lifecycle, resolve_lifecycle
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import topics

__all__ = ["BUDGET", "RoundResult", "TopicMaintenance"]

log = logging.getLogger(__name__)

#: Most entries one script call expires or removes; a topic with more takes several calls.
BUDGET = 1000
#: Most calls per topic per round, so one huge topic cannot starve the others.
MAX_CALLS_PER_TOPIC = 100

#: Pulsar policy names and JSON fields (admin API v2, ``RetentionPolicies``).
RETENTION = "retention"
MESSAGE_TTL = "messageTTL"
RETENTION_TIME = "retentionTimeInMinutes"
RETENTION_SIZE = "retentionSizeInMB"


@dataclass(slots=True)
class RoundResult:
    """What one round did on this gateway."""

    topics: int = 0
    skipped: int = 0
    expired: int = 0
    trimmed: int = 0
    errors: int = 0


class TopicMaintenance:
    """This gateway's share of the fleet's TTL and retention work.

    Args:
        lane: storage; ``keys``: the key schema.
        policies: namespace and topic policies; ``defaults``: the gateway's own TTL and
            retention, for topics without policies.
        all_topics: every topic of the fleet
            (:meth:`~pulsar_gateway.core.topics.partitioned_topics.PartitionedTopics.all_topics`).
        gateway_id: owns the rounds it takes the lock of.
        interval: seconds between rounds (and the round lock's lifetime).
        registry: where its counters are exported.
    """

    def __init__(
        self,
        lane: Lane,
        keys: KeySchema,
        policies: Policies,
        *,
        all_topics: Callable[[], Awaitable[list[str]]],
        defaults: Lifecycle,
        gateway_id: str,
        interval: float,
        registry: CollectorRegistry,
    ) -> None:
        self._lane = lane
        self._keys = keys
        self._policies = policies
        self._all_topics = all_topics
        self.defaults = defaults
        self._gateway_id = gateway_id
        self.interval = interval
        self._rounds = Periodic("topic maintenance", interval, self.run_once)
        self.expired_total = Counter(
            "pulsar_gateway_ttl_expired_entries",
            "Entries acknowledged by message TTL, summed over subscriptions",
            registry=registry,
        )
        self.trimmed_total = Counter(
            "pulsar_gateway_retention_trimmed_entries",
            "Entries removed from topics by retention",
            registry=registry,
        )

    def start(self) -> None:
        self._rounds.start()

    async def stop(self) -> None:
        await self._rounds.stop()

    async def lifecycle(self, topic: TopicName | str) -> Lifecycle:
        """Resolve the TTL and retention of ``topic``: topic policy, namespace policy, default."""
        return await resolve_lifecycle(self._policies, topic, self.defaults)

    async def run_topic(self, topic: str) -> tuple[int, int] | None:
        """Apply TTL and retention to one topic.

        Returns:
            ``(expired, trimmed)`` entries, or None when another gateway owns the topic's
            round.
        """
        name = parse_topic_name(topic)
        policy = await self.lifecycle(name)
        if policy.ttl_seconds == 0 and policy.retention_minutes < 0 and policy.retention_mb < 0:
            return 0, 0  # nothing to expire, everything retained
        keys = self._keys.topic(name)
        expired = trimmed = 0
        for _ in range(MAX_CALLS_PER_TOPIC):
            step = await topics.topic_maintenance(
                self._lane,
                keys,
                owner=self._gateway_id,
                lock_ms=max(1, int(self.interval * 1000)),
                ttl_seconds=policy.ttl_seconds,
                retention_minutes=policy.retention_minutes,
                retention_mb=policy.retention_mb,
                trim_unsubscribed=policy.explicit_retention,
                budget=BUDGET,
            )
            if step.skipped:
                return None
            expired += step.expired
            trimmed += step.trimmed
            if not step.more:
                break
        return expired, trimmed

    async def run_once(self) -> RoundResult:
        """One round over every topic; this gateway does the topics it wins the lock of."""
        result = RoundResult()
        for topic in await self._all_topics():
            try:
                done = await self.run_topic(topic)
            except GatewayError as exc:
                log.warning("maintenance of %s failed: %s", topic, exc)
                result.errors += 1
                continue
            if done is None:
                result.skipped += 1
                continue
            result.topics += 1
            result.expired += done[0]
            result.trimmed += done[1]
        self.expired_total.inc(result.expired)
        self.trimmed_total.inc(result.trimmed)
        if result.expired or result.trimmed:
            log.info(
                "topic maintenance: %d topics, %d entries expired, %d trimmed",
                result.topics,
                result.expired,
                result.trimmed,
            )
        return result
