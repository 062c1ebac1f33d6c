"""Message TTL and retention policies (Pulsar's ``messageTTL`` and ``RetentionPolicies``,
namespace or topic level), resolved for one topic.

Precedence, as Pulsar's ``TopicPoliciesService``: the topic's value, else its namespace's,
else the gateway's defaults (``--default-message-ttl-seconds``,
``--default-retention-minutes``, ``--default-retention-mb``). Whether retention came from a
policy matters: only an explicit one trims a topic without subscriptions
(docs/lifecycle.md). The rounds that apply them are
:mod:`pulsar_gateway.core.admin.topic_maintenance`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pulsar_gateway.core.model.topic_name import TopicName
from pulsar_gateway.core.policies.policies import Policies

__all__ = [
    "MESSAGE_TTL",
    "RETENTION",
    "Lifecycle",
    "parse_retention",
    "parse_ttl",
    "resolve_lifecycle",
]

#: Pulsar policy names and JSON fields (admin API v2, ``RetentionPolicies``).
RETENTION = "retention"
MESSAGE_TTL = "messageTTL"
RETENTION_TIME = "retentionTimeInMinutes"
RETENTION_SIZE = "retentionSizeInMB"


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


async def resolve_lifecycle(
    policies: Policies, topic: TopicName | str, defaults: Lifecycle
) -> Lifecycle:
    """The TTL and retention of ``topic``: topic policy, namespace policy, ``defaults``
    (whose ``explicit_retention`` is ignored)."""
    ttl = parse_ttl(await policies.effective(topic, MESSAGE_TTL))
    retention = parse_retention(await policies.effective(topic, RETENTION))
    minutes, mb = (
        retention if retention is not None else (defaults.retention_minutes, defaults.retention_mb)
    )
    return Lifecycle(
        ttl if ttl is not None else defaults.ttl_seconds, minutes, mb, retention is not None
    )
