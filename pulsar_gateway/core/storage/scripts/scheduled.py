"""Typed calls of the scheduled-message admin scripts: ``scheduled_list``,
``scheduled_cancel`` and ``scheduled_reschedule``. Each first reads ahead over the delayed
entries at the subscription's cursor (at most ``schedule_ahead`` of them) so the index is
complete while no consumer reads."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import Any

from pulsar_gateway.core.model.entry import StoredEntry
from pulsar_gateway.core.storage.keys import SubscriptionKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner

__all__ = [
    "ScheduleChange",
    "ScheduledEntry",
    "ScheduledList",
    "scheduled_cancel",
    "scheduled_list",
    "scheduled_reschedule",
]


@dataclass(frozen=True, slots=True)
class ScheduledEntry:
    """One scheduled entry and when it is due (ms since the epoch)."""

    entry: StoredEntry
    deliver_at: int


@dataclass(frozen=True, slots=True)
class ScheduledList:
    """One page of a subscription's schedule, and how many it holds in all; ``found``
    is False when there is no such subscription."""

    found: bool
    total: int = 0
    entries: tuple[ScheduledEntry, ...] = ()


def _score(raw: bytes) -> int:
    """A deliver-at time read back from the scheduled index: Redis keeps scores as doubles
    and writes one past 2**53 in exponent form (a producer may ask for 2**63 - 1)."""
    try:
        return int(raw)
    except ValueError:
        return int(float(raw))


def scheduled_list(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    offset: int,
    limit: int,
    schedule_ahead: int,
    partition: int,
) -> asyncio.Future[ScheduledList]:
    """Up to ``limit`` scheduled entries from ``offset``, earliest deliver-at first; their
    message ids carry ``partition``."""

    def decode(reply: list[Any]) -> ScheduledList:
        if int(reply[0]) != 0:
            return ScheduledList(False)
        entries = tuple(
            ScheduledEntry(
                StoredEntry.parse(reply[i], reply[i + 2], partition), _score(reply[i + 1])
            )
            for i in range(2, len(reply), 3)
        )
        return ScheduledList(True, int(reply[1]), entries)

    return lane.eval(
        SCRIPTS["scheduled_list"],
        keys.all,
        [subscription, offset, limit, schedule_ahead],
        decode,
    )


class ScheduleChange(enum.IntEnum):
    """The answer of a cancel or reschedule."""

    DONE = 1
    #: not scheduled on this subscription (delivered, acknowledged, not delayed, or not
    #: read yet behind undelivered messages)
    NOT_SCHEDULED = 0
    NO_SUBSCRIPTION = -1


def scheduled_cancel(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    stream_id: bytes,
    schedule_ahead: int,
) -> asyncio.Future[ScheduleChange]:
    """Cancel one scheduled entry: acknowledged on this subscription, never delivered."""
    return lane.eval(
        SCRIPTS["scheduled_cancel"],
        keys.all,
        [subscription, stream_id, schedule_ahead],
        ScheduleChange,
    )


def scheduled_reschedule(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    stream_id: bytes,
    deliver_at: int,
    schedule_ahead: int,
) -> asyncio.Future[ScheduleChange]:
    """Move one scheduled entry to ``deliver_at`` (ms; not ahead = due now)."""
    return lane.eval(
        SCRIPTS["scheduled_reschedule"],
        keys.all,
        [subscription, stream_id, deliver_at, schedule_ahead],
        ScheduleChange,
    )
