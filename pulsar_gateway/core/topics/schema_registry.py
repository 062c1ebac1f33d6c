"""The schema registry: each topic's schema versions, in Redis.

A topic's schemas are a Redis list under the base topic's hash tag (the partitions of a
partitioned topic share one schema, as in Pulsar, which keys schemas by the partitioned
topic's name): index = version, 0, 1, 2... Versions travel on the wire as 8-byte
big-endian int64 (``schema_version``; the C++ client's ``lib/Int64SerDes.h``,
docs/binary_protocol.md "Requests and responses").

Deletion follows Pulsar's ``SchemaRegistryServiceImpl``: ``delete`` appends a deletion
marker, which takes a version number of its own; the versions before the latest marker no
longer count (``trimDeletedSchemaAndGetList``): they are not found by number, not listed,
not checked against, and the next schema is appended after the marker without a check.
``delete(force=True)`` removes the list (``deleteSchemaStorage``), so numbering starts
again at 0.

Registration has two doors, as in Pulsar:

* :meth:`SchemaRegistry.register` (a PRODUCER, a SUBSCRIBE or GET_OR_CREATE_SCHEMA with a
  schema, REST produce; Pulsar's ``AbstractTopic.addSchema``): when the topic's
  ``isAllowAutoUpdateSchema`` is false only an existing version is found ("Schema not found
  and schema auto updating is disabled."), otherwise as an upload;
* :meth:`SchemaRegistry.upload` (the admin API's POST; ``putSchemaIfAbsent``): an
  identical schema (same type and definition) gets its existing version; otherwise the new
  one must pass the compatibility check of the effective strategy
  (:mod:`pulsar_gateway.core.topics.schema_compatibility`) and is appended.

The check runs here; the append (``register_schema.lua``) only succeeds when no version was
added since the versions were read, and is retried otherwise, so gateways racing on one
topic agree on the numbering.

Policies (names as Pulsar's admin API stores them; the effective value is the topic's, else
the namespace's, else the gateway default, as ``AbstractTopic``'s topic policies resolve
them):

* ``schemaCompatibilityStrategy`` (topic, namespace); an unset or ``UNDEFINED`` namespace
  value falls back to the deprecated ``schemaAutoUpdateCompatibilityStrategy`` and then to
  the broker's ``schemaCompatibilityStrategy``, ``FULL`` (``AdminResource.
  getSchemaCompatibilityStrategyAsync``, ``ServiceConfiguration``);
* ``schemaValidationEnforced`` (topic, namespace; default false): a producer without a
  schema is refused on a topic that has one (``ServerCnx.tryAddSchema``);
* ``isAllowAutoUpdateSchema`` (namespace; default true).
"""

from __future__ import annotations

import time
from typing import Any

from pulsar_gateway.core.errors import IncompatibleSchema
from pulsar_gateway.core.model.schema import SchemaData
from pulsar_gateway.core.model.topic_name import TopicName
from pulsar_gateway.core.policies.policies import Policies
from pulsar_gateway.core.storage import topic_store
from pulsar_gateway.core.storage.keys import KeySchema, TopicKeys
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import topics
from pulsar_gateway.core.topics.schema_compatibility import AUTO_UPDATE_STRATEGIES, check

__all__ = [
    "ALLOW_AUTO_UPDATE_POLICY",
    "AUTO_UPDATE_STRATEGY_POLICY",
    "COMPATIBILITY_STRATEGY_POLICY",
    "DEFAULT_ALLOW_AUTO_UPDATE",
    "DEFAULT_STRATEGY",
    "DEFAULT_VALIDATION_ENFORCED",
    "VALIDATION_ENFORCED_POLICY",
    "SchemaRegistry",
]

#: Attempts at appending a version before giving up on a topic under heavy contention.
_ATTEMPTS = 16

