"""Admin REST v2: unloading a topic, a namespace or a namespace bundle.

``PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}/unload`` (``PersistentTopics.
unloadTopic``; a partitioned topic's unload covers its partitions), ``PUT /admin/v2/
namespaces/{tenant}/{namespace}/unload`` (``Namespaces.unloadNamespace``) and ``PUT .../
{bundle}/unload`` (``Namespaces.unloadNamespaceBundle``; a namespace here has the one bundle
covering the whole hash range). Every gateway of the fleet closes its clients of what was
unloaded (``core/admin/unload.py``); they reconnect and carry on. Answers 204, or 404 for a
topic, namespace or bundle that does not exist.
"""

from __future__ import annotations

from aiohttp import web

from pulsar_gateway.adapters.http.admin.tenants import FULL_BUNDLE
from pulsar_gateway.adapters.http.described import TOPIC, Doc
from pulsar_gateway.adapters.resource import (
    Body,
    fail,
    handler,
    namespace_name,
    topic_name,
)
from pulsar_gateway.core import Services

__all__ = ["DOCS", "add_routes"]

_NS = "/admin/v2/namespaces/{tenant}/{namespace}"
_DOMAIN = "{domain:persistent|non-persistent}"


async def unload_topic(services: Services, request: web.Request) -> None:
    topic = topic_name(request)
    # a non-persistent topic exists while it is used: there is nothing to look up
    persistent = topic.domain == "persistent"
    partitioned = await services.topics.partitions(topic) > 0
    if persistent and not partitioned and not await services.topics.exists(topic):
        raise fail(web.HTTPNotFound, f"Topic {topic} not found")
    await services.unloads.unload(str(topic))


async def unload_namespace(services: Services, request: web.Request) -> None:
    namespace = namespace_name(request)
    await services.tenants.require_namespace(namespace)
    await services.unloads.unload(namespace)


async def unload_bundle(services: Services, request: web.Request) -> None:
    namespace = namespace_name(request)
    await services.tenants.require_namespace(namespace)
    bundle = request.match_info["bundle"]
    if bundle != FULL_BUNDLE:
        # one bundle per namespace, spanning the whole hash range (lookup answers it too)
        raise fail(web.HTTPNotFound, f"Bundle {namespace}/{bundle} not found")
    await services.unloads.unload(namespace)


_ROUTES: tuple[tuple[str, str, Body], ...] = (
    ("PUT", f"/admin/v2/{_DOMAIN}/{{tenant}}/{{namespace}}/{{topic}}/unload", unload_topic),
    ("PUT", f"{_NS}/unload", unload_namespace),
    ("PUT", f"{_NS}/{{bundle:0x[0-9a-fA-F]{{8}}_0x[0-9a-fA-F]{{8}}}}/unload", unload_bundle),
)

_TAG = "topics"

#: OpenAPI descriptions of these routes (``openapi.py``).
DOCS: dict[tuple[str, str], Doc] = {
    ("PUT", f"{TOPIC}/unload"): Doc(
        _TAG, "Unload a topic: every gateway closes its producers and consumers", ok=204
    ),
    ("PUT", f"{_NS}/unload"): Doc(_TAG, "Unload every topic of a namespace", ok=204),
    ("PUT", f"{_NS}/{{bundle}}/unload"): Doc(
        _TAG, "Unload a namespace bundle (the whole namespace)", ok=204
    ),
}


def add_routes(app: web.Application) -> None:
    for method, path, body in _ROUTES:
        app.router.add_route(method, path, handler(body))
