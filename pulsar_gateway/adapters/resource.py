"""What every HTTP resource shares (Pulsar's ``AdminResource``): the services, path
validation, the handler wrapper, and the one table of domain errors to HTTP statuses.

Statuses follow ``PersistentTopicsBase`` / ``AdminResource`` / ``TenantsBase`` for the admin
API and REST produce, and ``AbstractWebSocketHandler.getErrorCode`` before a WebSocket
upgrade (the two differ where Pulsar's do: an invalid name is 412 in admin and 400 for
WebSocket). Every error body is ``{"reason": ...}`` (the app's ``json_errors`` middleware).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from pulsar_gateway.core import (
    PARTITION_SUFFIX,
    AlreadyExists,
    CompactionAlreadyRunning,
    ConcurrentModification,
    ConsumerBusy,
    EncryptionRequired,
    GatewayError,
    IncompatibleSchema,
    InvalidNamespaceName,
    InvalidPartitionCount,
    InvalidTenantInfo,
    InvalidTopicName,
    MessageNotFound,
    NamespaceNotFound,
    NotAllowed,
    NotEmpty,
    ProducerBlockedQuotaExceeded,
    ProducerBusy,
    ProducerFenced,
    ServiceNotReady,
    Services,
    StorageError,
    SubscriptionBusy,
    SubscriptionConflict,
    SubscriptionNotFound,
    TenantNotFound,
    TooManyTopics,
    TopicBusy,
    TopicConflict,
    TopicName,
    TopicNotFound,
    TopicTerminated,
    parse_topic_name,
)

__all__ = [
    "SERVICES",
    "Body",
    "MethodNotAllowed",
    "fail",
    "flag",
    "handler",
    "http_error",
    "namespace_name",
    "read_json",
    "read_properties",
    "read_text",
    "topic_name",
    "websocket_status",
]

#: Where the app keeps the core's services.
SERVICES = web.AppKey("services", Services)

#: A resource's body: the services and the request in, JSON-able data (or None) out.
Body = Callable[[Services, web.Request], Awaitable[Any]]


class MethodNotAllowed(web.HTTPClientError):
    """405 without aiohttp's Allow header bookkeeping: Pulsar's "not allowed on a
    partitioned / non-persistent topic" (``RestException(METHOD_NOT_ALLOWED)``)."""

    status_code = 405


_Status = type[web.HTTPException]

#: Domain errors -> (admin and REST status, status before a WebSocket upgrade); the first
#: match wins, so subclasses come before their bases. A refusal Pulsar's WebSocket handler
#: does not name is its generic 400 (``NotAllowed``); one the admin API does not name, 405.
_STATUS: tuple[tuple[type[GatewayError], _Status, _Status], ...] = (
    (InvalidTopicName, web.HTTPPreconditionFailed, web.HTTPBadRequest),
    (InvalidNamespaceName, web.HTTPPreconditionFailed, web.HTTPBadRequest),
    (InvalidTenantInfo, web.HTTPPreconditionFailed, web.HTTPBadRequest),
    (TopicConflict, web.HTTPConflict, web.HTTPBadRequest),
    (TopicBusy, web.HTTPPreconditionFailed, web.HTTPBadRequest),
    (TooManyTopics, web.HTTPPreconditionFailed, web.HTTPBadRequest),
    (EncryptionRequired, web.HTTPPreconditionFailed, web.HTTPBadRequest),
    (InvalidPartitionCount, web.HTTPUnprocessableEntity, web.HTTPBadRequest),
    (SubscriptionBusy, web.HTTPPreconditionFailed, web.HTTPBadRequest),
    (SubscriptionConflict, web.HTTPConflict, web.HTTPBadRequest),
    (AlreadyExists, web.HTTPConflict, web.HTTPBadRequest),
    (NotEmpty, web.HTTPConflict, web.HTTPBadRequest),
    (ConcurrentModification, web.HTTPConflict, web.HTTPBadRequest),
    (TopicNotFound, web.HTTPNotFound, web.HTTPNotFound),
    (TopicTerminated, web.HTTPPreconditionFailed, web.HTTPBadRequest),
    (SubscriptionNotFound, web.HTTPNotFound, web.HTTPNotFound),
    (MessageNotFound, web.HTTPNotFound, web.HTTPNotFound),
    (TenantNotFound, web.HTTPNotFound, web.HTTPNotFound),
    (NamespaceNotFound, web.HTTPNotFound, web.HTTPNotFound),
    (CompactionAlreadyRunning, web.HTTPConflict, web.HTTPConflict),
    (ConsumerBusy, web.HTTPConflict, web.HTTPConflict),
    (ProducerBusy, web.HTTPConflict, web.HTTPConflict),
    (ProducerFenced, web.HTTPConflict, web.HTTPConflict),
    (IncompatibleSchema, web.HTTPConflict, web.HTTPConflict),
    (NotAllowed, MethodNotAllowed, web.HTTPBadRequest),
    # both policies (AbstractWebSocketHandler.getErrorCode: SC_SERVICE_UNAVAILABLE)
    (ProducerBlockedQuotaExceeded, web.HTTPServiceUnavailable, web.HTTPServiceUnavailable),
    (ServiceNotReady, web.HTTPServiceUnavailable, web.HTTPServiceUnavailable),
    (StorageError, web.HTTPServiceUnavailable, web.HTTPInternalServerError),
)


