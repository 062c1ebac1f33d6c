"""Admin REST v2: topic stats, fleet-wide (:mod:`gateway.topic_stats`).

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

from adapters.http.topics import _fail, _handler, _topic
from gateway.broker import Broker
from gateway.topic_stats import partitioned_stats, topic_stats

__all__ = ["add_routes"]

_TOPIC = "/admin/v2/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}"


async def get_stats(broker: Broker, request: web.Request) -> dict[str, Any]:
    return await topic_stats(broker, str(_topic(request)))


async def get_partitioned_stats(broker: Broker, request: web.Request) -> dict[str, Any]:
    topic = _topic(request, partitioned=True)
    partitions = await broker.partitioned_topics.partitions(topic)
    if partitions == 0:
        raise _fail(web.HTTPNotFound, f"Partitioned Topic not found: {topic}")
    per_partition = request.query.get("perPartition", "true").lower() != "false"
    return await partitioned_stats(broker, str(topic), partitions, per_partition)


def add_routes(app: web.Application, broker_key: web.AppKey[Broker]) -> None:
    app.router.add_get(f"{_TOPIC}/stats", _handler(broker_key, get_stats))
    app.router.add_get(f"{_TOPIC}/partitioned-stats", _handler(broker_key, get_partitioned_stats))
