"""REST produce (PIP-64): publish over HTTP with Pulsar's paths and JSON.

``POST /topics/{persistent|non-persistent}/{tenant}/{ns}/{topic}`` and ``.../{topic}/
partitions/{i}`` take Pulsar's ``ProducerMessages``::

    {"producerName": "RestProducer", "valueSchema": "<SchemaInfo JSON>", "schemaVersion": -1,
     "messages": [{"payload": "text", "key": "k", "properties": {"a": "1"},
                   "eventTime": "1700000000000", "sequenceId": 1, "deliverAt": 0,
                   "deliverAfterMs": 0, "replicationClusters": [], "disableReplication": false}]}

and answer ``ProducerAcks``: ``{"messagePublishResults": [{"messageId": "L:E:P",
"errorCode": 0}], "schemaVersion": n}`` (``MessageIdImpl.toString``; errorCode 2 with an
``errorMsg`` for a message that could not be stored, the others still are, as Pulsar
answers 200 with per-message results).

As in Pulsar's ``TopicsBase``: the payload is text encoded with the value schema (UTF-8
for the default STRING, and for BYTES and JSON; big-endian for the INT, FLOAT, DOUBLE and
BOOLEAN schemas); a partitioned topic's messages go round-robin over its partitions; the
producer is not registered (no ProducerBusy), named ``RestProducer`` by default; messages
are stored uncompressed and unbatched. Differences: ``deliverAt`` applies whether or not
``eventTime`` is set and ``deliverAfterMs`` counts from the publish time (Pulsar adds it to
the event time); the default STRING schema is not registered on the topic (only a given
``valueSchema`` is); AVRO, PROTOBUF, KEY_VALUE and the date/time schemas are refused with
a 400 (they need a JSON-to-binary encoder per schema).

A topic's ``publishRate`` applies as to any producer: each message takes its tokens from its
partition's limiter on this gateway, and once one is empty the request waits for tokens
before it appends more (:mod:`pulsar_gateway.core.policies.rate_limits`; a binary connection
is not read meanwhile). Messages appended after a wait carry the time they were appended.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import orjson
from aiohttp import web

from pulsar_gateway.adapters.resource import fail, handler, topic_name
from pulsar_gateway.core import (
    PARTITION_SUFFIX,
    AppendOutcome,
    AppendStatus,
    GatewayError,
    ProducerHandle,
    PublishThrottle,
    SchemaData,
    Services,
    encode_version,
)
from pulsar_gateway.entry_codec import OutgoingMessage, encode_entry, entry_to_append
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["add_routes", "encode_value"]

DEFAULT_PRODUCER_NAME = "RestProducer"
_TOPIC = "/topics/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}"

#: Value encoders of the schemas REST produce accepts (Pulsar's ``encodeWithSchema``).
_ENCODERS: dict[str, tuple[int, Callable[[str], bytes]]] = {
    "STRING": (pb.Schema.String, str.encode),
    "BYTES": (0, str.encode),  # Schema.Type None: Pulsar's BYTES on the wire
    "JSON": (pb.Schema.Json, str.encode),
    "BOOLEAN": (pb.Schema.Bool, lambda v: b"\x01" if v.strip().lower() == "true" else b"\x00"),
    "INT8": (pb.Schema.Int8, lambda v: struct.pack(">b", int(v))),
    "INT16": (pb.Schema.Int16, lambda v: struct.pack(">h", int(v))),
    "INT32": (pb.Schema.Int32, lambda v: struct.pack(">i", int(v))),
    "INT64": (pb.Schema.Int64, lambda v: struct.pack(">q", int(v))),
    "FLOAT": (pb.Schema.Float, lambda v: struct.pack(">f", float(v))),
    "DOUBLE": (pb.Schema.Double, lambda v: struct.pack(">d", float(v))),
}


def encode_value(schema_type: str, text: str) -> bytes:
    """The payload bytes of ``text`` under ``schema_type``.

    Raises:
        ValueError: unsupported schema type or a value it cannot hold.
    """
    entry = _ENCODERS.get(schema_type)
    if entry is None:
        raise ValueError(f"Schema type {schema_type} is not supported by REST produce")
    try:
        return entry[1](text)
    except (ValueError, struct.error) as exc:
        raise ValueError(f"Cannot encode {text[:100]!r} as {schema_type}: {exc}") from None


def _bad(reason: str) -> web.HTTPException:
    return fail(web.HTTPBadRequest, reason)


def _int(value: Any, field: str, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, str):  # Pulsar's eventTime is a string of a long
        try:
            return int(value) if value else default
        except ValueError:
            raise _bad(f"{field} must be an integer: {value[:100]!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(f"{field} must be an integer")
    return value


def _value_schema(body: dict[str, Any]) -> tuple[str, SchemaData | None]:
    """The value schema's type name and, when the request gives one, its definition."""
    raw = body.get("valueSchema")
    if body.get("keySchema"):
        raise _bad("Schema type KEY_VALUE is not supported by REST produce")
    if not raw:
        return "STRING", None
    try:
        info = json.loads(raw) if isinstance(raw, str) else raw
        type_name = str(info.get("type", "")).upper()
        definition = info.get("schema") or ""
        data = base64.b64decode(definition) if isinstance(definition, str) else b""
        properties = info.get("properties") or {}
    except (ValueError, AttributeError, binascii.Error):
        raise _bad("valueSchema must be a SchemaInfo JSON object") from None
    if type_name not in _ENCODERS:
        raise _bad(f"Schema type {type_name or '?'} is not supported by REST produce")
    schema = SchemaData(
        _ENCODERS[type_name][0],
        str(info.get("name") or type_name),
        data,
        tuple(sorted((str(k), str(v)) for k, v in properties.items())),
    )
    return type_name, schema


