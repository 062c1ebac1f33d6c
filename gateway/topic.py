"""A topic (or one partition of a partitioned topic) as the core sees it.

One Redis stream per topic partition (DESIGN.md): entries are appended by producers, and
each subscription is a consumer group on the stream. Topics are created on first use: every
producer and subscription (re-)registers the name in its namespace's topic set (one ``SADD``
per attach, so a topic deleted by the admin API and used again is listed again on any
gateway); the stream itself appears with the first entry or subscription.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from gateway.keys import KeySchema, TopicKeys
from gateway.storage import Storage
from gateway.topic_name import TopicName

__all__ = ["Topic"]


class Topic:
    """Handle on one topic partition's keys, shared by its producers and subscriptions."""

    def __init__(
        self,
        name: TopicName,
        schema: KeySchema,
        storage: Storage,
        register_namespace: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.name = name
        self.full_name = str(name)
        self.keys: TopicKeys = schema.topic(name)
        self.partition = name.partition_index
        self._storage = storage
        self._namespace_topics = schema.namespace_topics(name.namespace)
        self._register_namespace = register_namespace

    async def register(self) -> None:
        """Record the topic in its namespace, and the namespace in its tenant
        (:meth:`gateway.tenants.Tenants.register_namespace`), all idempotent and in one
        pipeline."""
        add = self._storage.call("SADD", self._namespace_topics, self.full_name)
        if self._register_namespace is None:
            await add
            return
        await asyncio.gather(add, self._register_namespace(self.name.namespace))

    def notify(self) -> None:
        """Wake every gateway's dispatchers of this topic after the current pipeline."""
        self._storage.notify(self.keys.notify_channel)
