"""Authentication (token, client certificate or user and password) and authorization for
the whole HTTP front, as one middleware.

Theory of operation. Pulsar authenticates HTTP requests in a servlet filter that runs before
any resource (``AuthenticationFilter``; for WebSocket, ``AbstractWebSocketHandler.checkAuth``
before the upgrade), then each resource checks the role. Here one aiohttp middleware does
both before the route handler runs, so a WebSocket handshake that fails is answered with a
plain HTTP status and never upgraded, and no route has to remember a check.

What a request needs is decided from its path alone, by :func:`requirement` (pure, tested
as data), so the rules sit in one table-like function rather than next to each route:

=========================================================  =================================
path                                                       needs
=========================================================  =================================
``/metrics``, ``/admin/v2/brokers/health``                 nothing; a valid token with
                                                           ``authenticate_metrics_endpoint``
``/``, ``/console/...`` (the web console's files)          nothing: the page holds no data
``/ws/v2/producer/{domain}/{tenant}/{ns}/{topic}``         produce on the namespace
``/ws/v2/consumer/.../{topic}/{subscription}``,            consume on the namespace (a
``/ws/v2/reader/...``                                      consumer: through its
                                                           subscription)
``/ws/v3/consumer/{subscription}?topics=a,b``              consume on every listed topic's
(or ``?topicsPattern=``)                                   (or the pattern's) namespace,
                                                           through the subscription
``/topics/{domain}/{tenant}/{ns}/{topic}[/partitions/i]``  produce (REST produce)
``/lookup/v2/topic/{domain}/{tenant}/{ns}/{topic}``        produce or consume
(and v1 ``/lookup/v2/destination/...``)
``/admin/v2/openapi.json``                                 a valid token
``/admin/v2/{namespaces|persistent|non-persistent|         tenant admin of ``{tenant}``
schemas}/{tenant}/...``
anything else (``/admin/v2/tenants``, ``clusters``,        superuser
``brokers``, unknown paths)
=========================================================  =================================

The middleware is installed only when authentication is on: with it off, requests take the
same path as before. The role goes on the request as ``request[ROLE]`` (a
``web.RequestKey`` named ``"role"``).

Statuses and reasons are Pulsar's: 401 ``Authentication required`` (``AuthenticationFilter``)
or, for WebSocket, 401 ``Failed to authenticate`` and 403 ``Not authorized``
(``checkAuth``); admin refusals are 403 with ``Don't have permission to administrate
resources on this tenant`` or ``This operation requires super-user access``. A WebSocket
consumer whose subscription the namespace's ``subscriptionAuthMode`` Prefix refuses is a
403 with Pulsar's reason ("Failed to create consumer - The subscription name needs to be
prefixed by the authentication role, ..."), where Pulsar's ``checkAuth`` catches the
exception and answers 500 "Server error". (Pulsar's
admin code answers those with 401, while its API documents 403; the Java and Python admin
clients raise the same ``NotAuthorizedException`` for both, and 403 keeps "who are you"
apart from "you may not".) A WebSocket client that cannot set headers (a browser) passes the
token as the ``token`` query parameter, with or without ``Bearer`` (Pulsar's
``WebSocketHttpServletRequestWrapper``).

Which provider authenticates a request is the core's ``AuthenticationService`` rule, fed
here with the ``Authorization`` header (``Bearer`` token or ``Basic`` user and password),
the ``X-Pulsar-Auth-Method-Name`` header (the Java client names its method there) and the
connection's verified client certificate; with ``anonymousUserRole`` configured a request
no provider accepts is served as that role and authorization decides, as Pulsar's
``AuthenticationService.authenticateHttpRequest`` does.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from aiohttp import web

from pulsar_gateway.adapters.http import console
from pulsar_gateway.adapters.http.admin import permissions
from pulsar_gateway.adapters.peer_certificate import certificate_role
from pulsar_gateway.adapters.resource import SERVICES, fail, http_error
from pulsar_gateway.core import (
    AuthAction,
    AuthenticationError,
    AuthorizationError,
    GatewayError,
    InvalidTopicName,
    Services,
    TopicName,
    parse_topic_name,
)

__all__ = ["ROLE", "Access", "Requirement", "add_routes", "requirement"]

#: Where the authenticated role is kept on the request (``request[ROLE]``).
ROLE = web.RequestKey("role", str)
#: The header naming the client's authentication method (``AuthenticationFilter``).
AUTH_METHOD_HEADER = "X-Pulsar-Auth-Method-Name"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_DOMAINS = ("persistent", "non-persistent")
#: Admin resources whose path continues with ``{tenant}``: tenant admins manage them.
_TENANT_RESOURCES = ("namespaces", "persistent", "non-persistent", "schemas")
_OPEN_PATHS = ("/metrics", "/admin/v2/brokers/health")
#: Paths any authenticated role may read (the API description).
_AUTHENTICATED_PATHS = ("/admin/v2/openapi.json",)


class Access(enum.Enum):
    """What a request needs, loosest first."""

    OPEN = "open"
    AUTHENTICATED = "authenticated"
    PRODUCE = "produce"
    CONSUME = "consume"
    LOOKUP = "lookup"
    TENANT_ADMIN = "tenant admin"
    SUPERUSER = "superuser"


@dataclass(frozen=True, slots=True)
class Requirement:
    """The outcome of :func:`requirement`.

    Attributes:
        access: What the role must be allowed.
        namespaces: ``(tenant, "tenant/ns")`` pairs the role needs ``access`` on (produce,
            consume, lookup), or the tenant (``TENANT_ADMIN``: one pair, namespace "").
        websocket: A WebSocket handshake (Pulsar's WebSocket reasons; ``token`` query).
        topics: The topic of each namespace pair when the request names one: a grant on the
            topic itself then suffices (Pulsar's topic-level permissions).
        subscription: A WebSocket consumer's subscription, which the namespace's
            subscription roles and ``subscriptionAuthMode`` must allow (``canConsumeAsync``).
    """

    access: Access
    namespaces: tuple[tuple[str, str], ...] = ()
    websocket: bool = False
    topics: tuple[str | None, ...] = ()
    subscription: str | None = None


_SUPERUSER = Requirement(Access.SUPERUSER)


def _namespace_of(domain: str, tenant: str, namespace: str) -> tuple[str, str] | None:
    if domain not in _DOMAINS or not tenant or not namespace:
        return None
    return tenant, f"{tenant}/{namespace}"


def _topic_of(segments: list[str], start: int) -> str | None:
    """The full topic name at ``segments[start:start + 4]`` (domain, tenant, namespace,
    topic), None when it is not one."""
    parts = segments[start : start + 4]
    if len(parts) < 4 or not all(parts):
        return None
    return f"{parts[0]}://{parts[1]}/{parts[2]}/{parts[3]}"


def _topic_namespace(name: str) -> tuple[str, str] | None:
    """The (tenant, namespace) of a topic name as the ``topics`` query gives it."""
    try:
        topic = parse_topic_name(name)
    except InvalidTopicName:
        return None
    return topic.tenant, topic.namespace


def _pattern_namespace(pattern: str) -> tuple[str, str] | None:
    """The namespace a ``topicsPattern`` covers: a regex only in its local part, as Pulsar's
    ``TopicName.get(topicsPattern)`` assumes (short patterns are in public/default)."""
    _, sep, rest = pattern.partition("://")
    if not sep:
        rest = pattern
    parts = rest.split("/")
    if len(parts) == 1:
        return "public", "public/default"
    if len(parts) == 3 and parts[0] and parts[1]:
        return parts[0], f"{parts[0]}/{parts[1]}"
    return None


def _websocket(segments: list[str], query: Mapping[str, str]) -> Requirement:
    version, kind = segments[1:3] if len(segments) >= 3 else ("", "")
    if version == "v2" and kind in ("producer", "consumer", "reader"):
        # /ws/v2/{kind}/{domain}/{tenant}/{ns}/{topic...}[/{subscription}]
        least = 8 if kind == "consumer" else 7
        if len(segments) >= least:
            pair = _namespace_of(segments[3], segments[4], segments[5])
            if pair is not None:
                access = Access.PRODUCE if kind == "producer" else Access.CONSUME
                topic = _topic_of(segments, 3)
                # A consumer's subscription is its last segment; a reader's is the gateway's.
                subscription = segments[-1] if kind == "consumer" else None
                return Requirement(
                    access, (pair,), websocket=True, topics=(topic,), subscription=subscription
                )
    elif version == "v3" and kind == "consumer" and len(segments) == 4:
        pairs: list[tuple[str, str] | None] = []
        if "topicsPattern" in query:
            pairs.append(_pattern_namespace(query["topicsPattern"]))
        if "topics" in query:
            pairs.extend(_topic_namespace(t) for t in query["topics"].split(",") if t)
        if pairs and None not in pairs:
            found = tuple(dict.fromkeys(p for p in pairs if p is not None))
            return Requirement(Access.CONSUME, found, websocket=True, subscription=segments[3])
    return Requirement(Access.SUPERUSER, websocket=True)


def requirement(
    raw_path: str, query: Mapping[str, str], *, authenticate_metrics: bool = False
) -> Requirement:
    """What a request for ``raw_path`` needs (see the table in the module docstring).

    Args:
        raw_path: The path as sent, still percent-encoded: each segment is decoded on its
            own, as the router matches ``{tenant}`` and friends.
        query: The decoded query parameters (the WebSocket v3 topics).
        authenticate_metrics: Pulsar's ``authenticateMetricsEndpoint``.

    Returns:
        The requirement; a path this function does not know needs a superuser.
    """
    path = raw_path.rstrip("/") or "/"
    if console.is_console_path(path):
        return Requirement(Access.OPEN)
    if path in _OPEN_PATHS:
        return Requirement(Access.AUTHENTICATED if authenticate_metrics else Access.OPEN)
    if path in _AUTHENTICATED_PATHS:
        return Requirement(Access.AUTHENTICATED)
    segments = [unquote(part) for part in path.split("/")[1:]]
    head = segments[0]
    if head == "ws":
        return _websocket(segments, query)
    pair: tuple[str, str] | None = None
    topic: str | None = None
    if head == "topics" and len(segments) >= 5:
        pair = _namespace_of(segments[1], segments[2], segments[3])
        topic = _topic_of(segments, 1)
        access = Access.PRODUCE
    elif head == "lookup" and segments[1:3] == ["v2", "topic"] and len(segments) >= 7:
        pair = _namespace_of(segments[3], segments[4], segments[5])
        topic = _topic_of(segments, 3)
        access = Access.LOOKUP
    elif head == "lookup" and segments[1:3] == ["v2", "destination"] and len(segments) >= 8:
        # v1 names: {domain}/{tenant}/{cluster}/{namespace}/{topic}
        pair = _namespace_of(segments[3], segments[4], f"{segments[5]}/{segments[6]}")
        access = Access.LOOKUP
    elif segments[:2] == ["admin", "v2"] and len(segments) >= 4 and segments[3]:
        pair = (segments[3], "") if segments[2] in _TENANT_RESOURCES else None
        access = Access.TENANT_ADMIN
    if pair is not None:
        return Requirement(access, (pair,), topics=(topic,) if topic else ())
    return _SUPERUSER


# -- the middleware ------------------------------------------------------------------------


_REFUSALS: Mapping[Access, str] = {
    Access.PRODUCE: "Client is not authorized to Produce",
    Access.CONSUME: "Client is not authorized to Consume",
    Access.LOOKUP: "Client is not authorized to Lookup",
    Access.TENANT_ADMIN: "Don't have permission to administrate resources on this tenant",
    Access.SUPERUSER: "This operation requires super-user access",
}

_ACTIONS: Mapping[Access, tuple[str, ...]] = {
    Access.PRODUCE: (AuthAction.PRODUCE,),
    Access.CONSUME: (AuthAction.CONSUME,),
    Access.LOOKUP: (AuthAction.PRODUCE, AuthAction.CONSUME),
}


async def _allowed(services: Services, need: Requirement, role: str) -> bool:
    authz = services.authorization
    if need.access is Access.SUPERUSER:
        return authz.can_administer_cluster(role)
    if need.access is Access.TENANT_ADMIN:
        return await authz.can_administer(need.namespaces[0][0], role)
    actions = _ACTIONS.get(need.access)
    if actions is None:  # OPEN, AUTHENTICATED
        return True
    topics = need.topics or (None,) * len(need.namespaces)
    for (tenant, namespace), name in zip(need.namespaces, topics, strict=True):
        topic = _parsed(name)
        if not await authz.allows(
            tenant, namespace, role, *actions, topic=topic, subscription=need.subscription
        ):
            return False
    return True


def _parsed(name: str | None) -> TopicName | None:
    if name is None:
        return None
    try:
        return parse_topic_name(name)
    except InvalidTopicName:
        return None


def _credentials(request: web.Request, websocket: bool) -> str | None:
    header = request.headers.get("Authorization")
    if header is None and websocket:
        token = request.query.get("token")
        if token is not None and not token.startswith("Bearer "):
            return "Bearer " + token
        return token
    return header


def _middleware() -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        services = request.app[SERVICES]
        need = requirement(
            request.raw_path.partition("?")[0],
            request.query,
            authenticate_metrics=services.limits.authenticate_metrics_endpoint,
        )
        if need.access is Access.OPEN:
            return await handler(request)
        transport = request.transport
        peercert = transport.get_extra_info("peercert") if transport is not None else None
        try:
            authenticated = services.authentication.authenticate_http(
                _credentials(request, need.websocket),
                certificate_role(peercert),
                request.headers.get(AUTH_METHOD_HEADER),
            )
        except AuthenticationError:
            # AuthenticationFilter.doFilter and AbstractWebSocketHandler.checkAuth
            reason = "Failed to authenticate" if need.websocket else "Authentication required"
            raise fail(web.HTTPUnauthorized, reason) from None
        request[ROLE] = authenticated.role
        authz = services.authorization
        if authz.enabled:
            try:
                allowed = await _allowed(services, need, authenticated.role)
            except AuthorizationError as exc:
                raise fail(web.HTTPForbidden, str(exc)) from None
            except GatewayError as failure:
                raise http_error(failure) from None
            if not allowed:
                reason = "Not authorized" if need.websocket else _REFUSALS[need.access]
                raise fail(web.HTTPForbidden, reason)
        return await handler(request)

    return authenticate


def add_routes(app: web.Application) -> None:
    """Register the namespace-permission routes and, when authentication is on, the
    middleware (after the app's own, so its errors get the JSON ``reason`` body)."""
    permissions.add_routes(app)
    if app[SERVICES].authentication.enabled:
        app.middlewares.append(_middleware())
