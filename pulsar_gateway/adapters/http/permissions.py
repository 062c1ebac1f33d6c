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
them is the HTTP middleware's business (:mod:`pulsar_gateway.adapters.http.auth`): tenant admins and
superusers, as ``NamespaceOperation.GRANT_PERMISSION`` / ``GET_PERMISSION`` /
``REVOKE_PERMISSION`` require.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from pulsar_gateway.adapters.resource import fail, handler, namespace_name, read_text
from pulsar_gateway.core import Services, parse_actions

__all__ = ["add_routes"]

_PATH = "/admin/v2/namespaces/{tenant}/{namespace}/permissions"


async def _existing_namespace(services: Services, request: web.Request) -> str:
    namespace = namespace_name(request)
    await services.tenants.require_namespace(namespace)
    return namespace


async def get_permissions(services: Services, request: web.Request) -> dict[str, list[str]]:
    return await services.authorization.get_permissions(
        await _existing_namespace(services, request)
    )


async def grant_permission(services: Services, request: web.Request) -> None:
    namespace = await _existing_namespace(services, request)
    raw = await read_text(request)
    try:
        body: Any = json.loads(raw)
        actions = parse_actions(body)
    except ValueError as exc:
        raise fail(web.HTTPBadRequest, f"Invalid permissions {raw[:100]!r}: {exc}") from None
    await services.authorization.grant_permission(namespace, request.match_info["role"], actions)


async def revoke_permission(services: Services, request: web.Request) -> None:
    namespace = await _existing_namespace(services, request)
    await services.authorization.revoke_permission(namespace, request.match_info["role"])


def add_routes(app: web.Application) -> None:
    app.router.add_get(_PATH, handler(get_permissions))
    app.router.add_post(_PATH + "/{role}", handler(grant_permission))
    app.router.add_delete(_PATH + "/{role}", handler(revoke_permission))
