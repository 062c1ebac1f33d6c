"""Admin REST v2: topic compaction, with Pulsar's paths and JSON (``PersistentTopics.java``).

``PUT /admin/v2/persistent/{tenant}/{namespace}/{topic}/compaction`` starts a compaction in
the background and answers 204 (409 "Compaction already in progress" while one runs in the
fleet, 404 "Topic not found" for a topic without data). ``GET`` on the same path answers
Pulsar's ``LongRunningProcessStatus``: ``{"status": "NOT_RUN" | "RUNNING" | "SUCCESS" |
"ERROR", "lastError": "..."}``. Compaction applies to persistent topics only.
"""

from __future__ import annotations

from aiohttp import web

from gateway.broker import Broker
from gateway.compaction import CompactionAlreadyRunning
from gateway.errors import InvalidTopicName, NotAllowed, TopicNotFound
from gateway.topic_name import TopicName, parse_topic_name

__all__ = ["add_routes"]

PATH = "/admin/v2/persistent/{tenant}/{namespace}/{topic}/compaction"


def _topic(request: web.Request) -> TopicName:
    info = request.match_info
    try:
        return parse_topic_name(
            f"persistent://{info['tenant']}/{info['namespace']}/{info['topic']}"
        )
    except InvalidTopicName as exc:
        raise web.HTTPPreconditionFailed(reason=f"Invalid topic name: {exc}") from None


def add_routes(app: web.Application, broker_key: web.AppKey[Broker]) -> None:
    """Register the trigger and status routes."""

    async def trigger(request: web.Request) -> web.StreamResponse:
        topic = _topic(request)
        try:
            await request.app[broker_key].compaction.trigger(topic)
        except CompactionAlreadyRunning:
            raise web.HTTPConflict(reason="Compaction already in progress") from None
        except TopicNotFound:
            raise web.HTTPNotFound(reason="Topic not found") from None
        except NotAllowed as exc:
            raise web.HTTPMethodNotAllowed("PUT", ["GET"], reason=str(exc)) from None
        return web.Response(status=204)

    async def status(request: web.Request) -> web.StreamResponse:
        topic = _topic(request)
        return web.json_response(await request.app[broker_key].compaction.status(topic))

    app.router.add_put(PATH, trigger)
    app.router.add_get(PATH, status)
