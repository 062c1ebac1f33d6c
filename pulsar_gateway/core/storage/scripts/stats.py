"""Typed calls of the stats scripts: ``topic_stats`` (the admin stats and ``/metrics``) and
``internal_stats`` (the admin internalStats). Both read one topic partition in one step, so
every gateway reports the same figures."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from pulsar_gateway.core.storage.keys import TopicKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner, text

__all__ = [
    "CompactedFacts",
    "CursorFacts",
    "InternalStatsReply",
    "StreamFacts",
    "internal_stats",
    "topic_stats",
]


def _json(reply: bytes | str) -> dict[str, Any]:
    value: dict[str, Any] = orjson.loads(reply)
    return value


def topic_stats(
    lane: ScriptRunner, keys: TopicKeys, *, subscriptions: Sequence[str]
) -> asyncio.Future[dict[str, Any]]:
    """What Redis holds of the topic partition and of ``subscriptions`` (the names just
    read from its subscriptions hash), with every gateway's rate report: the JSON
    ``topic_stats.lua`` documents (``length``, ``added``, ``size``, ``producers``,
    ``reports``, ``subs`` ...)."""
    script_keys = [keys.stream, keys.subscriptions, keys.gateway_stats, keys.producers]
    for name in subscriptions:
        script_keys += [keys.consumers(name), keys.consumer_info(name)]
    return lane.eval(SCRIPTS["topic_stats"], script_keys, list(subscriptions), _json)


@dataclass(frozen=True, slots=True)
class StreamFacts:
    """The stream: length, last generated id, entries ever added (-1 before Redis 7),
    first and last ids (``b""`` when empty) and memory usage in bytes."""

    length: int
    last_generated: bytes
    added: int
    first_id: bytes
    last_id: bytes
    size: int


@dataclass(frozen=True, slots=True)
class LedgerFacts:
    """A ledger still in the stream: its id and the entry ids of its first and last stored
    entries."""

    ledger_id: int
    first_entry: int
    last_entry: int


@dataclass(frozen=True, slots=True)
class CurrentLedger:
    """The ledger appends go to: its id (None before the first append), entries and blob
    bytes written to it."""

    ledger_id: int | None
    entries: int
    size: int


@dataclass(frozen=True, slots=True)
class CompactedFacts:
    """The compacted view: entries and memory usage."""

    length: int
    size: int


@dataclass(frozen=True, slots=True)
class CursorFacts:
    """One subscription's cursor.

    Attributes:
        mark_delete: the id before which everything is acknowledged (``b""``: before the
            first entry).
        first_unacked: ``b""`` when nothing is pending.
        read_position: the first entry after the group's cursor (``b""``: past the end).
        live_consumers: consumers with a live lease.
        since_first_unacked: entries from the first unacknowledged one to the cursor
            (at most 10,000 counted), plus the read position's entry.
        acked_ranges: acknowledged runs among those 10,000, as (after id, last id) pairs.
    """

    name: str
    pending: int
    last_delivered: bytes
    entries_read: int
    mark_delete: bytes
    first_unacked: bytes
    read_position: bytes
    live_consumers: int
    since_first_unacked: int
    acked_ranges: tuple[tuple[bytes, bytes], ...]


@dataclass(frozen=True, slots=True)
class InternalStatsReply:
    """``stream`` is None when the topic partition has no stream (then nothing else is
    known but ``terminated``): the id of its last entry when it was terminated (``b""``
    when it had none), else None."""

    stream: StreamFacts | None
    compacted: CompactedFacts | None
    cursors: tuple[CursorFacts, ...]
    current_ledger: CurrentLedger
    ledgers: tuple[LedgerFacts, ...]
    terminated: bytes | None


def _terminated(mark: bytes | str) -> bytes | None:
    """The ledger hash's ``x`` as the script answers it ('' not terminated, '-' no entry)."""
    raw = mark.encode() if isinstance(mark, str) else mark
    if not raw:
        return None
    return b"" if raw == b"-" else raw


def _internal_reply(reply: list[Any]) -> InternalStatsReply:
    if len(reply) == 1:
        return InternalStatsReply(
            None, None, (), CurrentLedger(None, 0, 0), (), _terminated(reply[0])
        )
    stream, compacted, cursors, ledger_rows, terminated = reply
    length, last_generated, added, first_id, last_id, size = stream
    rows = []
    for row in cursors:
        name, pending, last, read_count, md, first_unacked, read, live, since, ranges = row
        rows.append(
            CursorFacts(
                text(name),
                int(pending),
                last,
                int(read_count),
                md,
                first_unacked,
                read,
                int(live),
                int(since),
                tuple((ranges[i], ranges[i + 1]) for i in range(0, len(ranges), 2)),
            )
        )
    return InternalStatsReply(
        StreamFacts(int(length), last_generated, int(added), first_id, last_id, int(size)),
        CompactedFacts(int(compacted[0]), int(compacted[1])) if compacted else None,
        tuple(rows),
        CurrentLedger(
            int(ledger_rows[0]) if ledger_rows[0] else None,
            int(ledger_rows[1]),
            int(ledger_rows[2]),
        ),
        tuple(
            LedgerFacts(int(ledger_rows[i]), int(ledger_rows[i + 1]), int(ledger_rows[i + 2]))
            for i in range(3, len(ledger_rows), 3)
        ),
        _terminated(terminated),
    )


def internal_stats(
    lane: ScriptRunner, keys: TopicKeys, *, subscriptions: Sequence[str]
) -> asyncio.Future[InternalStatsReply]:
    """The storage and cursor facts of the topic partition (``stream`` None when it has no
    stream) and its terminated mark; ``subscriptions`` without a consumer group
    (non-persistent ones) are skipped."""
    script_keys = [
        keys.stream,
        keys.compacted,
        keys.ledger,
        *(keys.consumers(n) for n in subscriptions),
    ]
    return lane.eval(SCRIPTS["internal_stats"], script_keys, list(subscriptions), _internal_reply)
