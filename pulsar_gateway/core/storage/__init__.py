"""Redis: the pipelined lane, notifications, the key schema, the Lua scripts and their typed
calls (:mod:`.scripts`), the typed plain commands (:mod:`.commands`), and the embedded
redis-server."""

from __future__ import annotations

from pulsar_gateway.core.storage.cluster_lane import ClusterLane, is_cluster
from pulsar_gateway.core.storage.embedded_redis import EmbeddedRedis, EmbeddedRedisError
from pulsar_gateway.core.storage.keys import KeySchema, SubscriptionKeys, TopicKeys
from pulsar_gateway.core.storage.lane import Lane, ReplicaAcks
from pulsar_gateway.core.storage.notifier import Notifier
from pulsar_gateway.core.storage.scripts import text

__all__ = [
    "ClusterLane",
    "EmbeddedRedis",
    "EmbeddedRedisError",
    "KeySchema",
    "Lane",
    "Notifier",
    "ReplicaAcks",
    "SubscriptionKeys",
    "TopicKeys",
    "is_cluster",
    "text",
]
