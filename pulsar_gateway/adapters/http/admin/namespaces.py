"""Admin REST v2: operations over a whole namespace (``Namespaces.java``,
``NamespacesBase``): its topics, clearing backlogs and unsubscribing across them, its
bundles, its properties, and the namespaces of an anti-affinity group.

A namespace here has one bundle covering the whole hash range (``0x00000000_0xffffffff``):
every gateway serves every namespace, so there is nothing to split or to place. Bundle
operations answer for that bundle (404 for any other); splitting it answers 501.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Any

from aiohttp import web

from pulsar_gateway.adapters.http.admin.policies import NAMESPACE_PATH
from pulsar_gateway.adapters.http.admin.tenants import FULL_BUNDLE
from pulsar_gateway.adapters.http.described import STR, STR_MAP, Doc, obj
from pulsar_gateway.adapters.resource import (
    Body,
    fail,
    handler,
    namespace_name,
    read_properties,
)
from pulsar_gateway.core import (
    Services,
    SubscriptionNotFound,
    TopicNotFound,
    parse_topic_name,
)

__all__ = ["DOCS", "add_routes"]

_NS = NAMESPACE_PATH
#: a bundle's range (``0x00000000_0xffffffff``): the pattern keeps ``DELETE .../{bundle}``
#: from taking the namespace's other ``DELETE .../<policy>`` paths
_BUNDLE_RANGE = "{bundle:0x[0-9a-fA-F]{8}_0x[0-9a-fA-F]{8}}"
_BUNDLE = f"{_NS}/{_BUNDLE_RANGE}"
_BUNDLE_DOC = f"{_NS}/{{bundle}}"

#: The stored name of a namespace's properties (a JSON object of strings).
PROPERTIES_POLICY = "properties"
#: The stored name of a namespace's anti-affinity group (``policies.py``).
ANTI_AFFINITY_POLICY = "antiAffinityGroup"


async def _existing(services: Services, request: web.Request) -> str:
    namespace = namespace_name(request)
    await services.tenants.require_namespace(namespace)
    if "bundle" in request.match_info and request.match_info["bundle"] != FULL_BUNDLE:
        raise fail(web.HTTPNotFound, f"Bundle {namespace}/{request.match_info['bundle']} not found")
    return namespace


# -- topics -----------------------------------------------------------------------------------


async def get_topics(services: Services, request: web.Request) -> list[str]:
    """``GET .../topics?mode=PERSISTENT|NON_PERSISTENT|ALL`` (Pulsar's default
    PERSISTENT): every topic and partition of the namespace."""
    namespace = await _existing(services, request)
    mode = request.query.get("mode", "PERSISTENT").upper()
    domains = {"PERSISTENT": ("persistent",), "NON_PERSISTENT": ("non-persistent",)}.get(
        mode, ("persistent", "non-persistent") if mode == "ALL" else None
    )
    if domains is None:
        raise fail(web.HTTPBadRequest, f"Invalid mode {mode!r}: PERSISTENT, NON_PERSISTENT or ALL")
    found = await asyncio.gather(*(services.topics.topics(namespace, d) for d in domains))
    return sorted({topic for topics in found for topic in topics})


async def _persistent_topics(services: Services, namespace: str) -> list[str]:
    return await services.topics.topics(namespace, "persistent")


async def clear_backlog(services: Services, request: web.Request) -> None:
    """Clear the backlog of every subscription on every topic of the namespace, or of one
    subscription wherever it exists (``clearNamespaceBacklog[ForSubscription]``)."""
    namespace = await _existing(services, request)
    only = request.match_info.get("subscription")
    admin = services.subscription_admin
    for name in await _persistent_topics(services, namespace):
        topic = parse_topic_name(name)
        try:
            subscriptions = await admin.subscriptions(topic)
            for subscription in subscriptions:
                if only is None or subscription == only:
                    await admin.clear_backlog(topic, subscription)
        except (TopicNotFound, SubscriptionNotFound):
            continue  # deleted meanwhile


async def unsubscribe(services: Services, request: web.Request) -> None:
    """Delete one subscription on every topic of the namespace that has it
    (``unsubscribeNamespace``); 412 while it has connected consumers somewhere."""
    namespace = await _existing(services, request)
    subscription = request.match_info["subscription"]
    admin = services.subscription_admin
    names = await _persistent_topics(services, namespace)
    # a partitioned topic is deleted from as a whole (its partitions are listed)
    for name in sorted({str(parse_topic_name(n).partitioned_topic_name) for n in names}):
        topic = parse_topic_name(name)
        try:
            if subscription in await admin.subscriptions(topic):
                await admin.delete(topic, subscription, force=False)
        except (TopicNotFound, SubscriptionNotFound):
            continue  # deleted meanwhile


# -- bundles ----------------------------------------------------------------------------------


async def get_bundles(services: Services, request: web.Request) -> dict[str, Any]:
    """``BundlesData``: the one bundle."""
    await _existing(services, request)
    return {"boundaries": FULL_BUNDLE.split("_"), "numBundles": 1}


async def topic_hash_positions(services: Services, request: web.Request) -> dict[str, Any]:
    """Where each topic of the bundle falls in its hash range: Pulsar's
    ``NamespaceBundleFactory.getLongHashCode``, the CRC-32 of the topic name
    (``Hashing.crc32()``), so the positions are the ones a Pulsar broker would answer."""
    namespace = await _existing(services, request)
    wanted = request.query.getall("topics", [])
    topics = await get_topics_all(services, namespace)
    if wanted:
        topics = [t for t in topics if t in wanted or t.rsplit("/", 1)[-1] in wanted]
    return {
        "namespace": namespace,
        "bundle": FULL_BUNDLE,
        "topicHashPositions": {t: zlib.crc32(t.encode()) for t in topics},
    }


async def get_topics_all(services: Services, namespace: str) -> list[str]:
    found = await asyncio.gather(
        *(services.topics.topics(namespace, d) for d in ("persistent", "non-persistent"))
    )
    return sorted({topic for topics in found for topic in topics})


async def split_bundle(services: Services, request: web.Request) -> None:
    await _existing(services, request)
    raise fail(
        web.HTTPNotImplemented,
        "Splitting bundles does not apply: every gateway serves every namespace, which has "
        "one bundle covering the whole hash range",
    )


async def delete_bundle(services: Services, request: web.Request) -> None:
    namespace = await _existing(services, request)
    # Pulsar deletes a bundle's topics; with one bundle that is the namespace itself
    raise fail(
        web.HTTPPreconditionFailed,
        f"The bundle is the only one of {namespace}: delete the namespace, or its topics",
    )


# -- properties -------------------------------------------------------------------------------


async def _properties(services: Services, namespace: str) -> dict[str, str]:
    value = await services.policies.get_namespace(namespace, PROPERTIES_POLICY)
    return dict(value) if isinstance(value, dict) else {}


async def get_properties(services: Services, request: web.Request) -> dict[str, str]:
    return await _properties(services, await _existing(services, request))


async def set_properties(services: Services, request: web.Request) -> None:
    """``PUT .../properties``: the given properties are added (or replaced)."""
    namespace = await _existing(services, request)
    body = await read_properties(request)
    properties = await _properties(services, namespace)
    properties.update(body)
    await services.policies.set_namespace(namespace, PROPERTIES_POLICY, properties)


async def clear_properties(services: Services, request: web.Request) -> None:
    namespace = await _existing(services, request)
    await services.policies.delete_namespace(namespace, PROPERTIES_POLICY)


async def get_property(services: Services, request: web.Request) -> web.Response:
    """One property's value, as Pulsar answers it: the text itself (empty when unset)."""
    properties = await _properties(services, await _existing(services, request))
    return web.json_response(properties.get(request.match_info["key"]))


