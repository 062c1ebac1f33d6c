"""Inactive topics and expired subscriptions: Pulsar's topic garbage collection
(``inactiveTopicPolicies``) and subscription expiry (``subscriptionExpirationTime``) over
the fleet.

Theory of operation. A Pulsar broker checks the topics it has loaded every
``brokerDeleteInactiveTopicsFrequencySeconds`` (``BrokerService.checkGC`` ->
``PersistentTopic.checkGC``): a topic whose ``InactiveTopicPolicies`` say
``deleteWhileInactive`` and that has been inactive (``isActive(deleteMode)``: no producer,
no consumer and, by the mode, no subscription or no backlog) for ``maxInactiveDurationSeconds``
since it was last active, and for longer than its retention time, is deleted as an admin
delete would (data, subscriptions, topic policies); a partition's partitioned metadata goes
too once every partition is gone, when ``brokerDeleteInactivePartitionedTopicMetadataEnabled``.
Every ``subscriptionExpiryCheckIntervalInMinutes`` it deletes the durable subscriptions
that have had no consumer for the namespace's ``subscriptionExpirationTime`` minutes
(``PersistentTopic.checkInactiveSubscriptions``).

Here no gateway owns a topic, so the state lives in Redis and the checks are sweeps over
every topic of the fleet (the namespace topic sets, as the maintenance rounds list them):

* Each gateway checks the topics it wins the rendezvous hash of
  (:meth:`~pulsar_gateway.core.fleet.membership.Fleet.owns`, the same share as its
  ``/metrics``), so each topic is checked by one gateway while the members' views agree and
  by two at most for a heartbeat when they do not; both would only find the same answer.
* "Active" and "last active" are read from Redis by one script per topic partition
  (``inactive_topic.lua``, ``inactive_subscriptions.lua``): live leases of producers and
  consumers, the subscriptions, their backlogs, the last append, and a mark each script
  keeps (the time a sweep last found the topic, or the subscription, active: Pulsar's
  ``lastActive``; a subscription's is also set by every consumer leaving it, once a sweep
  has marked it, as Pulsar's ``removeConsumer`` does). Nothing is written on the message
  path.
* The decision is data (:func:`deletion_threshold_ms`, :func:`expired_subscriptions`), and
  the deletion is the admin API's own (``delete_topic.lua`` through
  :class:`~pulsar_gateway.core.topics.partitioned_topics.PartitionedTopics`,
  ``subscription_delete.lua``), which refuses atomically while a producer or consumer
  holds a live lease anywhere in the fleet: a topic or subscription in use is never
  deleted. Between the check and the deletion (two Redis calls) a client could come and go
  unseen; Pulsar's ``checkGC`` has the same window between ``isActive`` and ``delete``.

Departures, by design: Pulsar enables topic deletion by default
(``brokerDeleteInactiveTopicsEnabled=true``); here the gateway default is off, because
users' topics vanishing is the worse surprise, and a policy set at namespace or topic level
turns it on whatever the default (in Pulsar, with the broker option off no topic is ever
checked). Non-persistent topics are not collected: their producers are registered nowhere,
so the fleet cannot tell an idle one from a busy one. A topic with nothing in Redis but its
name (created and never used) has nowhere to keep a mark: the gateway that checks it
remembers when it first found it so, in memory, as a broker keeps ``lastActive``.

:meth:`InactiveTopics.run_gc_once` and :meth:`InactiveTopics.run_expiry_once` are one sweep
each, callable from tests; :meth:`InactiveTopics.start` loops them.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from pulsar_gateway.core.errors import GatewayError, TopicBusy, TopicNotFound
from pulsar_gateway.core.model.topic_name import TopicName, parse_topic_name
from pulsar_gateway.core.periodic import Periodic
from pulsar_gateway.core.policies.policies import (
    INACTIVE_TOPIC_POLICY,
    SUBSCRIPTION_EXPIRATION_POLICY,
    Policies,
)
from pulsar_gateway.core.policies.retention import Lifecycle, resolve_lifecycle
from pulsar_gateway.core.storage import topic_store
from pulsar_gateway.core.storage.keys import KeySchema, TopicKeys
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import cursors, inactivity
from pulsar_gateway.core.storage.scripts.cursors import DeleteStatus
from pulsar_gateway.core.storage.scripts.inactivity import ActivityStatus, InactiveMode
from pulsar_gateway.core.topics.partitioned_topics import PartitionedTopics

__all__ = [
    "DELETE_WHEN_NO_SUBSCRIPTIONS",
    "DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP",
    "ExpiryRound",
    "GcRound",
    "InactiveTopicPolicies",
    "InactiveTopics",
    "TopicOutcome",
    "deletion_threshold_ms",
    "expiration_ms",
    "expired_subscriptions",
]

log = logging.getLogger(__name__)

#: Pulsar's ``InactiveTopicDeleteMode`` values.
DELETE_WHEN_NO_SUBSCRIPTIONS = "delete_when_no_subscriptions"
DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP = "delete_when_subscriptions_caught_up"
_MODES: Mapping[str, InactiveMode] = {
    DELETE_WHEN_NO_SUBSCRIPTIONS: InactiveMode.NO_SUBSCRIPTIONS,
    DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP: InactiveMode.CAUGHT_UP,
}

#: Times a topic's subscriptions are listed again when they change under the check.
_RETRIES = 5


@dataclass(frozen=True, slots=True)
class InactiveTopicPolicies:
    """Pulsar's ``InactiveTopicPolicies``: whether an inactive topic is deleted, after how
    long, and what counts as inactive."""

    delete_mode: str = DELETE_WHEN_NO_SUBSCRIPTIONS
    max_inactive_seconds: int = 60
    delete_while_inactive: bool = False

    @property
    def mode(self) -> InactiveMode:
        return _MODES[self.delete_mode]

    @classmethod
    def from_json(cls, value: Any, default: InactiveTopicPolicies) -> InactiveTopicPolicies:
        """A stored policy value; ``default`` for None, and for each field it lacks or
        holds malformed (the admin API stores whole, valid objects)."""
        if not isinstance(value, Mapping):
            return default
        mode = value.get("inactiveTopicDeleteMode")
        seconds = value.get("maxInactiveDurationSeconds")
        enabled = value.get("deleteWhileInactive")
        return cls(
            str(mode) if mode in _MODES else default.delete_mode,
            seconds
            if isinstance(seconds, int) and not isinstance(seconds, bool) and seconds >= 0
            else default.max_inactive_seconds,
            enabled if isinstance(enabled, bool) else default.delete_while_inactive,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "inactiveTopicDeleteMode": self.delete_mode,
            "maxInactiveDurationSeconds": self.max_inactive_seconds,
            "deleteWhileInactive": self.delete_while_inactive,
        }


def deletion_threshold_ms(policy: InactiveTopicPolicies, retention_minutes: int) -> int | None:
    """How long (ms) a topic must have been inactive before it is deleted; None: never.

    Pulsar's ``checkGC``: nothing unless ``deleteWhileInactive``; not before
    ``maxInactiveDurationSeconds``; and not while ``shouldTopicBeRetained``: an infinite
    retention time (-1) keeps the topic for ever, a finite one for that long after it was
    last active (the retention size plays no part).
    """
    if not policy.delete_while_inactive or retention_minutes < 0:
        return None
    return max(policy.max_inactive_seconds * 1000, retention_minutes * 60_000)


def expiration_ms(value: Any, default_minutes: int) -> int:
    """The subscription expiration time in force (ms; 0: subscriptions never expire): the
    namespace's ``subscriptionExpirationTime`` minutes when set (0 included), else the
    gateway's default, as Pulsar's ``checkInactiveSubscriptions`` resolves them."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value * 60_000
    return max(default_minutes, 0) * 60_000


