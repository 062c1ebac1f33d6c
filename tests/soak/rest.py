"""A REST produce flood (Pulsar's PIP-64 ``POST /topics/persistent/{tenant}/{ns}/{topic}``):
``clients`` concurrent HTTP clients POSTing ``ProducerMessages`` JSON bodies as large as the
gateway accepts, as fast as it answers.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp

from tests.soak.floods import GIB, KIB, MIB, NAMESPACE, FloodStats

JSON = {"Content-Type": "application/json"}


def producer_messages(body_size: int, message_size: int = 64 * KIB) -> tuple[bytes, int, int]:
    """A ``{"messages": [{"payload": "xx..."}, ...]}`` body of at most ``body_size`` bytes
    made of messages of about ``message_size`` bytes; (body, payload bytes per message,
    messages)."""
    count = max(1, round(body_size / message_size))
    overhead = len('{"messages":[]}') + count * len('{"payload":""},') - 1
    payload = max(1, (body_size - overhead) // count)
    message = '{"payload":"' + "x" * payload + '"}'
    return ('{"messages":[' + ",".join([message] * count) + "]}").encode(), payload, count


async def _post(
    session: aiohttp.ClientSession, url: str, body: bytes, payload: int, stats: FloodStats
) -> int | None:
    """POST ``body`` once, counting what happened; the status, None when the request
    failed (a reset, a timeout)."""
    stats.sessions += 1
    try:
        async with session.post(url, data=body, headers=JSON) as answer:
            text = await answer.read()
            status = answer.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        stats.disconnects += 1
        stats.count(type(exc).__name__)
        return None
    stats.offered += len(body)
    stats.count(str(status))
    if status == 200:
        results = json.loads(text).get("messagePublishResults", [])
        stored = sum(1 for result in results if result.get("errorCode") == 0)
        stats.accept(stored * payload, stored)
    return status


async def rest_flood(
    http_url: str,
    topic: str,
    stats: FloodStats,
    *,
    clients: int = 32,
    body_size: int = MIB,
    budget: int = GIB,
) -> None:
    """Find the largest body the gateway takes (``body_size``, halved down to 64 KiB until
    one is answered 200; the largest if none is), then have ``clients`` concurrent clients
    POST it to ``topic`` until ``budget`` bytes were sent. ``stats.outcomes`` counts the
    answers by status (and failed requests by error)."""
    url = f"{http_url}/topics/persistent/{NAMESPACE}/{topic}"
    timeout = aiohttp.ClientTimeout(total=60)
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        size = body_size
        while size >= 64 * KIB:
            if await _post(session, url, *producer_messages(size)[:2], stats) == 200:
                break
            size //= 2
        else:
            size = body_size
        body, payload, count = producer_messages(size)
        stats.detail = f"bodies of {size} bytes, {count} messages of {payload} bytes"

        async def client() -> None:
            while stats.offered < budget:
                if await _post(session, url, body, payload, stats) is None:
                    await asyncio.sleep(0.1)

        await asyncio.gather(*(client() for _ in range(clients)))
