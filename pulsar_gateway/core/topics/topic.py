"""A topic (or one partition of a partitioned topic) as the core sees it.

One Redis stream per topic partition (docs/architecture.md "Design decisions"): entries are
appended by producers, and each subscription is a consumer group on the stream. Topics are
created on first use inside an existing namespace when the namespace's rules allow it (Pulsar's
``allowAutoTopicCreation`` and ``maxTopicsPerNamespace``,
:mod:`pulsar_gateway.core.policies.topic_creation`): every producer and subscription checks the
namespace and registers the name in its namespace's topic set (one ``SISMEMBER`` and one script
per attach, so a topic deleted by the admin API and used again is created again on any gateway);
the stream itself appears with the first entry or subscription.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from pulsar_gateway.core.errors import TooManyTopics, TopicNotFound
from pulsar_gateway.core.model.ledger import LedgerRollover
from pulsar_gateway.core.model.topic_name import TopicName, parse_topic_name
from pulsar_gateway.core.policies.topic_creation import TopicCreationRules
from pulsar_gateway.core.storage import topic_store
from pulsar_gateway.core.storage.keys import KeySchema, TopicKeys
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts.topics import RegisterStatus, topic_register

__all__ = ["Topic", "Topics"]

#: Refuses a namespace that does not exist with TopicNotFound
#: (:meth:`.tenants.Tenants.require_topic_namespace`).
RequireNamespace = Callable[[str], Awaitable[None]]


class Topic:
    """Handle on one topic partition's keys, shared by its producers and subscriptions."""

    def __init__(
        self,
        name: TopicName,
        keys: KeySchema,
        lane: Lane,
        require_namespace: RequireNamespace,
        ledger_rollover: str,
        rules: TopicCreationRules,
    ) -> None:
        self.name = name
        self.full_name = str(name)
        self.keys: TopicKeys = keys.topic(name)
        self.partition = name.partition_index
        self._lane = lane
        self._namespace_topics = keys.namespace_topics(name.namespace)
        self._namespace_partitioned = keys.namespace_partitioned(name.namespace)
        self._require_namespace = require_namespace
        self._rules = rules
        #: when its ledger is full, as the append script takes it
        #: (:attr:`pulsar_gateway.core.model.ledger.LedgerRollover.argument`)
        self.ledger_rollover = ledger_rollover
        #: known to be terminated (admin terminate): a consumer that has read everything is
        #: told it reached the end of the topic (set by the subscription service)
        self.terminated = False

    async def register(self) -> None:
        """Record the topic in its namespace (idempotent), creating it if its namespace's
        rules allow.

        Raises:
            TopicNotFound: the namespace does not exist, or the topic does not and
                ``allowAutoTopicCreation`` is off (``ServerCnx``: "Topic does not exist").
            TooManyTopics: creating it would pass ``maxTopicsPerNamespace``.
        """
        namespace = self.name.namespace
        await self._require_namespace(namespace)
        auto = await self._rules.auto_creation(namespace)
        status = await topic_register(
            self._lane,
            self._namespace_topics,
            self._namespace_partitioned,
            topic=self.name,
            may_create=auto.allowed,
            max_topics=await self._rules.max_topics(namespace) if auto.allowed else 0,
        )
        if status is RegisterStatus.NOT_FOUND:
            raise TopicNotFound("Topic does not exist")
        if status is RegisterStatus.TOO_MANY_TOPICS:
            # BrokerService.checkMaxTopicsPerNamespace
            raise TooManyTopics("Exceed maximum number of topics in namespace.")

    async def subscriptions(self) -> list[str]:
        """The names of the partition's subscriptions (its ``subs`` hash), in no order."""
        return await self.subscriptions_reply()

    def subscriptions_reply(self) -> asyncio.Future[list[str]]:
        """:meth:`subscriptions`, queued now: a caller reading many topics awaits all their
        futures at once (one pipeline, no task per topic)."""
        return topic_store.subscription_names(self._lane, self.keys)

    def notify(self) -> None:
        """Wake every gateway's dispatchers of this topic after the current pipeline."""
        self._lane.notify(self.keys.notify_channel)


class Topics:
    """Opens :class:`Topic` handles (cheap: nothing is cached or read)."""

    def __init__(
        self,
        lane: Lane,
        keys: KeySchema,
        require_namespace: RequireNamespace,
        ledger_rollover: LedgerRollover,
        rules: TopicCreationRules,
    ) -> None:
        self._lane = lane
        self._keys = keys
        self._require_namespace = require_namespace
        self._rollover = ledger_rollover.argument
        self._rules = rules

    def get(self, name: TopicName | str) -> Topic:
        """The handle of topic ``name``.

        Raises:
            InvalidTopicName: ``name`` is not a valid topic name.
        """
        topic = name if isinstance(name, TopicName) else parse_topic_name(name)
        return Topic(
            topic, self._keys, self._lane, self._require_namespace, self._rollover, self._rules
        )
