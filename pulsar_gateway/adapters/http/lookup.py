"""HTTP topic lookup (``lookup/v2/TopicLookup.java``), the lookup official clients do when
given an ``http://`` service URL.

Paths::

    GET /lookup/v2/topic/{domain}/{tenant}/{ns}/{topic}                   lookupTopicAsync
    GET /lookup/v2/topic/{domain}/{tenant}/{ns}/{topic}/bundle            getNamespaceBundle
    GET /lookup/v2/destination/{domain}/{tenant}/{cluster}/{ns}/{topic}   (v1 names)

Every gateway serves every topic (no ownership, no bundles to place), so a lookup always
answers this gateway: ``LookupData`` as Pulsar serializes it, with null fields left out::

    {"brokerUrl": "pulsar://host:6650", "httpUrl": "http://host:8080",
     "nativeUrl": "pulsar://host:6650", "brokerUrlSsl": ""}

(``nativeUrl`` and the always-empty ``brokerUrlSsl`` are legacy fields Pulsar keeps for older
clients.) With TLS listeners (``--tls-certificate-file-path``) it also carries
``brokerUrlTls`` (``pulsar+ssl://host:6651``) and ``httpUrlTls`` (``https://host:8443``).
A client that names an advertised listener (``?listenerName=`` or the
``X-Pulsar-ListenerName`` header, as Pulsar's ``TopicLookup`` takes it) gets that listener's
URLs (its ``http``/``https`` ones where it has them, else this gateway's); naming one the
gateway does not have is a 400 "the broker do not have X listener" (Pulsar's message; it
answers with a server error, which this gateway keeps for its own failures).

Topics are created on first use inside an existing namespace, as on a broker with
``allowAutoTopicCreation``, so a valid name is 404 only when its namespace does not exist
("Namespace X not found", as Pulsar's namespace check answers). A name Pulsar's
``TopicName`` refuses is a 412 "Topic name is not valid", the admin API's answer
(``validateTopicName``); Pulsar's lookup resource lets the parser's error escape.
Partitioned topics need no lookup variant: clients read the partition count from the admin
``.../partitions`` resource
(pulsar_gateway/adapters/http/topics/lifecycle.py) and look up each partition here.
"""

from __future__ import annotations

from aiohttp import web

from pulsar_gateway.adapters.http.admin.tenants import FULL_BUNDLE
from pulsar_gateway.adapters.resource import Body, fail, handler
from pulsar_gateway.core import (
    InvalidTopicName,
    Services,
    TopicName,
    UnknownListener,
    parse_topic_name,
)

__all__ = ["add_routes", "lookup_data"]

_DOMAIN = "{domain:persistent|non-persistent}"
_V2 = f"/lookup/v2/topic/{_DOMAIN}/{{tenant}}/{{namespace}}/{{topic}}"
_V1 = f"/lookup/v2/destination/{_DOMAIN}/{{tenant}}/{{cluster}}/{{namespace}}/{{topic}}"


def lookup_data(
    broker_url: str,
    http_url: str,
    broker_url_tls: str | None = None,
    http_url_tls: str | None = None,
) -> dict[str, str]:
    """Pulsar's ``LookupData`` JSON for a topic served at these URLs (the TLS ones left out
    when None, as Pulsar leaves out null fields)."""
    data = {
        "brokerUrl": broker_url,
        "httpUrl": http_url,
        "nativeUrl": broker_url,
        "brokerUrlSsl": "",
    }
    if broker_url_tls is not None:
        data["brokerUrlTls"] = broker_url_tls
    if http_url_tls is not None:
        data["httpUrlTls"] = http_url_tls
    return data


def _topic(request: web.Request) -> TopicName:
    info = request.match_info
    parts = [info["tenant"], info["namespace"], info["topic"]]
    if "cluster" in info:
        parts.insert(1, info["cluster"])
    try:
        return parse_topic_name(f"{info['domain']}://{'/'.join(parts)}")
    except InvalidTopicName:
        raise fail(web.HTTPPreconditionFailed, "Topic name is not valid") from None


#: The header naming the advertised listener a lookup is for (``LISTENERNAME_HEADER``).
LISTENER_NAME_HEADER = "X-Pulsar-ListenerName"


async def lookup_topic(services: Services, request: web.Request) -> dict[str, str]:
    topic = _topic(request)
    await services.tenants.require_topic_namespace(topic.namespace)
    cluster = services.cluster
    name = request.query.get("listenerName") or request.headers.get(LISTENER_NAME_HEADER)
    if not name:
        return lookup_data(
            cluster.broker_service_url,
            cluster.service_url,
            cluster.broker_service_url_tls,
            cluster.service_url_tls,
        )
    try:
        listener = cluster.listener(name)
    except UnknownListener as exc:
        raise fail(web.HTTPBadRequest, str(exc)) from None
    return lookup_data(
        listener.broker_url,
        listener.web_service_url or cluster.service_url,
        listener.broker_service_url_tls,
        listener.web_service_url_tls or cluster.service_url_tls,
    )


async def namespace_bundle(request: web.Request) -> web.Response:
    # Pulsar answers the bundle range as plain text; the one bundle covers every topic.
    _topic(request)
    return web.Response(text=FULL_BUNDLE)


def add_routes(app: web.Application) -> None:
    """Register the lookup routes."""
    lookup: Body = lookup_topic
    app.router.add_get(_V2, handler(lookup))
    app.router.add_get(_V1, handler(lookup))
    app.router.add_get(f"{_V2}/bundle", namespace_bundle)
