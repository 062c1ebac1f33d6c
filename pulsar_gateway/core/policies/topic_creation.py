"""Whether a topic may be created on first use, and how many a namespace may hold.

Pulsar's broker creates a topic the first time a producer or consumer names it
(``allowAutoTopicCreation``, ``allowAutoTopicCreationType``, ``defaultNumPartitions`` in
``ServiceConfiguration``); a namespace's ``autoTopicCreation`` policy
(``AutoTopicCreationOverride``) replaces those three settings for its topics
(``BrokerService.isAllowAutoTopicCreation`` / ``getAutoTopicCreationOverride``). A
namespace's ``maxTopicsPerNamespace`` policy, else the broker's, bounds how many topics a
namespace holds, partitions counted one by one (``BrokerService.checkMaxTopicsPerNamespace``,
``PersistentTopicsBase.internalCreatePartitionedTopic``).

This module decides from the stored values; the topics layer applies the answer when it
registers a topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pulsar_gateway.core.policies.policies import Policies

__all__ = [
    "AUTO_TOPIC_CREATION_POLICY",
    "MAX_TOPICS_PER_NAMESPACE_POLICY",
    "AutoTopicCreation",
    "TopicCreationRules",
]

#: ``{"allowAutoTopicCreation": bool, "topicType": "partitioned" | "non-partitioned",
#: "defaultNumPartitions": int}`` (namespace level only, as in Pulsar).
AUTO_TOPIC_CREATION_POLICY = "autoTopicCreation"
#: An integer, 0: no limit; unset: the gateway's setting.
MAX_TOPICS_PER_NAMESPACE_POLICY = "maxTopicsPerNamespace"


@dataclass(frozen=True, slots=True)
class AutoTopicCreation:
    """How topics of a namespace are created on first use (Pulsar's broker defaults:
    allowed, non-partitioned, one partition when partitioned)."""

    allowed: bool = True
    partitioned: bool = False
    default_partitions: int = 1

    @classmethod
    def from_policy(cls, value: Any, default: AutoTopicCreation) -> AutoTopicCreation:
        """The stored ``AutoTopicCreationOverride``; ``default`` where it is not set.
        ``defaultNumPartitions`` left out of a partitioned override is the broker's
        (``AutoTopicCreationOverride.isValidOverride`` needs it only to be positive)."""
        if not isinstance(value, dict) or not isinstance(value.get("allowAutoTopicCreation"), bool):
            return default
        partitions = value.get("defaultNumPartitions")
        return cls(
            allowed=value["allowAutoTopicCreation"],
            partitioned=value.get("topicType") == "partitioned",
            default_partitions=partitions
            if isinstance(partitions, int) and partitions > 0
            else default.default_partitions,
        )


class TopicCreationRules:
    """The effective creation rules of a namespace: its policy, else the gateway's.

    Args:
        policies: namespace policies (cached reads).
        default: the gateway's ``allowAutoTopicCreation`` settings.
        max_topics_per_namespace: the gateway's ``maxTopicsPerNamespace`` (0: no limit).
    """

    def __init__(
        self,
        policies: Policies | None,
        default: AutoTopicCreation | None = None,
        max_topics_per_namespace: int = 0,
    ) -> None:
        self._policies = policies
        self.default = default or AutoTopicCreation()
        self._max_topics = max_topics_per_namespace

    async def auto_creation(self, namespace: str) -> AutoTopicCreation:
        if self._policies is None:
            return self.default
        value = await self._policies.get_namespace(namespace, AUTO_TOPIC_CREATION_POLICY)
        return AutoTopicCreation.from_policy(value, self.default)

    async def max_topics(self, namespace: str) -> int:
        """The most topics (partitions counted) ``namespace`` may hold; 0: no limit. The
        namespace's policy, 0 included, wins over the gateway's setting
        (``Policies.max_topics_per_namespace`` is read before the broker's value)."""
        if self._policies is None:
            return self._max_topics
        value = await self._policies.get_namespace(namespace, MAX_TOPICS_PER_NAMESPACE_POLICY)
        return value if isinstance(value, int) and value >= 0 else self._max_topics
