"""When Redis refuses work, every HTTP surface answers with a clear status and JSON reason
(WebSocket: 500 before the upgrade; admin: 503; REST produce: 503), and serves again as soon
as Redis does. Redis is made to refuse writes with ``min-replicas-to-write``, which a real
Redis answers with a NOREPLICAS error."""

from __future__ import annotations

import asyncio
from typing import Any

import redis

from tests.adminhttp import admin
from tests.conftest import GatewayThread
from tests.wsclient import connect, producer_url, refused


def test_storage_errors_get_500_503_and_service_resumes(
    gateway: GatewayThread, redis_clean: redis.Redis, topic: str
) -> None:
    url = producer_url(gateway, topic)
    base = f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}"
    rest = f"{gateway.http_url}/topics/persistent/public/default/{topic}"
    redis_clean.config_set("min-replicas-to-write", 1)
    try:
        status, body = asyncio.run(refused(url))
        assert status == 500 and body["reason"]
        status, body = admin("PUT", f"{base}/partitions", 2)
        assert status == 503 and "reason" in body
        status, body = admin("POST", rest, {"messages": [{"payload": "x"}]})
        assert status == 503 and "NOREPLICAS" in body["reason"]
    finally:
        redis_clean.config_set("min-replicas-to-write", 0)

    async def produce() -> Any:
        async with connect(url) as ws:
            return await ws.produce(b"back")

    assert asyncio.run(produce())["result"] == "ok"
    assert admin("PUT", f"{base}-2/partitions", 2)[0] == 204