class _Request(NamedTuple):
    """One message of the request: what to store, and what is resolved when storing."""

    message: OutgoingMessage
    sequence_id: int
    deliver_after_ms: int


def _messages(body: dict[str, Any], schema_type: str) -> list[_Request]:
    items = body.get("messages")
    if not isinstance(items, list):
        raise _bad("messages must be a list")
    encode = _ENCODERS[schema_type][1] if schema_type != "STRING" else None
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _bad(f"messages[{i}] must be an object")
        get = item.get
        payload = get("payload")
        if not isinstance(payload, str):
            raise _bad(f"messages[{i}].payload must be a string")
        properties = get("properties") or {}
        if properties and (
            not isinstance(properties, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items())
        ):
            raise _bad(f"messages[{i}].properties must map strings to strings")
        key = get("key")
        if key is not None and not isinstance(key, str):
            raise _bad(f"messages[{i}].key must be a string")
        clusters = get("replicationClusters") or ()
        if clusters and (
            not isinstance(clusters, list) or not all(isinstance(c, str) for c in clusters)
        ):
            raise _bad(f"messages[{i}].replicationClusters must be a list of strings")
        if get("disableReplication"):
            clusters = ("__local__",)  # Pulsar's marker for "this cluster only"
        if encode is None:  # STRING, the default: UTF-8 (a lone surrogate cannot be)
            try:
                value = payload.encode()
            except UnicodeEncodeError as exc:
                raise _bad(f"messages[{i}]: Cannot encode as STRING: {exc}") from None
        else:
            try:
                value = encode_value(schema_type, payload)
            except ValueError as invalid:
                raise _bad(f"messages[{i}]: {invalid}") from None
        message = OutgoingMessage(
            value,
            key,
            properties,
            _int(get("eventTime"), "eventTime"),
            None,  # ordering key: not in Pulsar's ProducerMessage
            _int(get("deliverAt"), "deliverAt") or None,
            tuple(clusters),
        )
        out.append(
            _Request(
                message,
                _int(get("sequenceId"), "sequenceId"),
                _int(get("deliverAfterMs"), "deliverAfterMs"),
            )
        )
    return out


def _publish(
    producer: ProducerHandle,
    request: _Request,
    version: bytes | None,
    now: int,
    max_size: int,
    throttle: PublishThrottle,
) -> asyncio.Future[AppendOutcome]:
    """Queue one message's append: its future resolves with the append's outcome, or fails
    with why it was refused.
    A future per message, no task: a request's appends share the lane's pipelines. The
    message takes its tokens from its topic's publish rate, which may pause ``throttle``."""
    message, sequence_id = request.message, request.sequence_id
    if request.deliver_after_ms and message.deliver_at is None:
        message.deliver_at = now + request.deliver_after_ms
    try:
        blob = encode_entry(message, producer.name, sequence_id, now, schema_version=version)
        if len(blob) > max_size:
            raise ValueError(f"Message size {len(blob)} exceeds maxMessageSize")
        fut = producer.append(entry_to_append(message, blob, sequence_id, now))
        if producer.publish_rate.limited:
            throttle.acquire(producer.publish_rate, 1, len(blob))
        return fut
    except (GatewayError, ValueError) as exc:
        refused: asyncio.Future[AppendOutcome] = asyncio.get_running_loop().create_future()
        refused.set_exception(exc)
        return refused


#: The memory a request holds while it is served, per byte of its body: the body, its
#: parsed JSON, the messages and the entries built from them (measured with
#: ``python -m tests.soak --scenario rest_flood``: about six times the body).
BODY_WEIGHT = 6


