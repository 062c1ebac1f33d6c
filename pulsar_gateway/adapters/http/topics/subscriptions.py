"""Admin REST v2: subscriptions, cursors, peeking, internal stats and the last message id,
with Pulsar's paths, bodies and statuses (``PersistentTopics.java``, which
``NonPersistentTopics.java`` extends; ``PersistentTopicsBase.java``).

Paths, under ``/admin/v2/{persistent|non-persistent}/{tenant}/{ns}/{topic}``::

    GET    /subscriptions                                    getSubscriptions
    PUT    /subscription/{sub}?replicated=                   createSubscription
    DELETE /subscription/{sub}?force=                        deleteSubscription
    POST   /subscription/{sub}/skip/{numMessages}            skipMessages
    POST   /subscription/{sub}/skip_all                      skipAllMessages
    POST   /subscription/{sub}/expireMessages/{seconds}      expireTopicMessages
    POST   /subscription/{sub}/expireMessages                (body: ResetCursorData)
    POST   /all_subscription/expireMessages/{seconds}        expireMessagesForAllSubscriptions
    POST   /subscription/{sub}/resetcursor/{timestamp}       resetCursor
    POST   /subscription/{sub}/resetcursor                   resetCursorOnPosition (body)
    GET    /subscription/{sub}/position/{messagePosition}    peekNthMessage
    GET    /subscription/{sub}/peek?count=10                 the first entries as JSON (below)
    GET    /ledger/{ledgerId}/entry/{entryId}                getMessageById
    GET    /examinemessage?initialPosition=&messagePosition= examineMessage
    GET    /internalStats                                    getInternalStats
    GET    /partitioned-internalStats                        getPartitionedStatsInternal
    GET    /lastMessageId                                    getLastMessageId

Bodies: a ``ResetCursorData`` / ``MessageIdImpl`` JSON object (``ledgerId``, ``entryId``,
``partitionIndex``, ``batchIndex``, ``isExcluded`` (Jackson spells Lombok's getter
``excluded``; both are read), ``properties`` ignored) or the JSON strings ``"latest"`` /
``"earliest"``. Peeks answer the entry's payload (decompressed, a batch whole, as Pulsar's
``generateResponseWithEntry``) as ``application/octet-stream`` with Pulsar's
``X-Pulsar-*`` headers.

Beyond Pulsar, ``peek?count=n`` (1..100, default 10) answers the first ``n`` entries of the
backlog in one JSON body, as ``n`` peeks at ``position/1`` to ``position/n`` would give
them, each batch split into its messages (a console cannot split a batch from headers):
``{"messages": [{"messageId" ("L:E", or "L:E:batchIndex" in a batch), "ledgerId",
"entryId", "batchIndex" (-1 outside a batch), "position" (the entry's 1-based position in
the backlog), "publishTime", "eventTime" (ms; 0 unset), "key" (or null), "properties",
"producerName", "sequenceId", "payload" (base64, decompressed; an encrypted one as
stored), "size" (payload bytes)}]}``. Messages a compaction dropped from a batch are left
out; a batch's messages already acknowledged are listed, as the entry-wise peek shows them.
An entry relayed as sent that cannot be read as messages (a payload its codec cannot read)
is listed whole, as ``position/{n}`` serves it, with an ``"error"`` saying why.

Statuses: 204 for changes; 404 unknown topic, subscription or message; 409 a subscription
that exists, an expiry Pulsar would not issue; 412 invalid names, consumers connected
(delete without ``force``), a position of another partition; 405 what Pulsar refuses on
partitioned or non-persistent topics; 400 a non-persistent create and bad bodies. Every
error body is ``{"reason": ...}``.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote

from aiohttp import web

from pulsar_gateway.adapters.http.topics.operations import message_id_json
from pulsar_gateway.adapters.resource import (
    Body,
    fail,
    flag,
    handler,
    read_text,
    topic_name,
)
from pulsar_gateway.core import (
    CursorPosition,
    EntryFormatError,
    Services,
    StoredEntry,
    format_time,
)
from pulsar_gateway.entry_codec import (
    CodecError,
    MessageFormatError,
    ReceivedMessage,
    decompress,
    parse_blob,
    proto_field,
    proto_text,
    unpack_entry,
)
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["add_routes"]

_TOPIC = "/admin/v2/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}"
_SUB = _TOPIC + "/subscription/{subscription}"


def _mapped(body: Body) -> Body:
    """A subscription operation's ValueError (a position that does not fit the topic) is
    Pulsar's 412; domain errors go through the HTTP error table."""

    async def run(services: Services, request: web.Request) -> Any:
        try:
            return await body(services, request)
        except ValueError as exc:
            raise fail(web.HTTPPreconditionFailed, str(exc)) from None

    return run


