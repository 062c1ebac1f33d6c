"""A topic (or one partition of a partitioned topic) as the core sees it.

One Redis stream per topic partition (DESIGN.md): entries are appended by producers, and
each subscription is a consumer group on the stream. Topics are created on first use: every
producer and subscription (re-)registers the name in its namespace's topic set (one ``SADD``
per attach, so a topic deleted by the admin API and used again is listed again on any
gateway); the stream itself appears with the first entry or subscription.
"""

from __future__ import annotations

from gateway.keys import KeySchema, TopicKeys
from gateway.storage import Storage
from gateway.topic_name import TopicName

__all__ = ["Topic"]


class Topic:
    """Handle on one topic partition's keys, shared by its producers and subscriptions."""

    def __init__(self, name: TopicName, schema: KeySchema, storage: Storage) -> None:
        self.name = name
        self.full_name = str(name)
        self.keys: TopicKeys = schema.topic(name)
        self.partition = name.partition_index
        self._storage = storage
        self._namespace_topics = schema.namespace_topics(name.namespace)

    async def register(self) -> None:
        """Record the topic in its namespace (idempotent)."""
        await self._storage.call("SADD", self._namespace_topics, self.full_name)

    def notify(self) -> None:
        """Wake every gateway's dispatchers of this topic after the current pipeline."""
        self._storage.notify(self.keys.notify_channel)