async def set_property(services: Services, request: web.Request) -> None:
    namespace = await _existing(services, request)
    properties = await _properties(services, namespace)
    properties[request.match_info["key"]] = request.match_info["value"]
    await services.policies.set_namespace(namespace, PROPERTIES_POLICY, properties)


async def remove_property(services: Services, request: web.Request) -> None:
    namespace = await _existing(services, request)
    properties = await _properties(services, namespace)
    if properties.pop(request.match_info["key"], None) is not None:
        await services.policies.set_namespace(namespace, PROPERTIES_POLICY, properties)


async def scan_offloaded_ledgers(services: Services, request: web.Request) -> None:
    await _existing(services, request)
    raise fail(
        web.HTTPNotImplemented,
        "Offloaded ledgers do not apply: a topic is a Redis stream, kept whole in Redis",
    )


# -- anti-affinity ----------------------------------------------------------------------------


async def anti_affinity_namespaces(services: Services, request: web.Request) -> list[str]:
    """``GET /namespaces/{cluster}/antiAffinity/{group}?tenant=``: the tenant's namespaces
    in the group (Pulsar requires the tenant)."""
    cluster = request.match_info["cluster"]
    if cluster != services.cluster.name:
        raise fail(web.HTTPNotFound, f"Cluster {cluster} does not exist")
    tenant = request.query.get("tenant")
    if not tenant:
        raise fail(web.HTTPPreconditionFailed, "The tenant is required")
    group = request.match_info["group"]
    out = []
    for namespace in await services.tenants.namespaces(tenant):
        value = await services.policies.get_namespace(namespace, ANTI_AFFINITY_POLICY)
        if value == group:
            out.append(namespace)
    return out