COMPATIBILITY_STRATEGY_POLICY = "schemaCompatibilityStrategy"
AUTO_UPDATE_STRATEGY_POLICY = "schemaAutoUpdateCompatibilityStrategy"
VALIDATION_ENFORCED_POLICY = "schemaValidationEnforced"
ALLOW_AUTO_UPDATE_POLICY = "isAllowAutoUpdateSchema"

#: Pulsar's broker defaults (``ServiceConfiguration``: ``schemaCompatibilityStrategy``,
#: ``isAllowAutoUpdateSchemaEnabled``, ``isSchemaValidationEnforced``).
DEFAULT_STRATEGY = "FULL"
DEFAULT_ALLOW_AUTO_UPDATE = True
DEFAULT_VALIDATION_ENFORCED = False


def _live(stored: list[SchemaData]) -> list[tuple[int, SchemaData]]:
    """The versions after the latest deletion marker, with their numbers."""
    start = 0
    for index in range(len(stored) - 1, -1, -1):
        if stored[index].deleted:
            start = index + 1
            break
    return [(version, stored[version]) for version in range(start, len(stored))]


class SchemaRegistry:
    """Read, register, check and delete topic schemas."""

    def __init__(self, lane: Lane, keys: KeySchema, policies: Policies | None = None) -> None:
        self._lane = lane
        self._keys = keys
        self._policies = policies

    def _topic_keys(self, topic: TopicName) -> TopicKeys:
        return self._keys.topic(topic.partitioned_topic_name)

    def _key(self, topic: TopicName) -> str:
        return self._topic_keys(topic).schemas

    # -- policies -------------------------------------------------------------------------

    async def _policy(self, topic: TopicName, name: str, topic_level: bool = True) -> Any:
        if self._policies is None:
            return None
        if topic_level:
            return await self._policies.effective(topic, name)
        return await self._policies.get_namespace(topic.namespace, name)

    async def strategy(self, topic: TopicName) -> str:
        """The compatibility strategy that applies to the topic (never ``UNDEFINED``)."""
        if self._policies is not None:
            value = await self._policies.get_topic(topic, COMPATIBILITY_STRATEGY_POLICY)
            if value not in (None, "UNDEFINED"):
                return str(value)
            value = await self._policy(topic, COMPATIBILITY_STRATEGY_POLICY, topic_level=False)
            if value not in (None, "UNDEFINED"):
                return str(value)
            legacy = await self._policy(topic, AUTO_UPDATE_STRATEGY_POLICY, topic_level=False)
            if legacy in AUTO_UPDATE_STRATEGIES:
                return AUTO_UPDATE_STRATEGIES[legacy]
        return DEFAULT_STRATEGY

    async def _flag(self, topic: TopicName, name: str, default: bool) -> bool:
        value = await self._policy(topic, name)
        return default if value is None else bool(value)

    # -- reads ----------------------------------------------------------------------------

    async def _stored(self, topic: TopicName) -> list[SchemaData]:
        raw = await topic_store.schemas(self._lane, self._topic_keys(topic))
        return [SchemaData.from_json(item) for item in raw]

    async def versions(self, topic: TopicName) -> list[tuple[int, SchemaData]]:
        """The topic's versions since the latest deletion, oldest first, with their
        numbers (Pulsar's ``trimDeletedSchemaAndGetList``)."""
        return _live(await self._stored(topic))

    async def get(self, topic: TopicName, version: int | None = None) -> tuple[int, SchemaData]:
        """A version of the topic's schema, the latest when ``version`` is None.

        Raises:
            LookupError: the topic has no schema (or it was deleted), or not that version
                (or it was deleted).
        """
        if version is None:
            stored = await self._stored(topic)
            if not stored or stored[-1].deleted:
                raise LookupError("Schema not found")
            return len(stored) - 1, stored[-1]
        for number, schema in await self.versions(topic):
            if number == version:
                return number, schema
        raise LookupError("Schema not found")

    async def has_schema(self, topic: TopicName) -> bool:
        """Whether the topic has a schema now (Pulsar's ``hasSchema``)."""
        stored = await self._stored(topic)
        return bool(stored) and not stored[-1].deleted

    async def find_version(self, topic: TopicName, schema: SchemaData) -> int | None:
        """The version of an identical schema since the latest deletion, None when none
        (``findSchemaVersion``)."""
        for number, existing in await self.versions(topic):
            if existing.same_as(schema):
                return number
        return None

    async def is_compatible(self, topic: TopicName, schema: SchemaData) -> tuple[bool, str, str]:
        """(compatible, the strategy applied, the reason when not) for a schema that would
        be uploaded (``SchemaRegistryServiceImpl.isCompatible``)."""
        strategy = await self.strategy(topic)
        live = await self.versions(topic)
        try:
            check(strategy, [(s.type, s.data) for _, s in live], schema.type, schema.data)
        except IncompatibleSchema as exc:
            return False, strategy, str(exc)
        return True, strategy, ""

    # -- writes ---------------------------------------------------------------------------

    async def register(self, topic: TopicName, schema: SchemaData) -> int:
        """The version of ``schema`` on the topic, registering it if new and the topic
        allows it (Pulsar's ``AbstractTopic.addSchema``).

        Raises:
            IncompatibleSchema: the schema cannot follow the topic's versions, or it is new
                and ``isAllowAutoUpdateSchema`` is false.
            StorageError: Redis failed.
        """
        if not await self._flag(topic, ALLOW_AUTO_UPDATE_POLICY, DEFAULT_ALLOW_AUTO_UPDATE):
            version = await self.find_version(topic, schema)
            if version is None:
                raise IncompatibleSchema("Schema not found and schema auto updating is disabled.")
            return version
        return await self.upload(topic, schema)

    async def register_producer(self, topic: TopicName, schema: SchemaData | None) -> int | None:
        """A producer's schema version: :meth:`register` for a producer with a schema; for
        one without, None, or IncompatibleSchema when the topic has a schema and
        ``schemaValidationEnforced`` is on (Pulsar's ``ServerCnx.tryAddSchema``)."""
        if schema is not None:
            return await self.register(topic, schema)
        enforced = await self._flag(topic, VALIDATION_ENFORCED_POLICY, DEFAULT_VALIDATION_ENFORCED)
        if enforced and await self.has_schema(topic):
            raise IncompatibleSchema(
                "Producers cannot connect or send message without a schema to topics with a "
                "schema when SchemaValidationEnforced is enabled"
            )
        return None

    async def upload(self, topic: TopicName, schema: SchemaData) -> int:
        """The version of ``schema`` on the topic, appended if new and compatible under the
        effective strategy (``putSchemaIfAbsent``; the admin API's upload).

        Raises:
            IncompatibleSchema: the schema cannot follow the topic's versions.
            StorageError: Redis failed.
        """
        strategy = await self.strategy(topic)
        if not schema.timestamp:
            schema = SchemaData(
                schema.type, schema.name, schema.data, schema.properties, int(time.time() * 1000)
            )
        for _ in range(_ATTEMPTS):
            stored = await self._stored(topic)
            live = _live(stored)
            for version, existing in live:
                if existing.same_as(schema):
                    return version
            check(strategy, [(s.type, s.data) for _, s in live], schema.type, schema.data)
            registered = await topics.register_schema(
                self._lane,
                self._topic_keys(topic),
                known_versions=len(stored),
                schema=schema.to_json(),
            )
            if registered is not None:
                return registered
        raise IncompatibleSchema("Schema registration kept racing with other registrations")

    async def delete(self, topic: TopicName, force: bool = False) -> int:
        """Delete the topic's schema; the version number the deletion answers with
        (``DeleteSchemaResponse``): the marker's, or with ``force`` the latest version
        removed, -1 when there was none."""
        keys = self._topic_keys(topic)
        if force:
            length = await topic_store.schema_count(self._lane, keys)
            await topic_store.delete_schemas(self._lane, keys)
            return length - 1
        marker = SchemaData.deletion(int(time.time() * 1000))
        return await topic_store.append_schema(self._lane, keys, marker.to_json()) - 1
