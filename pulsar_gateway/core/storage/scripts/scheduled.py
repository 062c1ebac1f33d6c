"""Typed calls of the scheduled-message admin scripts: ``scheduled_list``,
``scheduled_histogram``, ``scheduled_cancel`` and ``scheduled_reschedule``. Each first reads
ahead over the delayed entries at the subscription's cursor (at most ``schedule_ahead`` of
them) so the index is complete while no consumer reads."""

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
    "ScheduledHistogram",
    "ScheduledList",
    "scheduled_cancel",
    "scheduled_histogram",
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
    """One page of a subscription's schedule, how many it holds in all and how many are
    due in the window asked for; ``found`` is False when there is no such subscription."""

    found: bool
    total: int = 0
    in_window: int = 0
    entries: tuple[ScheduledEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class ScheduledHistogram:
    """How many scheduled messages are due in each bucket, before the first and from the
    end of the last (``before + sum(counts) + after == total``); ``found`` is False when
    there is no such subscription."""

    found: bool
    total: int = 0
    before: int = 0
    after: int = 0
    counts: tuple[int, ...] = ()


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
    start: int | None = None,
    end: int | None = None,
) -> asyncio.Future[ScheduledList]:
    """Up to ``limit`` scheduled entries from ``offset``, earliest deliver-at first, of
    those due at or after ``start`` and before ``end`` (ms; None: no bound); their message
    ids carry ``partition``."""

    def decode(reply: list[Any]) -> ScheduledList:
        if int(reply[0]) != 0:
            return ScheduledList(False)
        entries = tuple(
            ScheduledEntry(
                StoredEntry.parse(reply[i], reply[i + 2], partition), _score(reply[i + 1])
            )
            for i in range(3, len(reply), 3)
        )
        return ScheduledList(True, int(reply[1]), int(reply[2]), entries)

    low = "-inf" if start is None else str(start)
    high = "+inf" if end is None else f"({end}"
    return lane.eval(
        SCRIPTS["scheduled_list"],
        keys.all,
        [subscription, offset, limit, schedule_ahead, low, high],
        decode,
    )


def _histogram(reply: list[Any]) -> ScheduledHistogram:
    if int(reply[0]) != 0:
        return ScheduledHistogram(False)
    counts = tuple(int(count) for count in reply[4:])
    return ScheduledHistogram(True, int(reply[1]), int(reply[2]), int(reply[3]), counts)


def scheduled_histogram(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    bounds: list[int],
    schedule_ahead: int,
) -> asyncio.Future[ScheduledHistogram]:
    """How many scheduled entries are due in each bucket ``[bounds[i], bounds[i + 1])``
    (ms, increasing; at least two bounds)."""
    return lane.eval(
        SCRIPTS["scheduled_histogram"],
        keys.all,
        [subscription, schedule_ahead, *bounds],
        _histogram,
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
