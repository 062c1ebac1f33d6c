"""Reading back through the admin API what the fuzzing sessions stored.

The binary and WebSocket sessions store entries with hostile metadata (times beyond any
calendar, keys and properties that are not UTF-8 or hold control characters, batches that
lie about their size) on the campaign's topics. Every other front must read such entries
without failing: :func:`run_admin_reads` sends GET requests of every documented read
operation (``/admin/v2/openapi.json``) that names a topic, its path parameters filled with
the campaign's topics and subscriptions (peek, examine, stats, internal stats, backlog,
last message id...). An answer of 500 or more is a finding.
"""

from __future__ import annotations

import json
import random
import re
import urllib.request

import aiohttp

from tests.fuzz.stats import SessionStats

_PARAMETER = re.compile(r"\{(\w+)\}")


def read_operations(http_url: str) -> list[str]:
    """The GET paths of the gateway's OpenAPI description that name a topic, but those
    described as answering 501 (what does not apply over Redis, such as offload status:
    they read nothing stored)."""
    with urllib.request.urlopen(f"{http_url}/admin/v2/openapi.json", timeout=10) as resp:
        spec = json.load(resp)
    return sorted(
        path
        for path, operations in spec["paths"].items()
        if "get" in operations
        and "501" not in operations["get"]["responses"]
        and "{topic}" in path
        and not path.startswith("/ws/")
    )


def fill(
    path: str, rng: random.Random, topics: tuple[str, ...], subscriptions: tuple[str, ...]
) -> str:
    """``path`` with its parameters set to the campaign's names (and small numbers)."""
    domain, rest = rng.choice(topics).split("://")
    values = {
        "domain": domain,
        "cluster": "standalone",
        "tenant": "public",
        "namespace": "default",
        "topic": rest.rsplit("/", 1)[-1],
        "subscription": rng.choice(subscriptions),
        "subName": rng.choice(subscriptions),
    }

    def value(match: re.Match[str]) -> str:
        return values.get(match.group(1), str(rng.choice((0, 1, 2, 3, 10))))  # ids, positions

    path = _PARAMETER.sub(value, path)
    if "examinemessage" in path:
        position = rng.choice(("earliest", "latest"))
        path += f"?initialPosition={position}&messagePosition={rng.randrange(1, 6)}"
    return path


async def run_admin_reads(
    http_url: str,
    operations: list[str],
    rng: random.Random,
    topics: tuple[str, ...],
    subscriptions: tuple[str, ...],
    count: int,
) -> SessionStats:
    """``count`` read requests on one HTTP session; what they got."""
    stats = SessionStats(sessions=1)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for _ in range(count):
            path = fill(rng.choice(operations), rng, topics, subscriptions)
            async with session.get(http_url + path) as resp:
                await resp.read()
                stats.inputs += 1
                stats.statuses[resp.status] = stats.statuses.get(resp.status, 0) + 1
                if resp.status >= 500:
                    stats.server_errors += 1
                    stats.samples.append(f"GET {path} answered {resp.status}")
    return stats
