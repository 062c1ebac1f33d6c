"""Topic discovery and schemas on a binary connection: PARTITIONED_METADATA, LOOKUP,
GET_TOPICS_OF_NAMESPACE, GET_SCHEMA and GET_OR_CREATE_SCHEMA (Pulsar's ``ServerCnx``
``handlePartitionMetadataRequest``, ``handleLookup``, ``handleGetTopicsOfNamespace``,
``handleGetSchema``, ``handleGetOrCreateSchema``).

Every gateway serves every topic, so a lookup's answer is "connect here" once the client
may look the topic up and its namespace exists. Lookups in progress are counted
gateway-wide (``maxConcurrentLookupRequest``): past the limit a lookup is answered
TooManyRequests at once, as Pulsar's ``ServerCnx`` does.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from pulsar_gateway.adapters.pulsar_binary import commands as c
from pulsar_gateway.adapters.pulsar_binary.errors import server_error
from pulsar_gateway.adapters.pulsar_binary.session_state import SessionState
from pulsar_gateway.adapters.pulsar_binary.throttle import ConcurrencyLimit
from pulsar_gateway.core import (
    AuthAction,
    AuthorizationError,
    AuthorizationService,
    Cluster,
    GatewayError,
    PartitionedTopics,
    SchemaRegistry,
    Tenants,
    UnknownListener,
    decode_version,
    encode_version,
    parse_topic_name,
)
from pulsar_gateway.entry_codec import crc32c
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["TOO_MANY_LOOKUPS", "TopicDiscovery", "topics_hash"]

_NON_PERSISTENT = "non-persistent://"
#: Pulsar's answer to a lookup past ``maxConcurrentLookupRequest`` (``ServerCnx``).
TOO_MANY_LOOKUPS = "Failed due to too many pending lookup requests"


class TopicDiscovery:
    """Answers one connection's discovery and schema requests.

    Args:
        state: the session's connection side.
        authorization, topics, tenants, cluster, schemas: the core services these requests
            read.
        service_url, service_url_tls: where LOOKUP sends clients (``pulsar+ssl://``; None
            without TLS).
        lookups: the gateway-wide count of lookups in progress.
    """

    def __init__(
        self,
        state: SessionState,
        *,
        authorization: AuthorizationService,
        topics: PartitionedTopics,
        tenants: Tenants,
        cluster: Cluster,
        schemas: SchemaRegistry,
        service_url: str,
        service_url_tls: str | None = None,
        lookups: ConcurrencyLimit | None = None,
    ) -> None:
        self._state = state
        self._conn = state.conn
        self._authorization = authorization
        self._topics = topics
        self._tenants = tenants
        self._cluster = cluster
        self._schemas = schemas
        self.service_url = service_url
        self.service_url_tls = service_url_tls
        self._lookups = lookups or ConcurrencyLimit(50_000)

    def _spawn_lookup(self, answer: Coroutine[Any, Any, None]) -> None:
        """Run a lookup that holds a place among the gateway's lookups in progress (taken
        with ``self._lookups.try_acquire()``) until it ends."""

        async def run() -> None:
            try:
                await answer
            finally:
                self._lookups.release()

        self._state.spawn(run())

    def partitioned_metadata(self, cmd: c.PartitionedMetadata) -> None:
        conn = self._conn
        if not self._lookups.try_acquire():
            conn.send_partition_metadata_error(cmd.request_id, pb.TooManyRequests, TOO_MANY_LOOKUPS)
            return

        async def answer() -> None:
            message = "Client is not authorized to Get Partition Metadata"
            refusal = await self._state.refusal(cmd.topic, self._authorization.can_lookup, message)
            if refusal is not None:
                conn.send_partition_metadata_error(cmd.request_id, *server_error(refusal))
                return
            try:
                partitions = await self._topics.client_partitions(parse_topic_name(cmd.topic))
            except GatewayError as exc:
                conn.send_partition_metadata_error(cmd.request_id, *server_error(exc))
            else:
                conn.send_partition_metadata_response(cmd.request_id, partitions)

        self._spawn_lookup(answer())

    def _lookup_answer(self, cmd: c.Lookup) -> None:
        """Connect here: at the URLs of the listener the client named, or the defaults."""
        if not cmd.listener_name:
            self._conn.send_lookup_response(cmd.request_id, self.service_url, self.service_url_tls)
            return
        try:
            listener = self._cluster.listener(cmd.listener_name)
        except UnknownListener as exc:
            # NamespaceService's refusal; clients retry ServiceNotReady until they time out
            self._conn.send_lookup_error(cmd.request_id, pb.ServiceNotReady, str(exc))
            return
        self._conn.send_lookup_response(
            cmd.request_id, listener.broker_url, listener.broker_service_url_tls
        )

    def lookup(self, cmd: c.Lookup) -> None:
        conn = self._conn
        try:
            topic = parse_topic_name(cmd.topic)
        except GatewayError as exc:
            conn.send_lookup_error(cmd.request_id, *server_error(exc))
            return
        if not self._lookups.try_acquire():
            conn.send_lookup_error(cmd.request_id, pb.TooManyRequests, TOO_MANY_LOOKUPS)
            return
        authz = self._authorization

        async def answer() -> None:
            if authz.enabled:
                refusal = await self._state.refusal(
                    cmd.topic, authz.can_lookup, "Client is not authorized to Lookup"
                )
                if refusal is not None:
                    conn.send_lookup_error(cmd.request_id, *server_error(refusal))
                    return
            try:
                await self._tenants.require_topic_namespace(topic.namespace)
            except GatewayError as exc:
                conn.send_lookup_error(cmd.request_id, *server_error(exc))
            else:
                self._lookup_answer(cmd)

        self._spawn_lookup(answer())

    def get_topics_of_namespace(self, cmd: c.GetTopicsOfNamespace) -> None:
        state = self._state

        async def run() -> None:
            # Partitions are listed by their own names, as Pulsar lists managed ledgers;
            # the client cuts "-partition-<i>" off itself (``PatternMultiTopicsConsumerImpl``).
            authz = self._authorization
            if authz.enabled:
                # NamespaceOperation.GET_TOPICS: tenant admin, or consume on the namespace.
                tenant = cmd.namespace.partition("/")[0]
                try:
                    allowed = await authz.allows(
                        tenant, cmd.namespace, state.role, AuthAction.CONSUME
                    )
                except GatewayError as exc:
                    state.error(cmd.request_id, exc)
                    return
                if not allowed:
                    message = "Client is not authorized to GetTopicsOfNamespace"
                    state.error(cmd.request_id, AuthorizationError(message))
                    return
            try:
                names = await self._topics.topics(cmd.namespace)
            except GatewayError as exc:
                state.error(cmd.request_id, exc)
                return
            mode = cmd.mode
            if mode == pb.CommandGetTopicsOfNamespace.PERSISTENT:
                names = [n for n in names if not n.startswith(_NON_PERSISTENT)]
            elif mode == pb.CommandGetTopicsOfNamespace.NON_PERSISTENT:
                names = [n for n in names if n.startswith(_NON_PERSISTENT)]
            self._conn.send_get_topics_of_namespace_response(
                cmd.request_id, names, topics_hash(names)
            )

        state.spawn(run())

    def get_schema(self, cmd: c.GetSchema) -> None:
        conn = self._conn

        async def run() -> None:
            version: int | None = None
            if cmd.schema_version is not None:
                version = decode_version(cmd.schema_version)
                if version is None:
                    conn.send_get_schema_error(
                        cmd.request_id, pb.TopicNotFound, "Invalid schema version"
                    )
                    return
            try:
                topic = parse_topic_name(cmd.topic)
                number, schema = await self._schemas.get(topic, version)
            except LookupError as exc:
                # "No schema" is TopicNotFound inside GET_SCHEMA_RESPONSE (docs/binary_protocol.md
                # "Requests and responses"): the client decodes with its own schema.
                conn.send_get_schema_error(cmd.request_id, pb.TopicNotFound, str(exc))
                return
            except GatewayError as failure:
                conn.send_get_schema_error(cmd.request_id, *server_error(failure))
                return
            conn.send_get_schema_response(
                cmd.request_id,
                schema.type,
                schema.name,
                schema.data,
                schema.properties,
                encode_version(number),
            )

        self._state.spawn(run())

    def get_or_create_schema(self, cmd: c.GetOrCreateSchema) -> None:
        conn = self._conn

        async def run() -> None:
            try:
                topic = parse_topic_name(cmd.topic)
                version = await self._schemas.register(topic, cmd.schema)
            except GatewayError as exc:
                conn.send_get_or_create_schema_error(cmd.request_id, *server_error(exc))
                return
            conn.send_get_or_create_schema_response(cmd.request_id, encode_version(version))

        self._state.spawn(run())


def topics_hash(topics: list[str]) -> str:
    """Pulsar's ``TopicList.calculateHash``: CRC32C of the sorted names joined by ``,``,
    printed as Guava's ``HashCode.toString`` does (the int's bytes little-endian, in hex)."""
    crc = crc32c(",".join(sorted(topics)).encode())
    return crc.to_bytes(4, "little").hex()
