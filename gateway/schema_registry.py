"""The schema registry: each topic's schema versions, in Redis.

A topic's schemas are a Redis list under the base topic's hash tag (the partitions of a
partitioned topic share one schema, as in Pulsar, which keys schemas by the partitioned
topic's name): index = version, 0, 1, 2... Versions travel on the wire as 8-byte
big-endian int64 (``schema_version``; protocol brief G19).

Registration (a PRODUCER or GET_OR_CREATE_SCHEMA with a schema): an identical schema (same
type and definition) gets its existing version; otherwise the new one must pass the
compatibility check against the latest version (:mod:`gateway.schema_compatibility`) and
is appended. The check runs here; the append (``register_schema.lua``) only succeeds when
no version was added since the versions were read, and is retried otherwise, so gateways
racing on one topic agree on the numbering.
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass

from gateway.errors import IncompatibleSchema
from gateway.keys import KeySchema
from gateway.schema_compatibility import check_backward
from gateway.storage import Storage
from gateway.topic_name import TopicName

__all__ = ["SchemaData", "SchemaRegistry", "decode_version", "encode_version"]

#: Attempts at appending a version before giving up on a topic under heavy contention.
_ATTEMPTS = 16


def encode_version(version: int) -> bytes:
    """``schema_version`` on the wire: 8 bytes, big-endian int64."""
    return struct.pack(">q", version)


def decode_version(raw: bytes) -> int | None:
    """A wire ``schema_version``; None when it is not 8 bytes."""
    if len(raw) != 8:
        return None
    return int(struct.unpack(">q", raw)[0])


@dataclass(frozen=True, slots=True)
class SchemaData:
    """One schema, as the protocol's ``Schema`` message carries it."""

    type: int
    name: str
    data: bytes
    properties: tuple[tuple[str, str], ...] = ()

    def same_as(self, other: SchemaData) -> bool:
        """Pulsar's identity of schemas: type and definition (``SchemaHash``)."""
        return self.type == other.type and self.data == other.data

    def to_json(self) -> str:
        return json.dumps(
            {
                "type": self.type,
                "name": self.name,
                "data": base64.b64encode(self.data).decode(),
                "properties": dict(self.properties),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, raw: bytes | str) -> SchemaData:
        obj = json.loads(raw)
        return cls(
            int(obj["type"]),
            str(obj.get("name", "")),
            base64.b64decode(obj["data"]),
            tuple(sorted((str(k), str(v)) for k, v in obj.get("properties", {}).items())),
        )


class SchemaRegistry:
    """Read and register topic schemas."""

    def __init__(self, storage: Storage, schema: KeySchema) -> None:
        self._storage = storage
        self._schema = schema

    def _key(self, topic: TopicName) -> str:
        return self._schema.topic(topic.partitioned_topic_name).schemas

    async def versions(self, topic: TopicName) -> list[SchemaData]:
        """Every version of the topic's schema, oldest first."""
        raw = await self._storage.call("LRANGE", self._key(topic), 0, -1)
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
        raw = await self._storage.call("LINDEX", self._key(topic), version)
        if raw is None:
            raise LookupError(f"No schema version {version}")
        return version, SchemaData.from_json(raw)

    async def register(self, topic: TopicName, schema: SchemaData) -> int:
        """The version of ``schema`` on the topic, registering it if new.

        Raises:
            IncompatibleSchema: the schema cannot follow the latest version.
            StorageError: Redis failed.
        """
        key = self._key(topic)
        for _ in range(_ATTEMPTS):
            versions = await self.versions(topic)
            for version, existing in enumerate(versions):
                if existing.same_as(schema):
                    return version
            if versions:
                latest = versions[-1]
                check_backward(latest.type, latest.data, schema.type, schema.data)
            version = int(
                await self._storage.eval(
                    "register_schema", [key], [len(versions), schema.to_json()]
                )
            )
            if version >= 0:
                return version
        raise IncompatibleSchema("Schema registration kept racing with other registrations")

    async def latest_version(self, topic: TopicName) -> int | None:
        """The latest version number, None when the topic has no schema."""
        length = int(await self._storage.call("LLEN", self._key(topic)))
        return length - 1 if length else None
