"""Typed commands of the policy and permission hashes.

Each hash maps a name to a JSON value: a namespace's or a topic's policies
(:meth:`.keys.KeySchema.namespace_policies`, ``topic_policies``), a namespace's
permissions, its topics' grants and its subscriptions' roles (``namespace_permissions``,
``topic_permissions``, ``subscription_permissions``). Values are returned as stored
(bytes); parsing them is the policies' work. Each function queues one command and returns
the lane's future (:mod:`.commands`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pulsar_gateway.core.storage.commands import CommandLane
from pulsar_gateway.core.storage.scripts import text

__all__ = ["delete_hash", "delete_value", "set_value", "stored_value", "stored_values"]


def _by_name(reply: list[Any]) -> dict[str, bytes]:
    return {text(reply[i]): reply[i + 1] for i in range(0, len(reply) - 1, 2)}


def stored_value(lane: CommandLane, key: str, name: str) -> asyncio.Future[bytes | None]:
    """The JSON stored under ``name`` in hash ``key``, None when absent (``HGET``)."""
    return lane.call("HGET", key, name)


def stored_values(lane: CommandLane, key: str) -> asyncio.Future[dict[str, bytes]]:
    """Every name of hash ``key`` with its JSON, in Redis's order (``HGETALL``)."""
    return lane.call("HGETALL", key, decode=_by_name)


def set_value(lane: CommandLane, key: str, name: str, value: str) -> asyncio.Future[Any]:
    """Store JSON ``value`` under ``name`` in hash ``key`` (``HSET``)."""
    return lane.call("HSET", key, name, value)


def delete_value(lane: CommandLane, key: str, name: str) -> asyncio.Future[Any]:
    """Remove ``name`` from hash ``key`` (``HDEL``)."""
    return lane.call("HDEL", key, name)


def delete_hash(lane: CommandLane, key: str) -> asyncio.Future[Any]:
    """Delete hash ``key`` with every value in it (``DEL``)."""
    return lane.call("DEL", key)