def _int_path(request: web.Request, name: str) -> int:
    raw = request.match_info[name]
    try:
        return int(raw)
    except ValueError:
        raise fail(web.HTTPBadRequest, f"{name} must be an integer, got {raw!r}") from None


def _int_field(body: dict[str, Any], name: str, default: int) -> int:
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not -1 <= value < 1 << 63:
        raise fail(web.HTTPBadRequest, f"Invalid ResetCursorData: {name} must be a long (>= -1)")
    return value


async def _position(request: web.Request, *, required: bool) -> CursorPosition:
    """The ``ResetCursorData`` (or ``MessageIdImpl``) body; "latest" when absent and not
    required (createSubscription's default)."""
    raw = await read_text(request)
    latest = CursorPosition((1 << 63) - 1, (1 << 63) - 1)
    if not raw.strip():
        if required:
            raise fail(web.HTTPBadRequest, "Invalid ResetCursorData: a message id is required")
        return latest
    try:
        body: Any = json.loads(raw)
    except ValueError as exc:
        raise fail(web.HTTPBadRequest, f"Invalid ResetCursorData: {exc}") from None
    if body == "latest":
        return latest
    if body == "earliest":
        return CursorPosition(-1, -1)
    if not isinstance(body, dict) or "ledgerId" not in body or "entryId" not in body:
        raise fail(
            web.HTTPBadRequest,
            'Invalid ResetCursorData: expected {"ledgerId": L, "entryId": E, ...}, '
            '"latest" or "earliest"',
        )
    excluded = body.get("isExcluded", body.get("excluded", False))
    if not isinstance(excluded, bool):
        raise fail(web.HTTPBadRequest, "Invalid ResetCursorData: isExcluded must be a boolean")
    return CursorPosition(
        _int_field(body, "ledgerId", 0),
        _int_field(body, "entryId", 0),
        _int_field(body, "partitionIndex", -1),
        excluded,
        _int_field(body, "batchIndex", -1),
    )


def _sub(request: web.Request) -> str:
    return request.match_info["subscription"]


# -- subscriptions ---------------------------------------------------------------------------


async def get_subscriptions(services: Services, request: web.Request) -> list[str]:
    return await services.subscription_admin.subscriptions(topic_name(request))


async def create_subscription(services: Services, request: web.Request) -> None:
    topic = topic_name(request)
    if not topic.persistent:
        # Pulsar answers this before reading the body (PersistentTopics.createSubscription)
        raise fail(
            web.HTTPBadRequest,
            "Create subscription on non-persistent topic can only be done through client",
        )
    # ?replicated= is accepted and has no effect: there is no geo-replication here.
    position = await _position(request, required=False)
    await services.subscription_admin.create(topic, _sub(request), position)


async def delete_subscription(services: Services, request: web.Request) -> None:
    await services.subscription_admin.delete(
        topic_name(request), _sub(request), flag(request, "force")
    )


async def skip(services: Services, request: web.Request) -> None:
    count = _int_path(request, "count")
    if count < 0:
        raise fail(web.HTTPBadRequest, "numMessages must be >= 0")
    await services.subscription_admin.skip(topic_name(request), _sub(request), count)


