"""Namespace and topic policies (Pulsar's ``Policies`` and topic-level policies, PIP-39).

A policy is a named JSON value, kept in Redis: one hash per namespace and one per topic
(the partitioned topic's name for its partitions, so partitions share their topic's
policies, as in Pulsar). The effective value for a topic is the topic-level one when set,
else the namespace's, else None (the caller applies the gateway default), which is the
precedence Pulsar's ``TopicPoliciesService`` documents.

Policies are read on hot paths (deduplication on every SEND), so each gateway caches
lookups. Every write publishes on one channel and every gateway drops its cache when it
hears it; a lost notification is covered by a short cache lifetime.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from pulsar_gateway.core.model.topic_name import TopicName, parse_topic_name
from pulsar_gateway.core.storage import policy_store
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.notifier import Notifier

__all__ = [
    "AUTO_SUBSCRIPTION_CREATION_POLICY",
    "CACHE_SECONDS",
    "DISPATCH_RATE_POLICY",
    "ENCRYPTION_REQUIRED_POLICY",
    "INACTIVE_TOPIC_POLICY",
    "MAX_CONSUMERS_PER_SUBSCRIPTION_POLICY",
    "MAX_CONSUMERS_PER_TOPIC_POLICY",
    "MAX_MESSAGE_SIZE_POLICY",
    "MAX_PRODUCERS_POLICY",
    "MAX_SUBSCRIPTIONS_POLICY",
    "PUBLISH_RATE_POLICY",
    "SUBSCRIBE_RATE_POLICY",
    "SUBSCRIPTION_DISPATCH_RATE_POLICY",
    "SUBSCRIPTION_EXPIRATION_POLICY",
    "SUBSCRIPTION_TYPES_POLICY",
    "Policies",
]

#: Longest time a cached lookup is trusted when a change notification was lost.
CACHE_SECONDS = 5.0

#: Policies the subscribe path enforces (names as stored: Pulsar's topic-policy names).
#: A list of Pulsar subscription type names; empty or unset: every type.
SUBSCRIPTION_TYPES_POLICY = "subscriptionTypesEnabled"
#: ``{"allowAutoSubscriptionCreation": bool}``; unset: subscriptions are created on use.
AUTO_SUBSCRIPTION_CREATION_POLICY = "autoSubscriptionCreation"
#: Limits checked when a producer or consumer attaches (integers; 0 or unset: none).
MAX_PRODUCERS_POLICY = "maxProducersPerTopic"
MAX_SUBSCRIPTIONS_POLICY = "maxSubscriptionsPerTopic"
MAX_CONSUMERS_PER_SUBSCRIPTION_POLICY = "maxConsumersPerSubscription"
MAX_CONSUMERS_PER_TOPIC_POLICY = "maxConsumersPerTopic"
#: Inactive topic deletion and subscription expiry
#: (:mod:`pulsar_gateway.core.admin.inactive_topics`): Pulsar's ``InactiveTopicPolicies``
#: object, and the namespace's ``subscriptionExpirationTime`` (minutes).
INACTIVE_TOPIC_POLICY = "inactiveTopicPolicies"
SUBSCRIPTION_EXPIRATION_POLICY = "subscriptionExpirationTime"
#: Namespace level only: producers must encrypt their messages (a boolean).
ENCRYPTION_REQUIRED_POLICY = "encryptionRequired"
#: Topic level only: the largest entry a producer may append (bytes; 0 or unset: none).
MAX_MESSAGE_SIZE_POLICY = "maxMessageSize"
#: Rate policies (:mod:`pulsar_gateway.core.policies.rate_limits`): Pulsar's ``PublishRate``
#: (topic level), ``DispatchRate`` of the topic and of each of its subscriptions (one
#: subscription's own value is stored as ``subscriptionDispatchRate/<subscription>``) and
#: ``SubscribeRate``.
PUBLISH_RATE_POLICY = "publishRate"
DISPATCH_RATE_POLICY = "dispatchRate"
SUBSCRIPTION_DISPATCH_RATE_POLICY = "subscriptionDispatchRate"
SUBSCRIBE_RATE_POLICY = "subscribeRate"


class Policies:
    """Read and write policies; cached reads, fleet-wide invalidation."""

    def __init__(self, lane: Lane, notifier: Notifier, keys: KeySchema) -> None:
        self._lane = lane
        self._notifier = notifier
        self._keys = keys
        self._cache: dict[tuple[str, str], tuple[float, Any]] = {}
        #: Bumped whenever the cache is dropped, so a read that started before a change
        #: does not put the old value back into the cache.
        self._generation = 0
        self._listeners: list[Callable[[], None]] = []

    def start(self) -> None:
        self._notifier.subscribe(self._keys.policies_channel, self._changed)

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever any policy may have changed (on any gateway)."""
        self._listeners.append(callback)

    def _changed(self) -> None:
        self._drop_cache()
        for callback in self._listeners:
            callback()

    # -- keys ----------------------------------------------------------------------------

    def _topic_key(self, topic: TopicName | str) -> str:
        name = topic if isinstance(topic, TopicName) else parse_topic_name(topic)
        return self._keys.topic_policies(name.partitioned_topic_name)

    # -- reads ---------------------------------------------------------------------------

    async def _get(self, key: str, name: str) -> Any | None:
        now = time.monotonic()
        cached = self._cache.get((key, name))
        if cached is not None and cached[0] > now:
            return cached[1]
        generation = self._generation
        raw = await policy_store.stored_value(self._lane, key, name)
        value = None if raw is None else json.loads(raw)
        if generation == self._generation:
            self._cache[(key, name)] = (now + CACHE_SECONDS, value)
        return value

    def _drop_cache(self) -> None:
        self._cache.clear()
        self._generation += 1

    async def get_namespace(self, namespace: str, name: str) -> Any | None:
        return await self._get(self._keys.namespace_policies(namespace), name)

    async def get_topic(self, topic: TopicName | str, name: str) -> Any | None:
        return await self._get(self._topic_key(topic), name)

    async def effective(self, topic: TopicName | str, name: str) -> Any | None:
        """The topic's value if set, else its namespace's, else None."""
        topic_name = topic if isinstance(topic, TopicName) else parse_topic_name(topic)
        value = await self.get_topic(topic_name, name)
        if value is None:
            value = await self.get_namespace(topic_name.namespace, name)
        return value

    async def namespace_policies(self, namespace: str) -> dict[str, Any]:
        """Every policy set on ``namespace``."""
        raw = await policy_store.stored_values(self._lane, self._keys.namespace_policies(namespace))
        return {name: json.loads(value) for name, value in raw.items()}

    # -- writes --------------------------------------------------------------------------

    async def _set(self, key: str, name: str, value: Any) -> None:
        await policy_store.set_value(self._lane, key, name, json.dumps(value))
        self._written()

    async def _unset(self, key: str, name: str) -> None:
        await policy_store.delete_value(self._lane, key, name)
        self._written()

    def _written(self) -> None:
        self._drop_cache()
        self._lane.notify(self._keys.policies_channel)

    async def set_namespace(self, namespace: str, name: str, value: Any) -> None:
        await self._set(self._keys.namespace_policies(namespace), name, value)

    async def delete_namespace(self, namespace: str, name: str) -> None:
        await self._unset(self._keys.namespace_policies(namespace), name)

    async def set_topic(self, topic: TopicName | str, name: str, value: Any) -> None:
        await self._set(self._topic_key(topic), name, value)

    async def delete_topic(self, topic: TopicName | str, name: str) -> None:
        await self._unset(self._topic_key(topic), name)
