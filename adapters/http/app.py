"""The HTTP front (aiohttp): admin health check and Prometheus metrics.

``GET /admin/v2/brokers/health`` answers ``ok`` (Pulsar's ``BrokersBase.healthCheck``) when
Redis answers, else 503 with a JSON ``reason``. ``GET /metrics`` is the Prometheus text
format. Unknown paths get a 404 with a JSON body, like the rest of the admin API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST
from redis.exceptions import RedisError

from adapters.http import (
    auth,
    backlog_quota,
    compaction,
    lookup,
    openapi,
    policies,
    rest_produce,
    scheduled,
    stats,
    subscriptions,
    tenants,
    topics,
)
from adapters.websocket import routes as websocket
from gateway.broker import Broker

__all__ = ["BROKER_KEY", "make_app"]

BROKER_KEY = web.AppKey("broker", Broker)


async def health(request: web.Request) -> web.Response:
    broker = request.app[BROKER_KEY]
    try:
        await broker.redis.ping()
    except RedisError as exc:
        return web.json_response({"reason": f"Redis is unavailable: {exc}"}, status=503)
    return web.Response(text="ok")


async def metrics(request: web.Request) -> web.Response:
    broker = request.app[BROKER_KEY]
    await broker.topic_metrics.refresh()
    # Rendering thousands of series takes a while (prometheus_client's text encoder): in a
    # thread, the event loop keeps serving the other clients between GIL switches.
    body = await asyncio.to_thread(broker.metrics.render)
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
        request.app[BROKER_KEY].metrics.http_requests.labels(
            request.method, route, str(status)
        ).inc()


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


def make_app(broker: Broker) -> web.Application:
    app = web.Application(middlewares=[count_requests, json_errors])
    app[BROKER_KEY] = broker
    app.router.add_get("/admin/v2/brokers/health", health)
    app.router.add_get("/metrics", metrics)
    policies.add_routes(app, BROKER_KEY)
    compaction.add_routes(app, BROKER_KEY)
    topics.add_routes(app, BROKER_KEY)
    scheduled.add_routes(app, BROKER_KEY)
    stats.add_routes(app, BROKER_KEY)
    subscriptions.add_routes(app, BROKER_KEY)
    rest_produce.add_routes(app, BROKER_KEY)
    tenants.add_routes(app, BROKER_KEY)
    backlog_quota.add_routes(app, BROKER_KEY)
    lookup.add_routes(app, BROKER_KEY)
    openapi.add_routes(app)
    websocket.add_routes(app, BROKER_KEY)
    auth.add_routes(app, BROKER_KEY)
    return app
