"""Admin REST v2: backlog quotas of namespaces and topics, with Pulsar's paths and JSON.

Paths (``Namespaces.java``; ``PersistentTopics.java`` for topics, ``{domain}`` is
``persistent`` or ``non-persistent``)::

    GET    /admin/v2/namespaces/{tenant}/{ns}/backlogQuotaMap
    POST   /admin/v2/namespaces/{tenant}/{ns}/backlogQuota?backlogQuotaType=
    DELETE /admin/v2/namespaces/{tenant}/{ns}/backlogQuota?backlogQuotaType=
    GET    /admin/v2/{domain}/{tenant}/{ns}/{topic}/backlogQuotaMap?applied=
    POST   /admin/v2/{domain}/{tenant}/{ns}/{topic}/backlogQuota?backlogQuotaType=
    DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/backlogQuota?backlogQuotaType=

The map is Pulsar's ``backlog_quota_map``: ``{"destination_storage": {"limit": n, "limitSize": n,
"limitTime": n, "policy": "producer_request_hold"}}`` (see
:mod:`pulsar_gateway.core.policies.backlog_quota`); ``backlogQuotaType`` defaults to
``destination_storage``.

Statuses: 204 for a change; 404 "Namespace does not exist"; 412 for an invalid name and for a quota
at or above the retention limits ("Backlog Quota exceeds configured retention quota ..."); 400 for a
body Jackson could not read (wrong types, unknown ``policy``) and for an unknown
``backlogQuotaType``. (JAX-RS answers an unconvertible query parameter with 404; here 404 always
means something is missing, so a bad parameter is a 400.) A topic-level quota may be set before the
topic exists, like the other topic policies here
(:mod:`pulsar_gateway.adapters.http.admin.policies`).
With ``applied=true`` the topic-level GET answers the quotas that apply: the topic's if it has any,
else its namespace's.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pulsar_gateway.adapters.resource import Body, fail, flag, handler, read_json, topic_name
from pulsar_gateway.core import (
    Services,
    check_namespace_name,
    exceeds_retention,
    parse_backlog_quota,
    parse_quota_type,
)

__all__ = ["add_routes"]

_TOPIC = "/admin/v2/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}"
_NAMESPACE = "/admin/v2/namespaces/{tenant}/{namespace}"


async def _scope(services: Services, request: web.Request, topic_level: bool) -> str:
    """The namespace or topic the path names: 412 when invalid, 404 for a namespace that
    does not exist (``internalSetBacklogQuota``: "Namespace does not exist")."""
    if topic_level:
        return str(topic_name(request))
    namespace = f"{request.match_info['tenant']}/{request.match_info['namespace']}"
    check_namespace_name(namespace)
    if not await services.tenants.namespace_exists(namespace):
        raise fail(web.HTTPNotFound, "Namespace does not exist")
    return namespace


def _quota_type(request: web.Request) -> str:
    try:
        return parse_quota_type(request.query.get("backlogQuotaType"))
    except ValueError as exc:
        raise fail(web.HTTPBadRequest, str(exc)) from None


def _get_map(topic_level: bool) -> Body:
    async def get_map(services: Services, request: web.Request) -> dict[str, Any]:
        scope = await _scope(services, request, topic_level)
        quotas = await services.backlog_quotas.quota_map(scope, topic_level)
        if not quotas and topic_level and flag(request, "applied"):
            namespace = topic_name(request).namespace
            quotas = await services.backlog_quotas.quota_map(namespace, topic_level=False)
        return quotas

    return get_map


def _set(topic_level: bool) -> Body:
    async def set_quota(services: Services, request: web.Request) -> None:
        scope = await _scope(services, request, topic_level)
        quota_type = _quota_type(request)
        value = await read_json(request)
        if value is None:
            raise fail(web.HTTPBadRequest, "BacklogQuota is required")
        try:
            quota = parse_backlog_quota(value)
        except ValueError as exc:
            raise fail(web.HTTPBadRequest, f"Invalid BacklogQuota: {exc}") from None
        service = services.backlog_quotas
        if exceeds_retention(quota, await service.retention(scope, topic_level)):
            level = "topic" if topic_level else "namespace"
            raise fail(
                web.HTTPPreconditionFailed,
                f"Backlog Quota exceeds configured retention quota for {level}. "
                "Please increase retention quota and retry",
            )
        await service.change(scope, topic_level, quota_type, quota)

    return set_quota


def _remove(topic_level: bool) -> Body:
    async def remove_quota(services: Services, request: web.Request) -> None:
        scope = await _scope(services, request, topic_level)
        await services.backlog_quotas.change(scope, topic_level, _quota_type(request), None)

    return remove_quota


def add_routes(app: web.Application) -> None:
    """Register the namespace- and topic-level backlog quota routes."""
    for base, topic_level in ((_NAMESPACE, False), (_TOPIC, True)):
        app.router.add_get(f"{base}/backlogQuotaMap", handler(_get_map(topic_level)))
        app.router.add_post(f"{base}/backlogQuota", handler(_set(topic_level)))
        app.router.add_delete(f"{base}/backlogQuota", handler(_remove(topic_level)))
