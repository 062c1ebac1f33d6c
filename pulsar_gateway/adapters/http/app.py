"""The HTTP front (aiohttp): admin health check and Prometheus metrics.

``GET /admin/v2/brokers/health`` answers ``ok`` (Pulsar's ``BrokersBase.healthCheck``) when
Redis answers, else 503 with a JSON ``reason``. ``GET /admin/v2/brokers/internal-configuration``
says where the fleet's Redis is (``InternalConfigurationData``), for the Spark data source.
``GET /metrics`` is the Prometheus text format; ``GET /`` the web console (``console``).
Unknown paths get a 404 with a JSON body, like the rest of the admin API.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from prometheus_client import CONTENT_TYPE_LATEST

from pulsar_gateway.adapters.http import auth, console, lookup, openapi, rest_produce
from pulsar_gateway.adapters.http.admin import (
    backlog_quota,
    brokers,
    namespaces,
    policies,
    schemas,
    tenants,
    unavailable,
    unload,
)
from pulsar_gateway.adapters.http.topics import (
    compaction,
    lifecycle,
    operations,
    scheduled,
    stats,
    subscriptions,
)
from pulsar_gateway.adapters.resource import SERVICES
from pulsar_gateway.adapters.websocket import routes as websocket
from pulsar_gateway.core import Services, StorageError

__all__ = ["PROCESS_METRICS", "SERVER_LOGGER", "make_app"]


async def health(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    try:
        await services.health()
    except StorageError as exc:
        return web.json_response({"reason": str(exc)}, status=503)
    return web.Response(text="ok")


async def internal_configuration(request: web.Request) -> web.Response:
    # Pulsar's BrokersBase.getInternalConfigurationData; superuser only (adapters/http/auth.py)
    return web.json_response(request.app[SERVICES].cluster.internal_configuration())


#: What renders the per-process series when this process is one of several workers sharing
#: the ports (``pulsar-gateway --workers``): every worker's, labelled by worker, since a
#: scrape reaches any one of them. Absent, this process's own.
PROCESS_METRICS: web.AppKey[Callable[[], Awaitable[bytes]]] = web.AppKey("process_metrics")


async def metrics(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    topics = await services.topic_metrics.refresh()
    render = request.app.get(PROCESS_METRICS)
    body = (await render() if render is not None else services.metrics.render()) + topics
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


@web.middleware
async def count_requests(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Count every request by method, route template (not the path: topic names would
    make one series per topic) and status, in ``pulsar_gateway_http_requests_total``."""
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else "unmatched"
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        request.app[SERVICES].metrics.http_requests.labels(request.method, route, str(status)).inc()


@web.middleware
async def json_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every HTTP error carries a JSON body with a ``reason``, as Pulsar's admin API does."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return web.json_response({"reason": exc.reason}, status=exc.status)


class _ClientErrors(logging.Filter):
    """aiohttp logs a request it cannot parse (answered 400 by aiohttp itself: a request
    line or header too long, a malformed header) as an ERROR with a traceback. A client's
    bad bytes are not a fault of the gateway, and a client could fill the log with them:
    such records become one INFO line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError) and exc.code < 500:
            record.msg = f"{record.getMessage()}: {exc.code} {exc.message}"[:500]
            record.args = ()
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info = record.exc_text = None
            return logging.getLogger(record.name).isEnabledFor(logging.INFO)
        return True


#: The logger of the aiohttp server (``web.AppRunner(..., logger=SERVER_LOGGER)``).
SERVER_LOGGER = logging.getLogger("pulsar_gateway.http")
SERVER_LOGGER.addFilter(_ClientErrors())


@web.middleware
async def storage_backlog(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """While Redis is behind (the storage lane's queue is long), a request that would add
    to it waits until Redis catches up; the health check and ``/metrics`` are answered at
    once, so an operator sees what is going on."""
    gate = request.app[SERVICES].storage_backlog
    if not gate.is_open and not _always_answered(request.path):
        await gate.wait_open()
    return await handler(request)


_ALWAYS_ANSWERED = frozenset({"/admin/v2/brokers/health", "/metrics"})


def _always_answered(path: str) -> bool:
    # the console's own files too: its page then shows what the admin API answers
    return path in _ALWAYS_ANSWERED or console.is_console_path(path)


def make_app(
    services: Services, process_metrics: Callable[[], Awaitable[bytes]] | None = None
) -> web.Application:
    # client_max_size: a larger body is refused with 413 (Pulsar's httpMaxRequestSize)
    app = web.Application(
        middlewares=[count_requests, json_errors, storage_backlog],
        client_max_size=services.limits.http_max_request_size,
    )
    app[SERVICES] = services
    if process_metrics is not None:
        app[PROCESS_METRICS] = process_metrics
    app.router.add_get("/admin/v2/brokers/health", health)
    app.router.add_get("/admin/v2/brokers/internal-configuration", internal_configuration)
    app.router.add_get("/metrics", metrics)
    namespaces.add_routes(app)  # first: /namespaces/{cluster}/antiAffinity/{group}
    policies.add_routes(app)
    compaction.add_routes(app)
    lifecycle.add_routes(app)
    unload.add_routes(app)
    operations.add_routes(app)
    scheduled.add_routes(app)
    stats.add_routes(app)
    subscriptions.add_routes(app)
    rest_produce.add_routes(app)
    tenants.add_routes(app)
    backlog_quota.add_routes(app)
    schemas.add_routes(app)
    lookup.add_routes(app)
    brokers.add_routes(app)
    unavailable.add_routes(app)
    openapi.add_routes(app)
    websocket.add_routes(app)
    console.add_routes(app)
    auth.add_routes(app)
    return app
