"""Topic statistics for the admin API (Pulsar ``TopicStats``), read from Redis so every
gateway of the fleet reports the same figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.consumer import SubscriptionType
from gateway.errors import TopicNotFound

if TYPE_CHECKING:
    from gateway.broker import Broker

__all__ = ["SubscriptionStats", "TopicStats", "topic_stats"]

#: Pulsar's names of the subscription types, as its stats report them.
_TYPE_NAMES = {
    SubscriptionType.EXCLUSIVE: "Exclusive",
    SubscriptionType.SHARED: "Shared",
    SubscriptionType.FAILOVER: "Failover",
    SubscriptionType.KEY_SHARED: "Key_Shared",
}


@dataclass(frozen=True, slots=True)
class SubscriptionStats:
    type: str
    msg_delayed: int

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "msgDelayed": self.msg_delayed}


@dataclass(frozen=True, slots=True)
class TopicStats:
    subscriptions: dict[str, SubscriptionStats]

    def to_json(self) -> dict[str, Any]:
        return {"subscriptions": {n: s.to_json() for n, s in self.subscriptions.items()}}


async def topic_stats(broker: Broker, topic: str) -> TopicStats:
    """The stats of one non-partitioned topic or partition.

    Raises:
        InvalidTopicName; TopicNotFound when the topic has no data and is not listed.
    """
    handle = broker.topic(topic)
    keys = handle.keys
    reply: list[Any] = await broker.storage.eval(
        "topic_stats", [keys.stream, keys.subscriptions], []
    )
    if not reply and not await broker.partitioned_topics.exists(handle.name):
        raise TopicNotFound(f"Topic {topic} not found")
    subscriptions = {}
    for i in range(0, len(reply), 3):
        sub_type = SubscriptionType(int(reply[i + 1]))
        subscriptions[reply[i].decode()] = SubscriptionStats(
            _TYPE_NAMES[sub_type], int(reply[i + 2])
        )
    return TopicStats(subscriptions)
