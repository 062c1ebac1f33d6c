"""Admin REST v2: topic stats, fleet-wide (:mod:`pulsar_gateway.core.fleet.topic_stats`).

``GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/stats`` (Pulsar ``getStats``) answers
``TopicStats`` of a non-partitioned topic or one partition; ``GET
.../{topic}/partitioned-stats?perPartition=true`` (``getPartitionedStats``) the sum over a
partitioned topic's partitions with ``metadata.partitions``, and each partition's stats
under ``partitions`` unless ``perPartition=false``. A topic that does not exist is a 404,
as is partitioned-stats of a topic that is not partitioned. Pulsar's query parameters
``getPreciseBacklog``, ``subscriptionBacklogSize`` and ``getEarliestTimeInBacklog`` are
accepted: the backlog is always exact here, its size always estimated.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pulsar_gateway.adapters.resource import fail, handler, topic_name
from pulsar_gateway.core import Services

__all__ = ["add_routes"]

_TOPIC = "/admin/v2/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}"


async def get_stats(services: Services, request: web.Request) -> dict[str, Any]:
    return await services.stats.topic(str(topic_name(request)))


async def get_partitioned_stats(services: Services, request: web.Request) -> dict[str, Any]:
    topic = topic_name(request, partitioned=True)
    partitions = await services.topics.partitions(topic)
    if partitions == 0:
        raise fail(web.HTTPNotFound, f"Partitioned Topic not found: {topic}")
    per_partition = request.query.get("perPartition", "true").lower() != "false"
    return await services.stats.partitioned(str(topic), partitions, per_partition)


def add_routes(app: web.Application) -> None:
    app.router.add_get(f"{_TOPIC}/stats", handler(get_stats))
    app.router.add_get(f"{_TOPIC}/partitioned-stats", handler(get_partitioned_stats))
