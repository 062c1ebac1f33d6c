"""Backlog quotas (Pulsar's ``BacklogQuota``), kept as one policy per namespace or topic.

The policy ``backlogQuota`` (:mod:`pulsar_gateway.core.policies.policies`) holds the map Pulsar
calls ``backlog_quota_map``: quota type -> quota, where the type is ``destination_storage`` (a limit
on the backlog's size in bytes) or ``message_age`` (a limit on the age of the oldest unacknowledged
message, in seconds), and each quota is stored exactly as Pulsar's admin API
returns it (``BacklogQuotaImpl`` through Jackson)::

    {"limit": 1048576, "limitSize": 1048576, "limitTime": -1, "policy": "producer_exception"}

``limit`` is Pulsar's deprecated alias of ``limitSize`` (still written, since clients read
it). ``-1`` means no limit. ``policy`` is the ``RetentionPolicy`` applied when the quota is
exceeded: ``producer_request_hold``, ``producer_exception`` or
``consumer_backlog_eviction``.

What a quota enforces (Pulsar ``BacklogQuotaManager``, ``PersistentTopic``): per type, the
topic's quota, else its namespace's (:func:`applied_quotas`); a ``destination_storage`` quota
with ``limitSize`` >= 0 is over when the slowest subscription's backlog, estimated in bytes,
is larger; a ``message_age`` quota with ``limitTime`` > 0 when the oldest unacknowledged
message is older (``MessageImpl.isEntryExpired``); size is checked before age. A new
producer on a topic over a ``producer_request_hold`` or ``producer_exception`` quota is
refused (:func:`check_producer`, the check ``ServerCnx.handleProducer`` makes), with one
error per policy; what happens to producers already connected, and eviction, is the
monitor's (:mod:`pulsar_gateway.core.policies.backlog_quota_monitor`).

Parsing, the retention cross-check and the rules above are pure (tested without Redis);
:class:`BacklogQuotas` reads and changes the maps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pulsar_gateway.core.errors import (
    ConcurrentModification,
    ProducerBlockedQuotaExceeded,
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
)
from pulsar_gateway.core.model.topic_name import TopicName, parse_topic_name
from pulsar_gateway.core.policies.policies import Policies
from pulsar_gateway.core.storage import policy_store
from pulsar_gateway.core.storage.keys import KeySchema, TopicKeys
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import metadata, text, topics
from pulsar_gateway.core.storage.scripts.topics import BacklogUsage, EvictionMode

__all__ = [
    "BACKLOG_QUOTA_POLICY",
    "CONSUMER_BACKLOG_EVICTION",
    "DEFAULT_QUOTA_TYPE",
    "DESTINATION_STORAGE",
    "EVICTION_SIZE_FACTOR",
    "MESSAGE_AGE",
    "PRODUCER_EXCEPTION",
    "PRODUCER_REQUEST_HOLD",
    "QUOTA_TYPES",
    "REFUSAL",
    "RETENTION_POLICIES",
    "BacklogQuotas",
    "Eviction",
    "Quota",
    "applied_quotas",
    "check_producer",
    "enforced_quota",
    "exceeds_retention",
    "first_exceeded",
    "parse_backlog_quota",
    "parse_quota_type",
    "resolve_quotas",
]

#: Name of the policy (in the namespace and topic policy hashes) holding the quota map.
BACKLOG_QUOTA_POLICY = "backlogQuota"
#: ``BacklogQuota.BacklogQuotaType``: a limit on the backlog's size, or on its age.
DESTINATION_STORAGE = "destination_storage"
MESSAGE_AGE = "message_age"
QUOTA_TYPES = (DESTINATION_STORAGE, MESSAGE_AGE)
#: What Pulsar assumes when ``backlogQuotaType`` is absent (``internalSetBacklogQuota``).
DEFAULT_QUOTA_TYPE = DESTINATION_STORAGE
#: ``BacklogQuota.RetentionPolicy``: what a quota does to a topic over it.
PRODUCER_REQUEST_HOLD = "producer_request_hold"
PRODUCER_EXCEPTION = "producer_exception"
CONSUMER_BACKLOG_EVICTION = "consumer_backlog_eviction"
RETENTION_POLICIES = (PRODUCER_REQUEST_HOLD, PRODUCER_EXCEPTION, CONSUMER_BACKLOG_EVICTION)
#: Pulsar's ``backlogQuotaDefaultRetentionPolicy``, used when a body names no policy.
DEFAULT_RETENTION_POLICY = PRODUCER_REQUEST_HOLD
#: Eviction by size cuts the backlog to this share of the limit
#: (``dropBacklogForSizeLimit``'s ``reductionFactor``).
EVICTION_SIZE_FACTOR = 0.9
#: Pulsar's refusal (``TopicBacklogQuotaExceededException``).
REFUSAL = "Cannot create producer on topic with backlog quota exceeded"

#: The retention policy's name in the policy hashes
#: (pulsar_gateway/adapters/http/admin/policies.py).
RETENTION_POLICY = "retention"
_CAS_ATTEMPTS = 10

_INT64 = (-(2**63), 2**63 - 1)
_INT32 = (-(2**31), 2**31 - 1)


def parse_quota_type(value: str | None) -> str:
    """The ``backlogQuotaType`` query parameter; absent means ``destination_storage``.

    Raises:
        ValueError: not one of :data:`QUOTA_TYPES`.
    """
    if value is None or value == "":
        return DEFAULT_QUOTA_TYPE
    if value not in QUOTA_TYPES:
        raise ValueError(f"Invalid backlogQuotaType {value!r}: expected one of {QUOTA_TYPES}")
    return value


def _integer(value: Any, field: str, bounds: tuple[int, int]) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field} must be an integer")
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{field} is out of range")
    return value


def parse_backlog_quota(value: Any) -> dict[str, Any]:
    """Validate a ``BacklogQuota`` body and return it in stored (and answered) form.

    Read as Jackson reads ``BacklogQuotaImpl``: ``limitSize`` (or the deprecated ``limit``)
    a long, ``limitTime`` an int (both 0 when absent, as the no-argument constructor
    leaves them), ``policy`` one of :data:`RETENTION_POLICIES` (absent: Pulsar's default
    ``producer_request_hold``); unknown fields are ignored.

    Raises:
        ValueError: not an object, a number of the wrong type or range, an unknown policy
            (Pulsar's 400 for a body Jackson cannot read).
    """
    if not isinstance(value, dict):
        raise ValueError('expected {"limitSize": long, "limitTime": int, "policy": "..."}')
    raw_size = value.get("limitSize")
    if raw_size is None:
        raw_size = value.get("limit", 0)
    size = _integer(raw_size, "limitSize", _INT64)
    limit_time = _integer(value.get("limitTime", 0), "limitTime", _INT32)
    policy = value.get("policy")
    if policy is None:
        policy = DEFAULT_RETENTION_POLICY
    if policy not in RETENTION_POLICIES:
        raise ValueError(f"policy must be one of {RETENTION_POLICIES}")
    return {"limit": size, "limitSize": size, "limitTime": limit_time, "policy": policy}


def exceeds_retention(quota: dict[str, Any], retention: Any) -> bool:
    """Whether ``quota`` is at or above the retention limits (Pulsar's
    ``AdminResource.checkBacklogQuota`` refuses it with 412): a backlog may not be allowed
    to hold more, or older, data than retention keeps. Retention of -1 or 0 sets no bound.
    """
    if not isinstance(retention, dict):
        return False
    size_mb = retention.get("retentionSizeInMB", 0)
    minutes = retention.get("retentionTimeInMinutes", 0)
    if size_mb > 0 and quota["limitSize"] >= size_mb * 1024 * 1024:
        return True
    return bool(minutes > 0 and quota["limitTime"] >= minutes * 60)


class BacklogQuotas:
    """Read and change the backlog quota maps of namespaces and topics in Redis.

    Reads go to Redis (no cache): they serve the admin API, which must see its own writes
    at once. A change is a compare-and-set (``policy_cas.lua``) retried a few times, so
    two admins changing different quota types of one namespace both win.
    """

    def __init__(self, lane: Lane, keys: KeySchema) -> None:
        self._lane = lane
        self._keys = keys

    def _key(self, scope: str, topic_level: bool) -> str:
        if topic_level:
            name = parse_topic_name(scope).partitioned_topic_name
            return self._keys.topic_policies(name)
        return self._keys.namespace_policies(scope)

    async def _read(self, key: str, name: str) -> tuple[str, Any]:
        raw = await policy_store.stored_value(self._lane, key, name)
        if raw is None:
            return "", None
        stored = text(raw)
        return stored, json.loads(stored)

    async def quota_map(self, scope: str, topic_level: bool) -> dict[str, Any]:
        """The quota map set on a namespace (``tenant/ns``) or topic; {} when none."""
        _, value = await self._read(self._key(scope, topic_level), BACKLOG_QUOTA_POLICY)
        return value if isinstance(value, dict) else {}

    async def retention(self, scope: str, topic_level: bool) -> Any:
        """The retention that bounds quotas: the topic's, else its namespace's."""
        _, value = await self._read(self._key(scope, topic_level), RETENTION_POLICY)
        if value is None and topic_level:
            namespace = parse_topic_name(scope).namespace
            _, value = await self._read(self._key(namespace, False), RETENTION_POLICY)
        return value

    async def change(
        self, scope: str, topic_level: bool, quota_type: str, quota: dict[str, Any] | None
    ) -> None:
        """Set (``quota``) or remove (None) one quota type.

        Raises:
            ConcurrentModification: the map kept changing under us.
        """
        key = self._key(scope, topic_level)
        for _ in range(_CAS_ATTEMPTS):
            raw, value = await self._read(key, BACKLOG_QUOTA_POLICY)
            quotas = dict(value) if isinstance(value, dict) else {}
            if quota is None:
                quotas.pop(quota_type, None)
            else:
                quotas[quota_type] = quota
            new = json.dumps(quotas, sort_keys=True) if quotas else ""
            written = await metadata.policy_cas(
                self._lane, key, name=BACKLOG_QUOTA_POLICY, expected=raw, value=new
            )
            if written:
                # Every gateway drops its cached policies (pulsar_gateway.core.policies.policies).
                self._lane.notify(self._keys.policies_channel)
                return
        raise ConcurrentModification("Concurrent modification")


# -- enforcement ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Eviction:
    """What ``backlog_evict.lua`` is asked to do for a quota: evict ``mode`` when the
    backlog is over ``limit`` (bytes, or ms of age), down to ``target``."""

    mode: EvictionMode
    limit: int
    target: int


@dataclass(frozen=True, slots=True)
class Quota:
    """One quota a topic enforces.

    Attributes:
        quota_type: ``destination_storage`` or ``message_age``.
        limit: bytes (``limitSize``) or seconds (``limitTime``).
        policy: one of :data:`RETENTION_POLICIES`.
    """

    quota_type: str
    limit: int
    policy: str

    @property
    def blocks_producers(self) -> bool:
        """Whether the policy refuses producers (eviction never does)."""
        return self.policy != CONSUMER_BACKLOG_EVICTION

    def exceeded_by(self, usage: BacklogUsage) -> bool:
        """Whether ``usage`` is over this quota: a backlog larger than the size limit, or
        an oldest unacknowledged message older than the age limit (``isEntryExpired``:
        now > publish time + limit)."""
        if self.quota_type == DESTINATION_STORAGE:
            return usage.size > self.limit
        return usage.age_ms > self.limit * 1000

    def refusal(self) -> ProducerBlockedQuotaExceeded:
        """The error refusing a producer, by policy (``ServerCnx.handleProducer``)."""
        if self.policy == PRODUCER_REQUEST_HOLD:
            return ProducerBlockedQuotaExceededError(REFUSAL)
        return ProducerBlockedQuotaExceededException(REFUSAL)

    def eviction(self) -> Eviction:
        """What ``consumer_backlog_eviction`` does: by size, down to 90% of the limit
        (``dropBacklogForSizeLimit``); by age, every message older than the limit (what
        Pulsar's default ``dropBacklogForTimeLimit`` drops, ledgers all older than the
        limit, here message by message: nothing younger is lost)."""
        if self.quota_type == DESTINATION_STORAGE:
            return Eviction(EvictionMode.SIZE, self.limit, int(self.limit * EVICTION_SIZE_FACTOR))
        return Eviction(EvictionMode.AGE, self.limit * 1000, self.limit * 1000)


def enforced_quota(quota_type: str, value: Any) -> Quota | None:
    """The quota a stored quota value of ``quota_type`` enforces; None when it sets no
    limit (``limitSize`` < 0, ``limitTime`` <= 0: Pulsar checks neither) or is not a
    quota."""
    if not isinstance(value, dict):
        return None
    field, lowest = ("limitSize", 0) if quota_type == DESTINATION_STORAGE else ("limitTime", 1)
    limit = value.get(field)
    policy = value.get("policy", DEFAULT_RETENTION_POLICY)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < lowest:
        return None
    if policy not in RETENTION_POLICIES:
        return None
    return Quota(quota_type, limit, policy)


def resolve_quotas(topic_map: Any, namespace_map: Any) -> list[Quota]:
    """The quotas a topic enforces, ``destination_storage`` first: for each type the
    topic's quota if it sets one of that type, else its namespace's (Pulsar resolves
    ``getBacklogQuota`` per type, so a topic's size quota leaves its namespace's age quota
    in force)."""
    quotas = []
    for quota_type in QUOTA_TYPES:
        value = None
        for level in (topic_map, namespace_map):
            if isinstance(level, dict) and quota_type in level:
                value = level[quota_type]
                break
        quota = enforced_quota(quota_type, value)
        if quota is not None:
            quotas.append(quota)
    return quotas


def first_exceeded(quotas: list[Quota], usage: BacklogUsage) -> Quota | None:
    """The first of ``quotas`` that ``usage`` is over (size before age, as Pulsar's
    monitor checks them), None when none is."""
    for quota in quotas:
        if quota.exceeded_by(usage):
            return quota
    return None


async def applied_quotas(policies: Policies, topic: TopicName) -> list[Quota]:
    """The quotas ``topic`` enforces (:func:`resolve_quotas` over its cached policies)."""
    return resolve_quotas(
        await policies.get_topic(topic, BACKLOG_QUOTA_POLICY),
        await policies.get_namespace(topic.namespace, BACKLOG_QUOTA_POLICY),
    )


async def check_producer(policies: Policies, lane: Lane, topic: TopicName, keys: TopicKeys) -> None:
    """Refuse a new producer while the topic's backlog is over a ``producer_request_hold``
    or ``producer_exception`` quota (``PersistentTopic.checkBacklogQuotaExceeded``, size
    then age, at producer creation).

    One cached policy read per producer creation, and one read-only script call only when
    such a quota is set.

    Raises:
        ProducerBlockedQuotaExceededError: over a ``producer_request_hold`` quota.
        ProducerBlockedQuotaExceededException: over a ``producer_exception`` quota.
    """
    quotas = [quota for quota in await applied_quotas(policies, topic) if quota.blocks_producers]
    if not quotas:
        return
    quota = first_exceeded(quotas, await topics.backlog_usage(lane, keys))
    if quota is not None:
        raise quota.refusal()