async def skip_all(services: Services, request: web.Request) -> None:
    await services.subscription_admin.clear_backlog(topic_name(request), _sub(request))


def _not_issued(topic: Any, subscription: str, how: str) -> web.HTTPException:
    # PersistentTopicsBase.internalExpireMessagesByTimestampForSinglePartition's text
    return fail(
        web.HTTPConflict,
        f"Expire message by {how} not issued on topic {topic} for subscription {subscription} "
        "due to ongoing message expiration not finished or subscription almost catch up. If "
        "it's performed on a partitioned topic operation might succeeded on other partitions, "
        "please check stats of individual partition.",
    )


async def expire_by_age(services: Services, request: web.Request) -> None:
    topic, sub = topic_name(request), _sub(request)
    seconds = _int_path(request, "seconds")
    if not await services.subscription_admin.expire_by_age(topic, sub, seconds):
        raise _not_issued(topic, sub, "timestamp")


async def expire_at(services: Services, request: web.Request) -> None:
    topic, sub = topic_name(request), _sub(request)
    position = await _position(request, required=True)
    if not await services.subscription_admin.expire_at(topic, sub, position):
        raise _not_issued(topic, sub, "position")


async def expire_all(services: Services, request: web.Request) -> None:
    seconds = _int_path(request, "seconds")
    refused = await services.subscription_admin.expire_all(topic_name(request), seconds)
    if refused:
        # Pulsar answers with the last subscription's refusal
        partition, subscription = refused[-1]
        raise _not_issued(partition, subscription, "timestamp")


async def reset_by_time(services: Services, request: web.Request) -> None:
    timestamp = _int_path(request, "timestamp")
    await services.subscription_admin.reset_by_time(topic_name(request), _sub(request), timestamp)


async def reset_to(services: Services, request: web.Request) -> None:
    topic, sub = topic_name(request), _sub(request)
    position = await _position(request, required=True)
    await services.subscription_admin.reset_to(topic, sub, position)


# -- reading entries -------------------------------------------------------------------------


#: C0 control characters and DEL: a CR or LF in a header would end it (aiohttp refuses to
#: send one), the others no HTTP client expects
_CONTROL = {c: " " for c in (*range(0x20), 0x7F) if c != 0x09}


#: Characters of metadata kept in one header: HTTP clients refuse a header line of 8 KiB
#: or more (aiohttp's and Netty's default limits), and a character takes up to 4 bytes.
_HEADER_TEXT_MAX = 2000
#: Headers of one repeated field (properties, replicate_to, encryption keys), the first
#: ones: HTTP clients refuse a response with more than about a hundred headers (aiohttp's
#: default limit is 128).
_REPEATED_HEADERS_MAX = 32


def _header(value: str | bytes) -> str:
    """Message metadata as a header value: the client's text (:func:`proto_text`) with
    control characters as spaces, cut at :data:`_HEADER_TEXT_MAX` characters, so whatever
    a producer sent, the headers stay well formed and readable (the payload is whole)."""
    return proto_text(value)[:_HEADER_TEXT_MAX].translate(_CONTROL)


