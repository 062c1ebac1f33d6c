"""Admin REST v2: topic compaction, with Pulsar's paths and JSON (``PersistentTopics.java``).

``PUT /admin/v2/persistent/{tenant}/{namespace}/{topic}/compaction`` starts a compaction in
the background and answers 204 (409 "Compaction already in progress" while one runs in the
fleet, 404 "Topic not found" for a topic without data). ``GET`` on the same path answers
Pulsar's ``LongRunningProcessStatus``: ``{"status": "NOT_RUN" | "RUNNING" | "SUCCESS" |
"ERROR", "lastError": "..."}``. Compaction applies to persistent topics only: on a
non-persistent topic both answer 405, as Pulsar's ``NonPersistentTopics`` refuses
operations on data it does not keep.
"""

from __future__ import annotations

from aiohttp import web

from pulsar_gateway.adapters.resource import fail, handler
from pulsar_gateway.core import (
    InvalidTopicName,
    NotAllowed,
    Services,
    TopicName,
    parse_topic_name,
)

__all__ = ["add_routes"]

PATH = "/admin/v2/persistent/{tenant}/{namespace}/{topic}/compaction"
NON_PERSISTENT_PATH = "/admin/v2/non-persistent/{tenant}/{namespace}/{topic}/compaction"


def _topic(request: web.Request) -> TopicName:
    info = request.match_info
    try:
        return parse_topic_name(
            f"persistent://{info['tenant']}/{info['namespace']}/{info['topic']}"
        )
    except InvalidTopicName as exc:
        raise fail(web.HTTPPreconditionFailed, f"Invalid topic name: {exc}") from None


async def trigger(services: Services, request: web.Request) -> None:
    # CompactionAlreadyRunning is 409, a topic without data 404, through the error table.
    await services.compaction.trigger(_topic(request))


async def status(services: Services, request: web.Request) -> dict[str, str]:
    return await services.compaction.status(_topic(request))


async def non_persistent(services: Services, request: web.Request) -> None:
    raise NotAllowed("Compaction on a non-persistent topic is not allowed")


def add_routes(app: web.Application) -> None:
    """Register the trigger and status routes."""
    app.router.add_put(PATH, handler(trigger))
    app.router.add_get(PATH, handler(status))
    app.router.add_put(NON_PERSISTENT_PATH, handler(non_persistent))
    app.router.add_get(NON_PERSISTENT_PATH, handler(non_persistent))
