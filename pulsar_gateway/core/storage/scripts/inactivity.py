"""Typed calls of the inactivity scripts: ``inactive_topic`` (how long a topic partition has
been inactive) and ``inactive_subscriptions`` (how long each of its subscriptions has been
without a consumer), for the sweeps of :mod:`pulsar_gateway.core.admin.inactive_topics`."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pulsar_gateway.core.storage.keys import TopicKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner, text

__all__ = [
    "Activity",
    "ActivityStatus",
    "InactiveMode",
    "inactive_subscriptions",
    "inactive_topic",
]


class InactiveMode(enum.StrEnum):
    """What keeps a topic active besides its producers and consumers (Pulsar's
    ``InactiveTopicDeleteMode``), as ``inactive_topic.lua`` spells it."""

    #: any subscription (``delete_when_no_subscriptions``)
    NO_SUBSCRIPTIONS = "no-subscriptions"
    #: a subscription with a backlog (``delete_when_subscriptions_caught_up``)
    CAUGHT_UP = "caught-up"


class ActivityStatus(enum.IntEnum):
    """``inactive_topic.lua`` status codes."""

    ACTIVE = 0
    INACTIVE = 1
    #: a subscription was created or deleted since the caller listed them: list again
    RETRY = 2
    #: the topic has no key in Redis (only its name is listed): nothing to mark
    NOTHING_STORED = 3


@dataclass(frozen=True, slots=True)
class Activity:
    """A topic partition's activity: its status and, when inactive, for how long (ms)."""

    status: ActivityStatus
    inactive_ms: int = 0


def _activity(reply: list[Any]) -> Activity:
    return Activity(ActivityStatus(int(reply[0])), int(reply[1]))


def inactive_topic(
    lane: ScriptRunner, keys: TopicKeys, *, mode: InactiveMode, subscriptions: Sequence[str]
) -> asyncio.Future[Activity]:
    """Whether the topic partition is active under ``mode`` and, if not, for how long; its
    mark is kept up to date. ``subscriptions``: the names just read from its subscriptions
    hash (RETRY when they changed)."""
    script_keys = [
        keys.ledger,
        keys.subscriptions,
        keys.stream,
        keys.producers,
        keys.producer_waiters,
        *(keys.consumers(name) for name in subscriptions),
    ]
    return lane.eval(SCRIPTS["inactive_topic"], script_keys, [str(mode), *subscriptions], _activity)


def _idle(reply: list[Any]) -> dict[str, int]:
    return {text(reply[i]): int(reply[i + 1]) for i in range(0, len(reply), 2)}


def inactive_subscriptions(
    lane: ScriptRunner, keys: TopicKeys, *, subscriptions: Sequence[str]
) -> asyncio.Future[dict[str, int]]:
    """The named subscriptions of the topic partition that exist and have no live consumer,
    with how long they have been so (ms); the marks are kept up to date."""
    script_keys = [keys.subscriptions]
    for name in subscriptions:
        script_keys += [keys.consumers(name), keys.consumer_info(name)]
    return lane.eval(SCRIPTS["inactive_subscriptions"], script_keys, list(subscriptions), _idle)