async def produce(services: Services, request: web.Request) -> web.Response:
    """A request is served once the gateway's publish buffer has room for it: it holds
    BODY_WEIGHT times its body's size there (a body without Content-Length counts as the
    largest allowed) until it is answered, so the requests in progress hold at most about
    half of the buffer together (``PublishBuffer.reserve``). Too large a body is refused by
    aiohttp with 413 (``http_max_request_size``)."""
    buffer = services.publish_buffer
    reserved = BODY_WEIGHT * (request.content_length or services.limits.http_max_request_size)
    await buffer.reserve(reserved)
    try:
        return await _produce(services, request)
    finally:
        buffer.unreserve(reserved)


async def _produce(services: Services, request: web.Request) -> web.Response:
    topic = topic_name(request)
    partition = request.match_info.get("partition")
    if partition is not None and PARTITION_SUFFIX in topic.local_name:
        raise _bad("Topic name can't contain '-partition-' suffix.")
    try:
        body = orjson.loads(await request.read())
    except ValueError as exc:  # orjson.JSONDecodeError, also for invalid UTF-8
        raise _bad(f"Invalid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise _bad("The body must be a ProducerMessages JSON object")
    producer_name = body.get("producerName") or DEFAULT_PRODUCER_NAME
    if not isinstance(producer_name, str):
        raise _bad("producerName must be a string")
    schema_type, schema = _value_schema(body)
    messages = _messages(body, schema_type)
    requested_version = _int(body.get("schemaVersion"), "schemaVersion", -1)

    partitions = await services.topics.client_partitions(topic)
    if partition is not None:
        index = int(partition)
        if index >= max(partitions, 1) or (partitions == 0 and index != 0):
            raise fail(web.HTTPNotFound, f"Partition {index} of {topic} does not exist")
        targets = [topic.partition(index)] if partitions else [topic]
    else:
        targets = [topic.partition(i) for i in range(partitions)] if partitions else [topic]

    version_number = requested_version
    if schema is not None:
        version_number = await services.schemas.register(topic, schema)
    version = encode_version(version_number) if version_number >= 0 else None

    producers: dict[str, ProducerHandle] = {}
    throttle = PublishThrottle()
    for target in targets:
        producers[str(target)] = await services.producers.publisher(target, producer_name)
    now = int(time.time() * 1000)
    max_size = services.limits.max_message_size
    count = len(targets)
    # At most `window` appends of the request wait for Redis at once (the gateway's
    # maxPendingPublishRequestsPerConnection): the next ones are queued as the oldest are
    # answered, so one request of many small messages keeps a bounded part of the lane.
    # (No wait on the publish buffer here: the request's reservation already counts them.)
    window = services.limits.max_pending_publishes
    appends: deque[asyncio.Future[AppendOutcome]] = deque()
    queued = 0

    def queue_more() -> None:
        nonlocal queued
        # not while a topic's publish rate pauses the request (the loop below waits)
        while queued < len(messages) and len(appends) < window and not throttle.throttled:
            target = str(targets[queued % count])
            appends.append(
                _publish(producers[target], messages[queued], version, now, max_size, throttle)
            )
            queued += 1

    indexes = [target.partition_index for target in targets]
    results: list[dict[str, Any]] = []
    unexpected: BaseException | None = None
    for i in range(len(messages)):  # in order: one wake-up per pipeline, no gather
        if not appends and throttle.throttled:
            await throttle.wait()
            now = int(time.time() * 1000)
        if not appends or (len(appends) < window // 2 and queued < len(messages)):
            queue_more()
        fut = appends.popleft()
        index = indexes[i % count]
        try:
            outcome = await fut
        except (GatewayError, ValueError) as failure:
            results.append({"messageId": "", "errorCode": 2, "errorMsg": str(failure)})
            continue
        except Exception as bug:  # a bug: raised once every append is awaited
            unexpected = unexpected or bug
            continue
        status, ledger_id, entry_id = outcome
        if status is AppendStatus.REFUSED:  # the topic was terminated meanwhile
            error = {"messageId": "", "errorCode": 2, "errorMsg": "Topic was already terminated"}
            results.append(error)
        else:  # MessageIdImpl "L:E:P"; a duplicate's (stored before, nothing now) is -1:-1
            results.append({"messageId": f"{ledger_id}:{entry_id}:{index}", "errorCode": 0})
    if unexpected is not None:
        raise unexpected
    acks = {"messagePublishResults": results, "schemaVersion": max(version_number, 0)}
    return web.Response(body=orjson.dumps(acks), content_type="application/json")


def add_routes(app: web.Application) -> None:
    route = handler(produce)
    app.router.add_post(_TOPIC, route)
    app.router.add_post(f"{_TOPIC}/partitions/{{partition:\\d+}}", route)