_ROUTES: tuple[tuple[str, str, Body], ...] = (
    ("GET", f"{_NS}/topics", get_topics),
    ("POST", f"{_NS}/clearBacklog", clear_backlog),
    ("POST", f"{_NS}/clearBacklog/{{subscription}}", clear_backlog),
    ("POST", f"{_NS}/unsubscribe/{{subscription}}", unsubscribe),
    ("POST", f"{_BUNDLE}/clearBacklog", clear_backlog),
    ("POST", f"{_BUNDLE}/clearBacklog/{{subscription}}", clear_backlog),
    ("POST", f"{_BUNDLE}/unsubscribe/{{subscription}}", unsubscribe),
    ("GET", f"{_NS}/bundles", get_bundles),
    ("GET", f"{_BUNDLE}/topicHashPositions", topic_hash_positions),
    ("PUT", f"{_BUNDLE}/split", split_bundle),
    ("DELETE", _BUNDLE, delete_bundle),
    ("GET", f"{_NS}/properties", get_properties),
    ("PUT", f"{_NS}/properties", set_properties),
    ("DELETE", f"{_NS}/properties", clear_properties),
    ("GET", f"{_NS}/property/{{key}}", get_property),
    ("PUT", f"{_NS}/property/{{key}}/{{value}}", set_property),
    ("DELETE", f"{_NS}/property/{{key}}", remove_property),
    ("GET", "/admin/v2/namespaces/{cluster}/antiAffinity/{group}", anti_affinity_namespaces),
    ("GET", f"{_NS}/scanOffloadedLedgers", scan_offloaded_ledgers),
)

_TAG = "namespaces"
_STR_LIST = {"type": "array", "items": STR}

#: OpenAPI descriptions of these routes (``openapi.py``).
DOCS: dict[tuple[str, str], Doc] = {
    ("GET", f"{_NS}/topics"): Doc(
        _TAG,
        "The namespace's topics and partitions",
        response=_STR_LIST,
        query=(("mode", "string"),),
    ),
    ("POST", f"{_NS}/clearBacklog"): Doc(_TAG, "Clear every subscription's backlog", ok=204),
    ("POST", f"{_NS}/clearBacklog/{{subscription}}"): Doc(
        _TAG, "Clear one subscription's backlog on every topic", ok=204
    ),
    ("POST", f"{_NS}/unsubscribe/{{subscription}}"): Doc(
        _TAG, "Delete a subscription on every topic", ok=204
    ),
    ("POST", f"{_BUNDLE_DOC}/clearBacklog"): Doc(_TAG, "Clear the bundle's backlogs", ok=204),
    ("POST", f"{_BUNDLE_DOC}/clearBacklog/{{subscription}}"): Doc(
        _TAG, "Clear one subscription's backlog in the bundle", ok=204
    ),
    ("POST", f"{_BUNDLE_DOC}/unsubscribe/{{subscription}}"): Doc(
        _TAG, "Delete a subscription in the bundle", ok=204
    ),
    ("GET", f"{_NS}/bundles"): Doc(
        _TAG, "The namespace's bundles (one)", response=obj(boundaries=_STR_LIST)
    ),
    ("GET", f"{_BUNDLE_DOC}/topicHashPositions"): Doc(
        _TAG,
        "Each topic's hash position in the bundle",
        response=obj(namespace=STR, bundle=STR),
        query=(("topics", "string"),),
    ),
    ("PUT", f"{_BUNDLE_DOC}/split"): Doc(_TAG, "Split a bundle (does not apply: 501)", ok=501),
    ("DELETE", _BUNDLE_DOC): Doc(_TAG, "Delete a bundle (the only one: 412)", ok=204),
    ("GET", f"{_NS}/properties"): Doc(_TAG, "The namespace's properties", response=STR_MAP),
    ("PUT", f"{_NS}/properties"): Doc(_TAG, "Add properties", body=STR_MAP, ok=204),
    ("DELETE", f"{_NS}/properties"): Doc(_TAG, "Remove every property", ok=204),
    ("GET", f"{_NS}/property/{{key}}"): Doc(_TAG, "One property", response=STR),
    ("PUT", f"{_NS}/property/{{key}}/{{value}}"): Doc(_TAG, "Set one property", ok=204),
    ("DELETE", f"{_NS}/property/{{key}}"): Doc(_TAG, "Remove one property", ok=204),
    ("GET", "/admin/v2/namespaces/{cluster}/antiAffinity/{group}"): Doc(
        _TAG,
        "The tenant's namespaces in an anti-affinity group",
        response=_STR_LIST,
        query=(("tenant", "string"),),
    ),
    ("GET", f"{_NS}/scanOffloadedLedgers"): Doc(
        _TAG, "Scan offloaded ledgers (does not apply: 501)", ok=501
    ),
}


def add_routes(app: web.Application) -> None:
    for method, path, body in _ROUTES:
        app.router.add_route(method, path, handler(body))
