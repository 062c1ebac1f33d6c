"""The schema registry: each topic's schema versions, in Redis.

A topic's schemas are a Redis list under the base topic's hash tag (the partitions of a
partitioned topic share one schema, as in Pulsar, which keys schemas by the partitioned
topic's name): index = version, 0, 1, 2... Versions travel on the wire as 8-byte
big-endian int64 (``schema_version``; protocol brief G19).

Registration (a PRODUCER or GET_OR_CREATE_SCHEMA with a schema): an identical schema (same type and
definition) gets its existing version; otherwise the new one must pass the compatibility check
against the latest version (:mod:`pulsar_gateway.core.topics.schema_compatibility`) and is appended.
The check runs here; the append (``register_schema.lua``) only succeeds when no version was added
since the versions were read, and is retried otherwise, so gateways racing on one topic agree on the
numbering.
"""

from __future__ import annotations

from pulsar_gateway.core.errors import IncompatibleSchema
from pulsar_gateway.core.model.schema import SchemaData
from pulsar_gateway.core.model.topic_name import TopicName
from pulsar_gateway.core.storage.keys import KeySchema, TopicKeys
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import topics
from pulsar_gateway.core.topics.schema_compatibility import check_backward

__all__ = ["SchemaRegistry"]

#: Attempts at appending a version before giving up on a topic under heavy contention.
_ATTEMPTS = 16


class SchemaRegistry:
    """Read and register topic schemas."""

    def __init__(self, lane: Lane, keys: KeySchema) -> None:
        self._lane = lane
        self._keys = keys

    def _topic_keys(self, topic: TopicName) -> TopicKeys:
        return self._keys.topic(topic.partitioned_topic_name)

    def _key(self, topic: TopicName) -> str:
        return self._topic_keys(topic).schemas

    async def versions(self, topic: TopicName) -> list[SchemaData]:
        """Every version of the topic's schema, oldest first."""
        raw = await self._lane.call("LRANGE", self._key(topic), 0, -1)
        return [SchemaData.from_json(item) for item in raw]

    async def get(self, topic: TopicName, version: int | None = None) -> tuple[int, SchemaData]:
        """A version of the topic's schema, the latest when ``version`` is None.

        Raises:
            LookupError: the topic has no schema, or not that version.
        """
        if version is None:
            versions = await self.versions(topic)
            if not versions:
                raise LookupError("No schema found")
            return len(versions) - 1, versions[-1]
        if version < 0:
            raise LookupError(f"No schema version {version}")
        raw = await self._lane.call("LINDEX", self._key(topic), version)
        if raw is None:
            raise LookupError(f"No schema version {version}")
        return version, SchemaData.from_json(raw)

    async def register(self, topic: TopicName, schema: SchemaData) -> int:
        """The version of ``schema`` on the topic, registering it if new.

        Raises:
            IncompatibleSchema: the schema cannot follow the latest version.
            StorageError: Redis failed.
        """
        for _ in range(_ATTEMPTS):
            versions = await self.versions(topic)
            for version, existing in enumerate(versions):
                if existing.same_as(schema):
                    return version
            if versions:
                latest = versions[-1]
                check_backward(latest.type, latest.data, schema.type, schema.data)
            registered = await topics.register_schema(
                self._lane,
                self._topic_keys(topic),
                known_versions=len(versions),
                schema=schema.to_json(),
            )
            if registered is not None:
                return registered
        raise IncompatibleSchema("Schema registration kept racing with other registrations")

    async def latest_version(self, topic: TopicName) -> int | None:
        """The latest version number, None when the topic has no schema."""
        length = int(await self._lane.call("LLEN", self._key(topic)))
        return length - 1 if length else None
