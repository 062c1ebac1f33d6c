"""The backlog quota monitor: what a quota does to topics already in use.

Theory of operation. Pulsar's broker checks its loaded topics every
``backlogQuotaCheckIntervalInSeconds`` (``BrokerService.monitorBacklogQuota``) and applies the
policy of the first quota a topic is over (``BacklogQuotaManager.handleExceededBacklogQuota``).
Here every gateway does the same, every ``--backlog-quota-check-interval-seconds``, for the
persistent topics its own producers and consumers use (what a broker has loaded: the topics
of its own clients). A topic with an enforced quota costs one read-only script
(``backlog_usage.lua``); one without, nothing but a cached policy read. Over a quota (size
before age, :func:`~pulsar_gateway.core.policies.backlog_quota.first_exceeded`):

* ``producer_request_hold``, ``producer_exception``: this gateway disconnects its producers
  on the topic (Pulsar's ``disconnectProducers``: CLOSE_PRODUCER on the binary protocol).
  The client reconnects, and its PRODUCER is refused while the backlog stays over the quota
  (:func:`~pulsar_gateway.core.policies.backlog_quota.check_producer`): with
  ``ProducerBlockedQuotaExceededError`` the client keeps its messages and tries again, with
  ``ProducerBlockedQuotaExceededException`` it fails them. Each gateway disconnects its own
  producers; none needs to know of the others'.
* ``consumer_backlog_eviction``: ``backlog_evict.lua`` drops the oldest unacknowledged
  messages, by size down to 90% of the limit, by age those older than the limit. The script
  checks the quota again and evicts in one step, so the gateways that find the same topic
  over its quota at the same time evict once. Producers are never blocked by it.

:meth:`BacklogQuotaMonitor.run_once` is one round, callable from tests;
:meth:`BacklogQuotaMonitor.start` loops it (unless disabled: Pulsar's
``backlogQuotaCheckEnabled``; new producers are checked either way).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from pulsar_gateway.core.errors import GatewayError
from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.periodic import Periodic
from pulsar_gateway.core.policies.backlog_quota import (
    CONSUMER_BACKLOG_EVICTION,
    Quota,
    applied_quotas,
    first_exceeded,
)
from pulsar_gateway.core.policies.policies import Policies
from pulsar_gateway.core.storage import topic_store
from pulsar_gateway.core.storage.keys import KeySchema, TopicKeys
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import topics

__all__ = ["BacklogQuotaMonitor", "CheckRound"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class CheckRound:
    """What one round did on this gateway.

    Attributes:
        topics: persistent topics checked.
        exceeded: topics found over a quota.
        disconnected: producers disconnected.
        evicted: topics whose backlog was cut (by this gateway: another one may have
            come first).
        errors: topics whose check failed (Redis unavailable): tried again next round.
    """

    topics: int = 0
    exceeded: int = 0
    disconnected: int = 0
    evicted: int = 0
    errors: int = 0


class BacklogQuotaMonitor:
    """This gateway's backlog quota checks of the topics it serves.

    Args:
        lane: storage; ``keys``: the key schema.
        policies: namespace and topic policies (the quotas).
        topics: the full names of the topics this gateway's producers and consumers use.
        disconnect_producers: closes this gateway's producers on a topic from the
            gateway's side; returns how many
            (:meth:`~pulsar_gateway.core.producing.producer_service.ProducerService.disconnect`).
        interval: seconds between rounds (``backlogQuotaCheckIntervalInSeconds``).
        enabled: whether rounds run at all (``backlogQuotaCheckEnabled``).
    """

    def __init__(
        self,
        lane: Lane,
        keys: KeySchema,
        policies: Policies,
        *,
        topics: Callable[[], Iterable[str]],
        disconnect_producers: Callable[[str], Awaitable[int]],
        interval: float,
        enabled: bool = True,
    ) -> None:
        self._lane = lane
        self._keys = keys
        self._policies = policies
        self._topics = topics
        self._disconnect = disconnect_producers
        self.interval = interval
        self.enabled = enabled
        self._rounds = Periodic("backlog quota check", interval, self.run_once)

    def start(self) -> None:
        if self.enabled:
            self._rounds.start()

    async def stop(self) -> None:
        await self._rounds.stop()

    async def check_topic(self, topic: str, result: CheckRound) -> None:
        """Check one topic and apply the policy of the first quota it is over."""
        name = parse_topic_name(topic)
        quotas = await applied_quotas(self._policies, name)
        if not quotas:
            return
        keys = self._keys.topic(name)
        quota = first_exceeded(quotas, await topics.backlog_usage(self._lane, keys))
        if quota is None:
            return
        result.exceeded += 1
        log.info(
            "Backlog quota type %s exceeded for topic [%s]. Applying [%s] policy",
            quota.quota_type,
            topic,
            quota.policy,
        )
        if quota.policy == CONSUMER_BACKLOG_EVICTION:
            if await self._evict(keys, quota):
                result.evicted += 1
            return
        result.disconnected += await self._disconnect(topic)

    async def _evict(self, keys: TopicKeys, quota: Quota) -> bool:
        subscriptions = await topic_store.subscription_names(self._lane, keys)
        eviction = quota.eviction()
        cut = await topics.backlog_evict(
            self._lane,
            keys,
            mode=eviction.mode,
            limit=eviction.limit,
            target=eviction.target,
            subscriptions=subscriptions,
        )
        if cut is None:
            return False  # another gateway evicted first
        log.info("backlog of %d subscriptions of [%s] cut (%s)", cut, keys.topic, quota.quota_type)
        return True

    async def run_once(self) -> CheckRound:
        """One round over the persistent topics this gateway's clients use."""
        result = CheckRound()

        async def check(topic: str) -> None:
            try:
                await self.check_topic(topic, result)
            except GatewayError as exc:
                log.warning("backlog quota check of %s failed: %s", topic, exc)
                result.errors += 1

        # no backlog, no quota on non-persistent topics (Pulsar ignores them there)
        persistent = [t for t in sorted(set(self._topics())) if parse_topic_name(t).persistent]
        result.topics = len(persistent)
        # side by side: their policy reads and usage scripts share pipelines
        await asyncio.gather(*(check(topic) for topic in persistent))
        return result
