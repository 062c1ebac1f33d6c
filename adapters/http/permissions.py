"""Admin REST v2: namespace permissions, with Pulsar's paths and JSON (``Namespaces.java``).

::

    GET    /admin/v2/namespaces/{tenant}/{ns}/permissions          getPermissions
    POST   /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}   grantPermissionOnNamespace
    DELETE /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}   revokePermissionsOnNamespace

GET answers ``{"role": ["consume", "produce"], ...}`` (``auth_policies.namespace_auth``);
POST takes the role's actions as a JSON list (``["produce", "consume"]``, a
``Set<AuthAction>``) and replaces what the role had; DELETE removes the role. Both answer
204 No Content. A body that is not a list of known actions is 400; an invalid namespace
name 412; a namespace that does not exist 404 (``getNamespacePoliciesAsync``). Who may call
them is the HTTP middleware's business (:mod:`adapters.http.auth`): tenant admins and
superusers, as ``NamespaceOperation.GRANT_PERMISSION`` / ``GET_PERMISSION`` /
``REVOKE_PERMISSION`` require.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from adapters.http.tenants import handler
from adapters.http.topics import _fail, _namespace
from gateway.authorization import parse_actions
from gateway.broker import Broker

__all__ = ["add_routes"]

_PATH = "/admin/v2/namespaces/{tenant}/{namespace}/permissions"


async def _existing_namespace(broker: Broker, request: web.Request) -> str:
    namespace = _namespace(request)
    await broker.tenants.require_namespace(namespace)
    return namespace


async def get_permissions(broker: Broker, request: web.Request) -> dict[str, list[str]]:
    return await broker.authorization.get_permissions(await _existing_namespace(broker, request))


async def grant_permission(broker: Broker, request: web.Request) -> None:
    namespace = await _existing_namespace(broker, request)
    raw = await request.text()
    try:
        body: Any = json.loads(raw)
        actions = parse_actions(body)
    except ValueError as exc:
        raise _fail(web.HTTPBadRequest, f"Invalid permissions {raw[:100]!r}: {exc}") from None
    await broker.authorization.grant_permission(namespace, request.match_info["role"], actions)


async def revoke_permission(broker: Broker, request: web.Request) -> None:
    namespace = await _existing_namespace(broker, request)
    await broker.authorization.revoke_permission(namespace, request.match_info["role"])


def add_routes(app: web.Application, broker_key: web.AppKey[Broker]) -> None:
    app.router.add_get(_PATH, handler(broker_key, get_permissions))
    app.router.add_post(_PATH + "/{role}", handler(broker_key, grant_permission))
    app.router.add_delete(_PATH + "/{role}", handler(broker_key, revoke_permission))