def expired_subscriptions(idle: Mapping[str, int], expiration: int) -> list[str]:
    """The subscriptions, of those without a consumer for ``idle[name]`` ms, whose time is
    up (Pulsar: inactive for longer than the expiration time); none when it is 0."""
    if expiration <= 0:
        return []
    return sorted(name for name, inactive in idle.items() if inactive > expiration)


class TopicOutcome(enum.Enum):
    """What one check did to one topic partition."""

    #: no policy deletes it (or the gateway does not collect its kind)
    NOT_COLLECTED = "not collected"
    ACTIVE = "active"
    #: inactive, not for long enough
    INACTIVE = "inactive"
    DELETED = "deleted"
    #: due, but a client attached before the deletion, or another gateway deleted it first
    KEPT = "kept"


@dataclass(slots=True)
class GcRound:
    """What one inactive-topic sweep did on this gateway."""

    checked: int = 0
    active: int = 0
    inactive: int = 0
    deleted: int = 0
    errors: int = 0


@dataclass(slots=True)
class ExpiryRound:
    """What one subscription-expiry sweep did on this gateway."""

    topics: int = 0
    expired: int = 0
    errors: int = 0


class InactiveTopics:
    """This gateway's share of the fleet's inactive-topic and subscription-expiry sweeps.

    Args:
        lane: storage; ``keys``: the key schema.
        policies: namespace and topic policies.
        topics: the namespaces' topics, and the admin deletions this reuses.
        owns: whether this gateway checks a topic (its rendezvous share of the fleet).
        defaults: the inactive-topic policies of topics without one (the gateway's
            ``brokerDeleteInactiveTopics*`` options).
        lifecycle_defaults: the gateway's retention, for topics without a retention policy.
        subscription_expiration_minutes: the expiration of namespaces without a
            ``subscriptionExpirationTime`` (``subscriptionExpirationTimeMinutes``; 0: none).
        delete_partitioned_metadata: delete a partitioned topic's metadata once every
            partition was deleted for inactivity
            (``brokerDeleteInactivePartitionedTopicMetadataEnabled``).
        gc_interval: seconds between inactive-topic sweeps
            (``brokerDeleteInactiveTopicsFrequencySeconds``).
        expiry_interval: seconds between subscription-expiry sweeps
            (``subscriptionExpiryCheckIntervalInMinutes``); 0: none.
        registry: where its counters are exported.
    """

    def __init__(
        self,
        lane: Lane,
        keys: KeySchema,
        policies: Policies,
        topics: PartitionedTopics,
        *,
        owns: Callable[[str], bool],
        defaults: InactiveTopicPolicies,
        lifecycle_defaults: Lifecycle,
        subscription_expiration_minutes: int,
        delete_partitioned_metadata: bool,
        gc_interval: float,
        expiry_interval: float,
        registry: CollectorRegistry,
    ) -> None:
        self._lane = lane
        self._keys = keys
        self._policies = policies
        self._topics = topics
        self._owns = owns
        self.defaults = defaults
        self._lifecycle_defaults = lifecycle_defaults
        self._expiration_minutes = subscription_expiration_minutes
        self._delete_metadata = delete_partitioned_metadata
        #: topics with nothing stored, by when this gateway first found them so (monotonic)
        self._nothing_stored_since: dict[str, float] = {}
        self._gc = Periodic("inactive topic check", gc_interval, self.run_gc_once)
        self._expiry = (
            Periodic("subscription expiry check", expiry_interval, self.run_expiry_once)
            if expiry_interval > 0
            else None
        )
        self.deleted_topics = Counter(
            "pulsar_gateway_inactive_topics_deleted",
            "Topic partitions deleted for inactivity (inactiveTopicPolicies)",
            registry=registry,
        )
        self.expired_subscriptions = Counter(
            "pulsar_gateway_expired_subscriptions_deleted",
            "Subscriptions deleted for having no consumer for subscriptionExpirationTime",
            registry=registry,
        )

    def start(self) -> None:
        self._gc.start()
        if self._expiry is not None:
            self._expiry.start()

    async def stop(self) -> None:
        await self._gc.stop()
        if self._expiry is not None:
            await self._expiry.stop()

    # -- inactive topics -----------------------------------------------------------------

    async def policy(self, topic: TopicName) -> InactiveTopicPolicies:
        """The inactive-topic policies in force: the topic's, else its namespace's, else
        the gateway's."""
        value = await self._policies.effective(topic, INACTIVE_TOPIC_POLICY)
        return InactiveTopicPolicies.from_json(value, self.defaults)

    async def run_gc_once(self) -> GcRound:
        """One sweep over the persistent topics this gateway checks."""
        result = GcRound()
        listed = await self._topics.all_topics()
        self._forget_unlisted(listed)
        for name in self._checked_here(listed):
            try:
                outcome = await self.check_topic(name)
            except GatewayError as exc:
                log.warning("inactive topic check of %s failed: %s", name, exc)
                result.errors += 1
                continue
            if outcome is TopicOutcome.NOT_COLLECTED:
                continue
            result.checked += 1
            if outcome is TopicOutcome.ACTIVE:
                result.active += 1
            elif outcome is TopicOutcome.INACTIVE:
                result.inactive += 1
            elif outcome is TopicOutcome.DELETED:
                result.deleted += 1
        self.deleted_topics.inc(result.deleted)
        return result

    def _checked_here(self, listed: Iterable[str]) -> Iterator[TopicName]:
        """The persistent topic partitions of ``listed`` this gateway checks (its share)."""
        for topic in listed:
            if self._owns(topic):
                name = parse_topic_name(topic)
                if name.persistent:
                    yield name

    async def check_topic(self, name: TopicName) -> TopicOutcome:
        """Check one persistent topic partition, and delete it when its time is up."""
        policy = await self.policy(name)
        topic = str(name)
        threshold = None
        if policy.delete_while_inactive:  # else no retention lookup: the common case
            lifecycle = await resolve_lifecycle(self._policies, name, self._lifecycle_defaults)
            threshold = deletion_threshold_ms(policy, lifecycle.retention_minutes)
        if threshold is None:
            self._nothing_stored_since.pop(topic, None)
            return TopicOutcome.NOT_COLLECTED
        keys = self._keys.topic(name)
        activity = await self._activity(keys, policy.mode)
        if activity is None or activity.status is ActivityStatus.ACTIVE:
            self._nothing_stored_since.pop(topic, None)
            return TopicOutcome.ACTIVE
        if activity.status is ActivityStatus.NOTHING_STORED:
            first = self._nothing_stored_since.setdefault(topic, time.monotonic())
            inactive_ms = int((time.monotonic() - first) * 1000)
        else:
            self._nothing_stored_since.pop(topic, None)
            inactive_ms = activity.inactive_ms
        if inactive_ms < threshold:
            return TopicOutcome.INACTIVE
        return await self._delete(name)

    async def _activity(self, keys: TopicKeys, mode: InactiveMode) -> inactivity.Activity | None:
        """The topic's activity; None when its subscriptions kept changing (in use)."""
        for _ in range(_RETRIES):
            subscriptions = await topic_store.subscription_names(self._lane, keys)
            activity = await inactivity.inactive_topic(
                self._lane, keys, mode=mode, subscriptions=subscriptions
            )
            if activity.status is not ActivityStatus.RETRY:
                return activity
        return None

    async def _delete(self, name: TopicName) -> TopicOutcome:
        topic = str(name)
        self._nothing_stored_since.pop(topic, None)
        try:
            await self._topics.delete(name, force=False)
        except TopicBusy:
            # a client attached since the check (Pulsar: "Did not delete busy topic")
            return TopicOutcome.KEPT
        except TopicNotFound:
            return TopicOutcome.KEPT  # another gateway, or the admin API, came first
        log.info("[%s] Topic deleted successfully due to inactivity", topic)
        if name.partition_index >= 0 and self._delete_metadata:
            await self._delete_partitioned_metadata(name.partitioned_topic_name)
        return TopicOutcome.DELETED

    async def _delete_partitioned_metadata(self, base: TopicName) -> None:
        """Delete the partitioned topic once none of its partitions exists (Pulsar's
        ``tryToDeletePartitionedMetadata``), with the admin API's deletion, which refuses
        while a client uses a partition."""
        count = await self._topics.partitions(base)
        if count <= 0:
            return
        listed = await asyncio.gather(
            *(self._topics.exists(base.partition(i)) for i in range(count))
        )
        if any(listed):
            return
        try:
            await self._topics.delete_partitioned(base, force=False)
        except (TopicBusy, TopicNotFound):
            return
        log.info("[%s] Partitioned topic metadata deleted: every partition was inactive", base)

    def _forget_unlisted(self, listed: list[str]) -> None:
        gone = self._nothing_stored_since.keys() - set(listed)
        for topic in gone:
            del self._nothing_stored_since[topic]

    # -- expired subscriptions -----------------------------------------------------------

    async def expiration(self, name: TopicName) -> int:
        """The subscription expiration time of the topic's namespace, ms (0: none)."""
        value = await self._policies.get_namespace(name.namespace, SUBSCRIPTION_EXPIRATION_POLICY)
        return expiration_ms(value, self._expiration_minutes)

    async def run_expiry_once(self) -> ExpiryRound:
        """One sweep over the subscriptions of the persistent topics this gateway checks."""
        result = ExpiryRound()
        for name in self._checked_here(await self._topics.all_topics()):
            try:
                expiration = await self.expiration(name)
                if expiration <= 0:
                    continue
                result.topics += 1
                result.expired += await self.expire_subscriptions(name, expiration)
            except GatewayError as exc:
                log.warning("subscription expiry check of %s failed: %s", name, exc)
                result.errors += 1
        self.expired_subscriptions.inc(result.expired)
        return result

    async def expire_subscriptions(self, name: TopicName, expiration: int) -> int:
        """Delete the topic partition's subscriptions that have had no consumer for longer
        than ``expiration`` ms; returns how many were deleted."""
        keys = self._keys.topic(name)
        subscriptions = await topic_store.subscription_names(self._lane, keys)
        if not subscriptions:
            return 0
        idle = await inactivity.inactive_subscriptions(
            self._lane, keys, subscriptions=subscriptions
        )
        deleted = 0
        for subscription in expired_subscriptions(idle, expiration):
            reply = await cursors.subscription_delete(
                self._lane,
                keys.subscription(subscription),
                subscription=subscription,
                force=False,
                dry_run=False,
            )
            if reply.status is DeleteStatus.DELETED:
                deleted += 1
                log.info(
                    "[%s][%s] The subscription was deleted due to expiration "
                    "(no consumer for %d ms)",
                    name,
                    subscription,
                    idle[subscription],
                )
        return deleted
