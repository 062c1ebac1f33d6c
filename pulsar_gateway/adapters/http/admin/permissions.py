"""Admin REST v2: namespace, topic and subscription permissions, with Pulsar's paths and
JSON (``Namespaces.java``, ``PersistentTopics.java``).

::

    GET    /admin/v2/namespaces/{tenant}/{ns}/permissions          getPermissions
    POST   /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}   grantPermissionOnNamespace
    DELETE /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}   revokePermissionsOnNamespace
    GET    /admin/v2/namespaces/{tenant}/{ns}/permissions/subscription
                                                    getPermissionOnSubscription
    POST   /admin/v2/namespaces/{tenant}/{ns}/permissions/subscription/{subscription}
                                                    grantPermissionOnSubscription
    DELETE /admin/v2/namespaces/{tenant}/{ns}/permissions/{subscription}/{role}
                                                    revokePermissionOnSubscription
    GET    /admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions          getPermissionsOnTopic
    POST   /admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions/{role}   grantPermissionsOnTopic
    DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions/{role}   revokePermissionsOnTopic

A topic's GET answers the namespace's grants with the topic's own added, as Pulsar does; a
partitioned topic's grant covers its partitions.

Subscription permissions (Pulsar's ``auth_policies.subscription_auth_roles``): POST takes
the roles allowed to consume the subscription, a JSON list of strings (``Set<String>``), and
replaces its earlier list; GET answers ``{"subscription": ["role", ...]}``; DELETE removes
one role (the subscription stays listed, with no roles: it then restricts nothing, as in
Pulsar), 404 "couldn't find subscription" when it has no roles listed (Pulsar fails that
request with a 500). The revoke path is Pulsar's, the one its admin client sends
(``NamespacesImpl.revokePermissionOnSubscriptionAsync``); ``DELETE
.../permissions/subscription/{subscription}/{role}``, beside the grant's path, does the
same. Enforcement: :mod:`pulsar_gateway.core.policies.authorization`.

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

from pulsar_gateway.adapters.http.described import TOPIC, Doc
from pulsar_gateway.adapters.resource import fail, handler, namespace_name, read_text, topic_name
from pulsar_gateway.core import Services, TopicName, parse_actions

__all__ = ["DOCS", "add_routes"]

_TOPIC_PATH = (
    "/admin/v2/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}/permissions"
)

_PATH = "/admin/v2/namespaces/{tenant}/{namespace}/permissions"


async def _existing_namespace(services: Services, request: web.Request) -> str:
    namespace = namespace_name(request)
    await services.tenants.require_namespace(namespace)
    return namespace


async def get_permissions(services: Services, request: web.Request) -> dict[str, list[str]]:
    return await services.authorization.get_permissions(
        await _existing_namespace(services, request)
    )


async def _actions(request: web.Request) -> list[str]:
    raw = await read_text(request)
    try:
        body: Any = json.loads(raw)
        return parse_actions(body)
    except ValueError as exc:
        raise fail(web.HTTPBadRequest, f"Invalid permissions {raw[:100]!r}: {exc}") from None


async def grant_permission(services: Services, request: web.Request) -> None:
    namespace = await _existing_namespace(services, request)
    actions = await _actions(request)
    await services.authorization.grant_permission(namespace, request.match_info["role"], actions)


async def _existing_topic(services: Services, request: web.Request) -> TopicName:
    topic = topic_name(request)
    await services.tenants.require_namespace(topic.namespace)
    return topic


async def get_topic_permissions(services: Services, request: web.Request) -> dict[str, list[str]]:
    topic = await _existing_topic(services, request)
    return await services.authorization.get_topic_permissions(topic)


async def grant_topic_permission(services: Services, request: web.Request) -> None:
    topic = await _existing_topic(services, request)
    actions = await _actions(request)
    await services.authorization.grant_topic_permission(topic, request.match_info["role"], actions)


async def revoke_topic_permission(services: Services, request: web.Request) -> None:
    topic = await _existing_topic(services, request)
    await services.authorization.revoke_topic_permission(topic, request.match_info["role"])


_GRANTS = {
    "type": "object",
    "additionalProperties": {"type": "array", "items": {"type": "string"}},
}

_NS_DOC = "/admin/v2/namespaces/{tenant}/{namespace}/permissions"

#: OpenAPI descriptions of the topic and subscription routes (``openapi.py``; the namespace
#: ones are there).
DOCS: dict[tuple[str, str], Doc] = {
    ("GET", f"{_NS_DOC}/subscription"): Doc(
        "namespaces", "The roles allowed per subscription", response=_GRANTS
    ),
    ("POST", f"{_NS_DOC}/subscription/{{subscription}}"): Doc(
        "namespaces",
        "Allow only these roles to consume a subscription",
        body={"type": "array", "items": {"type": "string"}},
        ok=204,
    ),
    ("DELETE", f"{_NS_DOC}/{{subscription}}/{{role}}"): Doc(
        "namespaces", "Remove a role from a subscription's roles", ok=204
    ),
    ("DELETE", f"{_NS_DOC}/subscription/{{subscription}}/{{role}}"): Doc(
        "namespaces", "Remove a role from a subscription's roles (as the path above)", ok=204
    ),
    ("GET", f"{TOPIC}/permissions"): Doc(
        "permissions", "The grants on a topic: its namespace's and its own", response=_GRANTS
    ),
    ("POST", f"{TOPIC}/permissions/{{role}}"): Doc(
        "permissions",
        "Grant a role actions on a topic",
        body={"type": "array", "items": {"type": "string"}},
        ok=204,
    ),
    ("DELETE", f"{TOPIC}/permissions/{{role}}"): Doc(
        "permissions", "Revoke a role's grant on a topic", ok=204
    ),
}


async def revoke_permission(services: Services, request: web.Request) -> None:
    namespace = await _existing_namespace(services, request)
    await services.authorization.revoke_permission(namespace, request.match_info["role"])


async def get_subscription_permissions(
    services: Services, request: web.Request
) -> dict[str, list[str]]:
    namespace = await _existing_namespace(services, request)
    return await services.authorization.get_subscription_permissions(namespace)


async def _roles(request: web.Request) -> list[str]:
    raw = await read_text(request)
    try:
        body: Any = json.loads(raw)
    except ValueError:
        body = None
    if not isinstance(body, list) or not all(isinstance(role, str) for role in body):
        raise fail(
            web.HTTPBadRequest,
            f'Invalid roles {raw[:100]!r}: expected a JSON list of roles, e.g. ["app"]',
        )
    return body


async def grant_subscription_permission(services: Services, request: web.Request) -> None:
    namespace = await _existing_namespace(services, request)
    roles = await _roles(request)
    await services.authorization.grant_subscription_permission(
        namespace, request.match_info["subscription"], roles
    )


async def revoke_subscription_permission(services: Services, request: web.Request) -> None:
    namespace = await _existing_namespace(services, request)
    await services.authorization.revoke_subscription_permission(
        namespace, request.match_info["subscription"], request.match_info["role"]
    )


def add_routes(app: web.Application) -> None:
    app.router.add_get(_PATH, handler(get_permissions))
    app.router.add_post(_PATH + "/{role}", handler(grant_permission))
    app.router.add_delete(_PATH + "/{role}", handler(revoke_permission))
    app.router.add_get(_PATH + "/subscription", handler(get_subscription_permissions))
    app.router.add_post(
        _PATH + "/subscription/{subscription}", handler(grant_subscription_permission)
    )
    app.router.add_delete(_PATH + "/{subscription}/{role}", handler(revoke_subscription_permission))
    app.router.add_delete(
        _PATH + "/subscription/{subscription}/{role}", handler(revoke_subscription_permission)
    )
    app.router.add_get(_TOPIC_PATH, handler(get_topic_permissions))
    app.router.add_post(_TOPIC_PATH + "/{role}", handler(grant_topic_permission))
    app.router.add_delete(_TOPIC_PATH + "/{role}", handler(revoke_topic_permission))
