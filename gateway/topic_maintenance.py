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

:meth:`TopicMaintenance.run_once` is one round, callable from tests; :meth:`start` loops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import Counter
from redis.exceptions import RedisError

from gateway.errors import GatewayError
from gateway.topic_name import TopicName, parse_topic_name

if TYPE_CHECKING:
    from gateway.broker import Broker

__all__ = [
    "BUDGET",
    "Lifecycle",
    "PolicySource",
    "RoundResult",
    "TopicMaintenance",
    "parse_retention",
    "parse_ttl",
]

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


class PolicySource(Protocol):
    """Where topic and namespace policies come from (``gateway.policies`` on the broker)."""

    async def effective(self, topic: TopicName | str, name: str) -> Any | None:
        """The topic-level value if set, else the namespace-level one, else None."""


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """The TTL and retention that apply to one topic.

    Attributes:
        ttl_seconds: message TTL; 0 = messages never expire.
        retention_minutes: -1 infinite, 0 none.
        retention_mb: -1 infinite, 0 none.
        explicit_retention: the retention comes from a topic or namespace policy, not from
            the gateway default; only then is a topic without subscriptions trimmed.
    """

    ttl_seconds: int
    retention_minutes: int
    retention_mb: int
    explicit_retention: bool


@dataclass(slots=True)
class RoundResult:
    """What one round did on this gateway."""

    topics: int = 0
    skipped: int = 0
    expired: int = 0
    trimmed: int = 0
    errors: int = 0


def parse_retention(value: Any) -> tuple[int, int] | None:
    """``(minutes, megabytes)`` from a ``retention`` policy value, None when malformed."""
    if not isinstance(value, Mapping):
        return None
    limits: list[int] = []
    for field in (RETENTION_TIME, RETENTION_SIZE):
        v = value.get(field)
        if isinstance(v, bool) or not isinstance(v, int) or v < -1:
            return None
        limits.append(v)
    return limits[0], limits[1]


def parse_ttl(value: Any) -> int | None:
    """Seconds from a ``messageTTL`` policy value, None when malformed."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


class TopicMaintenance:
    """This gateway's share of the fleet's TTL and retention work."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self.interval = config.topic_maintenance_interval_seconds
        self.default_ttl = config.default_message_ttl_seconds
        self.default_retention = (config.default_retention_minutes, config.default_retention_mb)
        self._task: asyncio.Task[None] | None = None
        registry = broker.metrics.registry
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

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="topic maintenance"
            )

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.run_once()
            except (GatewayError, RedisError) as exc:
                log.warning("topic maintenance round failed: %s", exc)
            except Exception:
                log.exception("topic maintenance round failed")

    # -- one round -----------------------------------------------------------------------

    async def topics(self) -> list[str]:
        """Every topic registered in a namespace topic set, in random order."""
        redis = self.broker.redis
        names: set[str] = set()
        glob = self.broker.schema.namespace_topics_pattern()
        async for key in redis.scan_iter(match=glob, count=500, _type="set"):
            for member in await redis.smembers(key):
                names.add(member.decode() if isinstance(member, bytes) else member)
        topics = list(names)
        random.shuffle(topics)
        return topics

    async def lifecycle(self, topic: TopicName | str) -> Lifecycle:
        """Resolve the TTL and retention of ``topic``: topic policy, namespace policy, default."""
        policies: PolicySource = self.broker.policies
        ttl = parse_ttl(await policies.effective(topic, MESSAGE_TTL))
        retention = parse_retention(await policies.effective(topic, RETENTION))
        explicit = retention is not None
        minutes, mb = retention if retention is not None else self.default_retention
        return Lifecycle(
            ttl if ttl is not None else self.default_ttl,
            minutes,
            mb,
            explicit,
        )

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
        keys = self.broker.schema.topic(name)
        expired = trimmed = 0
        for _ in range(MAX_CALLS_PER_TOPIC):
            code, done_expired, done_trimmed, more = await self.broker.storage.eval(
                "topic_maintenance",
                [keys.stream, keys.subscriptions, keys.maintenance_lock, keys.compaction],
                [
                    self.broker.gateway_id,
                    max(1, int(self.interval * 1000)),
                    policy.ttl_seconds,
                    policy.retention_minutes,
                    policy.retention_mb,
                    1 if policy.explicit_retention else 0,
                    BUDGET,
                ],
            )
            if code == 1:
                return None
            expired += done_expired
            trimmed += done_trimmed
            if not more:
                break
        return expired, trimmed

    async def run_once(self) -> RoundResult:
        """One round over every topic; this gateway does the topics it wins the lock of."""
        result = RoundResult()
        for topic in await self.topics():
            try:
                done = await self.run_topic(topic)
            except (GatewayError, RedisError) as exc:
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
