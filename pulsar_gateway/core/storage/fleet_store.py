"""Typed commands of the fleet's shared state: the gateways' descriptions (the
``gateways:info`` hash, :meth:`.keys.KeySchema.gateway_info`), the rate reports each gateway
writes per topic (:attr:`.keys.TopicKeys.gateway_stats`) and about itself (the
``gateways:stats`` hash, :attr:`.keys.KeySchema.gateway_stats`), the unload announcements
(:attr:`.keys.KeySchema.unloads`) and Redis's clock. Each function queues one command and
returns the lane's future (:mod:`.commands`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from pulsar_gateway.core.storage.commands import CommandLane
from pulsar_gateway.core.storage.keys import KeySchema, TopicKeys
from pulsar_gateway.core.storage.scripts import text
from pulsar_gateway.core.storage.topic_store import Entry, decode_entries

__all__ = [
    "announce_unload",
    "clock_ms",
    "describe_gateway",
    "expire_rate_report",
    "forget_gateways",
    "gateway_descriptions",
    "gateway_summaries",
    "newest_unload",
    "unloads_after",
    "withdraw_rate_report",
    "write_gateway_summary",
    "write_rate_report",
]


# -- gateway descriptions ----------------------------------------------------------------


def _descriptions(reply: Any) -> dict[str, str]:
    pairs = dict(zip(reply[::2], reply[1::2], strict=True)) if isinstance(reply, list) else reply
    return {text(gateway): text(description) for gateway, description in pairs.items()}


def describe_gateway(
    lane: CommandLane, info: str, gateway_id: str, description: str
) -> asyncio.Future[Any]:
    """Store ``gateway_id``'s description JSON in hash ``info`` (``HSET``)."""
    return lane.call("HSET", info, gateway_id, description)


def gateway_descriptions(lane: CommandLane, info: str) -> asyncio.Future[dict[str, str]]:
    """Every gateway described in hash ``info`` with its JSON (``HGETALL``)."""
    return lane.call("HGETALL", info, decode=_descriptions)


def forget_gateways(
    lane: CommandLane, info: str, gateway_ids: Sequence[str]
) -> asyncio.Future[Any]:
    """Remove the entries of ``gateway_ids`` from hash ``info`` (``HDEL``): their
    descriptions, or their summaries."""
    return lane.call("HDEL", info, *gateway_ids)


# -- gateway summaries -------------------------------------------------------------------


def write_gateway_summary(
    lane: CommandLane, stats: str, gateway_id: str, summary: str
) -> asyncio.Future[Any]:
    """Store ``gateway_id``'s summary JSON in hash ``stats`` (``HSET``). The hash is the
    fleet's, so it has no expiry: readers skip stale summaries and drop those of gateways
    no longer live (Redis 7.0 has no per-field TTL: ``HPEXPIRE`` came with 7.4)."""
    return lane.call("HSET", stats, gateway_id, summary)


def gateway_summaries(lane: CommandLane, stats: str) -> asyncio.Future[dict[str, str]]:
    """Every gateway's summary JSON in hash ``stats`` (``HGETALL``)."""
    return lane.call("HGETALL", stats, decode=_descriptions)


# -- rate reports ------------------------------------------------------------------------


def write_rate_report(
    lane: CommandLane, keys: TopicKeys, gateway_id: str, report: str
) -> asyncio.Future[Any]:
    """Store ``gateway_id``'s rate report JSON for the topic (``HSET``)."""
    return lane.call("HSET", keys.gateway_stats, gateway_id, report)


def expire_rate_report(lane: CommandLane, keys: TopicKeys, ttl_ms: int) -> asyncio.Future[Any]:
    """Let the topic's reports expire in ``ttl_ms`` unless written again (``PEXPIRE``)."""
    return lane.call("PEXPIRE", keys.gateway_stats, ttl_ms)


def withdraw_rate_report(
    lane: CommandLane, keys: TopicKeys, gateway_id: str
) -> asyncio.Future[Any]:
    """Remove ``gateway_id``'s report for the topic (``HDEL``)."""
    return lane.call("HDEL", keys.gateway_stats, gateway_id)


# -- unload announcements ----------------------------------------------------------------


def _newest_id(reply: list[Any]) -> bytes | None:
    return reply[0][0] if reply else None


def newest_unload(lane: CommandLane, keys: KeySchema) -> asyncio.Future[bytes | None]:
    """The id of the newest announcement, None when there is none (``XREVRANGE``)."""
    return lane.call("XREVRANGE", keys.unloads, "+", "-", "COUNT", 1, decode=_newest_id)


def unloads_after(lane: CommandLane, keys: KeySchema, last: bytes) -> asyncio.Future[list[Entry]]:
    """The announcements after id ``last``, oldest first (``XRANGE``)."""
    return lane.call("XRANGE", keys.unloads, b"(" + last, "+", decode=decode_entries)


def announce_unload(
    lane: CommandLane, keys: KeySchema, *, scope: str, kind: str, kept: int
) -> asyncio.Future[Any]:
    """Append an announcement of ``kind`` for ``scope``, keeping about the newest ``kept``
    (``XADD`` with ``MAXLEN ~``)."""
    return lane.call("XADD", keys.unloads, "MAXLEN", "~", kept, "*", "scope", scope, "kind", kind)


# -- Redis's clock -----------------------------------------------------------------------


def _milliseconds(reply: list[Any]) -> int:
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def clock_ms(lane: CommandLane) -> asyncio.Future[int]:
    """Redis's clock in ms, the one clock every gateway shares (``TIME``)."""
    return lane.call("TIME", decode=_milliseconds)