def fail(status: _Status, reason: str) -> web.HTTPException:
    """An HTTP error whose reason the ``json_errors`` middleware sends as ``{"reason": ...}``."""
    return status(reason=reason.replace("\r", " ").replace("\n", " "))


def http_error(exc: GatewayError) -> web.HTTPException:
    """The admin or REST answer to a domain error."""
    for cls, status, _ in _STATUS:
        if isinstance(exc, cls):
            return fail(status, str(exc))
    return fail(web.HTTPInternalServerError, str(exc))


def websocket_status(exc: GatewayError) -> _Status:
    """The status refusing a WebSocket upgrade for a domain error."""
    for cls, _, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return web.HTTPInternalServerError


def handler(body: Body) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A route handler running ``body``: domain errors become their status; None is a 204,
    a response is sent as it is (a peek's), anything else is a JSON body."""

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            result = await body(request.app[SERVICES], request)
        except GatewayError as exc:
            raise http_error(exc) from None
        if result is None:
            return web.Response(status=204)
        if isinstance(result, web.StreamResponse):
            return result
        return web.json_response(result)

    return handle


def namespace_name(request: web.Request) -> str:
    """``tenant/namespace`` of the path; 412 when invalid."""
    tenant, namespace = request.match_info["tenant"], request.match_info["namespace"]
    try:
        parse_topic_name(f"persistent://{tenant}/{namespace}/x")
    except InvalidTopicName:
        raise fail(web.HTTPPreconditionFailed, "Namespace name is not valid") from None
    return f"{tenant}/{namespace}"


def topic_name(request: web.Request, partitioned: bool = False) -> TopicName:
    """The topic the path names; 412 when invalid (Pulsar ``validateTopicName``) and, for
    partitioned-topic operations, when it is a partition name
    (``validatePartitionedTopicName``)."""
    info = request.match_info
    name = f"{info['domain']}://{info['tenant']}/{info['namespace']}/{info['topic']}"
    try:
        topic = parse_topic_name(name)
    except InvalidTopicName:
        raise fail(web.HTTPPreconditionFailed, "Topic name is not valid") from None
    if partitioned and PARTITION_SUFFIX in topic.local_name:
        raise fail(
            web.HTTPPreconditionFailed, "Partitioned Topic Name should not contain '-partition-'"
        )
    return topic


def flag(request: web.Request, name: str) -> bool:
    """A boolean query parameter (``?force=true``)."""
    return request.query.get(name, "false").lower() == "true"


async def read_text(request: web.Request) -> str:
    """The request body as text. A body that is not UTF-8 is a 400, as Jackson refuses it
    (``request.text()`` would raise out of the handler: a 500)."""
    raw = await request.read()
    try:
        return raw.decode(request.charset or "utf-8")
    except (UnicodeDecodeError, LookupError) as exc:
        raise fail(web.HTTPBadRequest, f"Invalid request body: not UTF-8 text ({exc})") from None


async def read_properties(request: web.Request) -> dict[str, str]:
    """A body of properties: a JSON object of strings (an empty body: none); 412 for any
    other value, 400 for a body that is not JSON."""
    body = await read_json(request)
    if body is None:
        return {}
    if not isinstance(body, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in body.items()
    ):
        raise fail(web.HTTPPreconditionFailed, "Invalid properties: expected a map of strings")
    return body


async def read_json(request: web.Request) -> Any:
    """The request body as JSON; None when empty; 400 when malformed (Jackson's answer)."""
    raw = await read_text(request)
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise fail(web.HTTPBadRequest, f"Invalid JSON: {exc}") from None
