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

Parsing and the retention cross-check are pure (tested without Redis);
:class:`BacklogQuotas` reads and changes the maps.
"""

from __future__ import annotations

import json
from typing import Any

from pulsar_gateway.core.errors import ConcurrentModification, ProducerBlockedQuotaExceeded
from pulsar_gateway.core.model.topic_name import TopicName, parse_topic_name
from pulsar_gateway.core.policies.policies import Policies
from pulsar_gateway.core.storage.keys import KeySchema, TopicKeys
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import metadata, text, topics

__all__ = [
    "BACKLOG_QUOTA_POLICY",
    "DEFAULT_QUOTA_TYPE",
    "QUOTA_TYPES",
    "RETENTION_POLICIES",
    "BacklogQuotas",
    "check_producer",
    "exceeds_retention",
    "parse_backlog_quota",
    "parse_quota_type",
]

#: Name of the policy (in the namespace and topic policy hashes) holding the quota map.
BACKLOG_QUOTA_POLICY = "backlogQuota"
#: ``BacklogQuota.BacklogQuotaType``
QUOTA_TYPES = ("destination_storage", "message_age")
#: What Pulsar assumes when ``backlogQuotaType`` is absent (``internalSetBacklogQuota``).
DEFAULT_QUOTA_TYPE = "destination_storage"
#: ``BacklogQuota.RetentionPolicy``
RETENTION_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")
#: Pulsar's ``backlogQuotaDefaultRetentionPolicy``, used when a body names no policy.
DEFAULT_RETENTION_POLICY = "producer_request_hold"

#: The retention policy's name in the policy hashes (pulsar_gateway/adapters/http/policies.py).
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
        raw = await self._lane.call("HGET", key, name)
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


async def check_producer(policies: Policies, lane: Lane, topic: TopicName, keys: TopicKeys) -> None:
    """Refuse a new producer when the topic's backlog is over a ``producer_exception``
    size quota (Pulsar ``BacklogQuotaManager`` / ``PersistentTopic.checkBacklogQuotaExceeded``
    at producer creation).

    The quota is the topic's ``destination_storage`` quota, else its namespace's (per type,
    as Pulsar resolves ``getBacklogQuota``); the backlog is ``backlog_size.lua``'s estimate.
    One cached policy read per producer creation, and one script call only when such a
    quota is set. Other policies are not enforced: ``producer_request_hold`` and
    ``consumer_backlog_eviction`` are stored and answered but change nothing, and
    ``message_age`` quotas are not checked.

    Raises:
        ProducerBlockedQuotaExceeded: the backlog is over the limit.
    """
    quota = await _effective_quota(policies, topic, DEFAULT_QUOTA_TYPE)
    if quota is None or quota.get("policy") != "producer_exception":
        return
    limit = quota.get("limitSize", -1)
    if not isinstance(limit, int) or limit < 0:
        return
    backlog = await topics.backlog_size(lane, keys)
    if backlog > limit:
        raise ProducerBlockedQuotaExceeded(
            "Cannot create producer on topic with backlog quota exceeded"
        )


async def _effective_quota(
    policies: Policies, topic: TopicName, quota_type: str
) -> dict[str, Any] | None:
    for value in (
        await policies.get_topic(topic, BACKLOG_QUOTA_POLICY),
        await policies.get_namespace(topic.namespace, BACKLOG_QUOTA_POLICY),
    ):
        if isinstance(value, dict) and isinstance(value.get(quota_type), dict):
            return dict(value[quota_type])
    return None