def _base64_header(data: bytes) -> str:
    """Binary metadata as base64 in a header, of the first bytes that fit in
    :data:`_HEADER_TEXT_MAX` characters (still valid base64)."""
    return base64.b64encode(data[: _HEADER_TEXT_MAX // 4 * 3]).decode()


def _header_name(key: str | bytes) -> str:
    """A message property's name in a header name, which must be an HTTP token (RFC 9110
    5.6.2): other characters (spaces, non-ASCII, separators) and ``%`` are percent-encoded
    as UTF-8, so any name a producer set arrives, and ``unquote`` gives it back (names of
    more than :data:`_HEADER_TEXT_MAX` characters cut, as values are)."""
    return quote(proto_text(key), safe="!#$&'*+-.^_`|~")[:_HEADER_TEXT_MAX]


def _flag_text(value: bool) -> str:
    return "true" if value else "false"


def _whole_entry(entry: StoredEntry) -> tuple[pb.MessageMetadata, bytes]:
    """An entry's metadata and its payload after it, decompressed (a batch stays whole)."""
    try:
        parsed = parse_blob(entry.blob)
    except CodecError as exc:  # the binary front parses every entry before storing it
        raise fail(web.HTTPInternalServerError, f"Stored entry is unreadable: {exc}") from None
    md = parsed.metadata
    try:
        return md, decompress(md.compression, parsed.payload, md.uncompressed_size)
    except EntryFormatError:
        # A producer may store a payload its codec cannot read (the gateway relays entries
        # as sent): it is served as stored, X-Pulsar-compression naming the codec it claims,
        # rather than an error for a request that is sound.
        return md, parsed.payload


def _entry_response(entry: StoredEntry) -> web.Response:
    """Pulsar ``PersistentTopicsBase.generateResponseWithEntry``: the payload after the
    metadata, decompressed (a batch stays whole: clients split it by
    ``X-Pulsar-num-batch-message``), and the metadata as headers."""
    md, data = _whole_entry(entry)
    mid = entry.message_id
    headers: list[tuple[str, str]] = [("X-Pulsar-Message-ID", f"{mid.ledger_id}:{mid.entry_id}")]
    headers += [
        (f"X-Pulsar-PROPERTY-{_header_name(p.key)}", _header(p.value))
        for p in md.properties[:_REPEATED_HEADERS_MAX]
    ]
    headers.append(("X-Pulsar-publish-time", format_time(md.publish_time)))
    if md.HasField("event_time"):
        headers.append(("X-Pulsar-event-time", format_time(md.event_time)))
    if md.HasField("deliver_at_time"):
        headers.append(("X-Pulsar-deliver-at-time", format_time(md.deliver_at_time)))
    if md.HasField("num_messages_in_batch"):
        headers.append(("X-Pulsar-num-batch-message", str(md.num_messages_in_batch)))
        headers.append(("X-Pulsar-batch-size", str(len(entry.blob) - md.ByteSize())))
    if md.HasField("null_value"):
        headers.append(("X-Pulsar-null-value", _flag_text(md.null_value)))
    if md.HasField("num_chunks_from_msg"):
        headers.append(("X-Pulsar-PROPERTY-TOTAL-CHUNKS", str(md.num_chunks_from_msg)))
        headers.append(("X-Pulsar-PROPERTY-CHUNK-ID", str(md.chunk_id)))
    headers.append(("X-Pulsar-Is-Encrypted", _flag_text(len(md.encryption_keys) > 0)))
    headers.append(("X-Pulsar-producer-name", _header(md.producer_name)))
    headers.append(("X-Pulsar-sequence-id", str(md.sequence_id)))
    if md.HasField("replicated_from"):
        headers.append(("X-Pulsar-replicated-from", _header(md.replicated_from)))
    headers += [
        ("X-Pulsar-replicated-to", _header(cluster))
        for cluster in md.replicate_to[:_REPEATED_HEADERS_MAX]
    ]
    if md.HasField("partition_key"):
        headers.append(("X-Pulsar-partition-key", _header(md.partition_key)))
    if md.HasField("compression"):
        headers.append(("X-Pulsar-compression", pb.CompressionType.Name(md.compression)))
    if md.HasField("uncompressed_size"):
        headers.append(("X-Pulsar-uncompressed-size", str(md.uncompressed_size)))
    if md.HasField("encryption_algo"):
        headers.append(("X-Pulsar-encryption-algo", _header(md.encryption_algo)))
    headers += [
        ("X-Pulsar-Base64-encryption-keys", _base64_header(k.SerializeToString()))
        for k in md.encryption_keys[:_REPEATED_HEADERS_MAX]
    ]
    optional_b64 = (
        ("encryption_param", "X-Pulsar-Base64-encryption-param"),
        ("schema_version", "X-Pulsar-Base64-schema-version"),
        ("ordering_key", "X-Pulsar-Base64-ordering-key"),
    )
    for field, header in optional_b64:
        if md.HasField(field):
            headers.append((header, _base64_header(getattr(md, field))))
    if md.HasField("partition_key_b64_encoded"):
        headers.append(
            ("X-Pulsar-partition-key-b64-encoded", _flag_text(md.partition_key_b64_encoded))
        )
    optional_numbers = (
        ("marker_type", "X-Pulsar-marker-type"),
        ("txnid_least_bits", "X-Pulsar-txnid-least-bits"),
        ("txnid_most_bits", "X-Pulsar-txnid-most-bits"),
        ("highest_sequence_id", "X-Pulsar-highest-sequence-id"),
        ("num_chunks_from_msg", "X-Pulsar-num-chunks-from-msg"),
        ("total_chunk_msg_size", "X-Pulsar-total-chunk-msg-size"),
        ("chunk_id", "X-Pulsar-chunk-id"),
    )
    if md.HasField("uuid"):
        headers.append(("X-Pulsar-uuid", _header(md.uuid)))
    for field, header in optional_numbers:
        if md.HasField(field):
            headers.append((header, str(getattr(md, field))))
    if md.HasField("null_partition_key"):
        headers.append(("X-Pulsar-null-partition-key", _flag_text(md.null_partition_key)))
    response = web.Response(body=data, content_type="application/octet-stream")
    for name, value in headers:
        response.headers.add(name, value)
    return response


async def peek(services: Services, request: web.Request) -> web.Response:
    position = _int_path(request, "position")
    entry = await services.subscription_admin.peek(topic_name(request), _sub(request), position)
    return _entry_response(entry)


#: Most entries one JSON peek returns (each is a script call, queued together).
_PEEK_MAX = 100
_PEEK_DEFAULT = 10


def _message_json(message: ReceivedMessage, position: int) -> dict[str, Any]:
    mid = message.message_id
    text_id = f"{mid.ledger_id}:{mid.entry_id}"
    if mid.batch_index >= 0:
        text_id += f":{mid.batch_index}"
    return {
        "messageId": text_id,
        "ledgerId": mid.ledger_id,
        "entryId": mid.entry_id,
        "batchIndex": mid.batch_index,
        "position": position,
        "publishTime": message.publish_time,
        "eventTime": message.event_time,
        "key": message.key,
        "properties": message.properties,
        "producerName": message.producer_name,
        "sequenceId": message.sequence_id,
        "payload": base64.b64encode(message.payload).decode(),
        "size": len(message.payload),
    }


def _unsplit_entry_json(entry: StoredEntry, position: int, reason: str) -> dict[str, Any]:
    """An entry the gateway relayed as sent but cannot read as messages (a payload its codec
    cannot read, a batch whose sizes do not add up): whole, as ``position/{n}`` serves it,
    with ``error`` saying why it is not split (one-message surfaces skip such entries)."""
    md, data = _whole_entry(entry)
    mid = entry.message_id
    return {
        "messageId": f"{mid.ledger_id}:{mid.entry_id}",
        "ledgerId": mid.ledger_id,
        "entryId": mid.entry_id,
        "batchIndex": -1,
        "position": position,
        "publishTime": md.publish_time,
        "eventTime": md.event_time,
        "key": proto_field(md, "partition_key") if md.HasField("partition_key") else None,
        "properties": {proto_field(p, "key"): proto_field(p, "value") for p in md.properties},
        "producerName": proto_field(md, "producer_name"),
        "sequenceId": md.sequence_id,
        "payload": base64.b64encode(data).decode(),
        "size": len(data),
        "error": f"Not read as messages: {reason}",
    }


async def peek_messages(services: Services, request: web.Request) -> dict[str, Any]:
    raw = request.query.get("count", str(_PEEK_DEFAULT))
    if not (raw.isascii() and raw.isdecimal() and len(raw) <= 3 and 1 <= int(raw) <= _PEEK_MAX):
        raise fail(
            web.HTTPBadRequest, f"count must be an integer within 1..{_PEEK_MAX}, got {raw!r}"
        )
    entries = await services.subscription_admin.peek_many(
        topic_name(request), _sub(request), int(raw)
    )
    messages = []
    for position, entry in enumerate(entries, start=1):
        mid = entry.message_id
        try:
            unpacked = unpack_entry(mid.stream_id, entry.blob, partition=mid.partition)
        except MessageFormatError as exc:
            messages.append(_unsplit_entry_json(entry, position, str(exc)))
            continue
        messages += [_message_json(message, position) for message in unpacked]
    return {"messages": messages}


async def get_message_by_id(services: Services, request: web.Request) -> web.Response:
    ledger_id, entry_id = _int_path(request, "ledger"), _int_path(request, "entry")
    return _entry_response(
        await services.subscription_admin.entry(topic_name(request), ledger_id, entry_id)
    )


async def examine(services: Services, request: web.Request) -> web.Response:
    initial = request.query.get("initialPosition", "latest")
    if initial not in ("latest", "earliest"):
        raise fail(web.HTTPBadRequest, "initialPosition must be 'latest' or 'earliest'")
    raw = request.query.get("messagePosition", "1")
    try:
        position = int(raw)
    except ValueError:
        raise fail(web.HTTPBadRequest, f"messagePosition must be an integer, got {raw!r}") from None
    return _entry_response(
        await services.subscription_admin.examine(topic_name(request), initial, position)
    )


# -- stats and ids -------------------------------------------------------------------------


async def get_internal_stats(services: Services, request: web.Request) -> dict[str, Any]:
    return await services.internal_stats.topic(topic_name(request))


async def get_partitioned_internal_stats(
    services: Services, request: web.Request
) -> dict[str, Any]:
    return await services.internal_stats.partitioned(topic_name(request))


async def get_last_message_id(services: Services, request: web.Request) -> dict[str, Any]:
    """MessageIdImpl JSON; BatchMessageIdImpl's ``batchIndex`` (the last index) and
    ``batchSize`` when the last entry is a batch (PersistentTopic.getLastMessageId)."""
    message_id, batch_size = await services.subscription_admin.last_message_id(topic_name(request))
    body: dict[str, Any] = message_id_json(message_id)
    if batch_size:
        body["batchIndex"] = batch_size - 1
        body["batchSize"] = batch_size
    return body


def add_routes(app: web.Application) -> None:
    """Register the subscription admin routes for both domains."""
    routes: tuple[tuple[str, str, Body], ...] = (
        ("GET", _TOPIC + "/subscriptions", get_subscriptions),
        ("PUT", _SUB, create_subscription),
        ("DELETE", _SUB, delete_subscription),
        ("POST", _SUB + "/skip/{count}", skip),
        ("POST", _SUB + "/skip_all", skip_all),
        ("POST", _SUB + "/expireMessages/{seconds}", expire_by_age),
        ("POST", _SUB + "/expireMessages", expire_at),
        ("POST", _TOPIC + "/all_subscription/expireMessages/{seconds}", expire_all),
        ("POST", _SUB + "/resetcursor/{timestamp}", reset_by_time),
        ("POST", _SUB + "/resetcursor", reset_to),
        ("GET", _TOPIC + "/internalStats", get_internal_stats),
        ("GET", _TOPIC + "/partitioned-internalStats", get_partitioned_internal_stats),
        ("GET", _TOPIC + "/lastMessageId", get_last_message_id),
    )
    for method, path, body in routes:
        app.router.add_route(method, path, handler(_mapped(body)))
    entries: tuple[tuple[str, Body], ...] = (
        (_SUB + "/position/{position}", peek),
        (_SUB + "/peek", peek_messages),
        (_TOPIC + "/ledger/{ledger}/entry/{entry}", get_message_by_id),
        (_TOPIC + "/examinemessage", examine),
    )
    for path, body in entries:
        app.router.add_get(path, handler(_mapped(body)))
