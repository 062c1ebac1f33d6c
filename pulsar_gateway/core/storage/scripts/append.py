"""Typed call of ``append_entries.lua``: every append to a persistent topic, in the topic's
current ledger (consecutive entry ids, rolled over as Pulsar rolls ledgers), each entry
after the deduplication and fencing checks its producer needs. One call carries the entries
one producer appended during one event-loop tick."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final

from pulsar_gateway.core.storage.keys import TopicKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner

__all__ = ["DUPLICATE", "FENCED", "append_entries", "entry_options"]

#: What an append resolves with for a duplicate: nothing stored, the client still gets a
#: receipt, for message id ``(-1, -1)`` as Pulsar answers (``MessageDupStatus.Dup``).
DUPLICATE: Final = None
#: What an append resolves with when an ExclusiveWithFencing producer took the topic from
#: this exclusive producer: nothing stored, the producer must close.
FENCED: Final = 0

_SCRIPT = SCRIPTS["append_entries"]


def entry_options(
    *,
    num_messages: int = 1,
    topic_epoch: int | None = None,
    sequence_id: int | None = None,
    record: int | None = None,
    key_hash: int | None = None,
    deliver_at: int | None = None,
    chunk: str | None = None,
    producer_name: str | None = None,
) -> str:
    """The options of one entry as ``append_entries.lua`` takes them (``""`` when it has
    none: a single message without key, delay or checks).

    Args:
        num_messages: messages in the entry (stored when more than one).
        topic_epoch: the exclusive producer's topic epoch (fencing check).
        sequence_id, record, producer_name: deduplication: ``CommandSend.sequence_id``,
            the highest sequence id to record (None for a chunk that is not its message's
            last) and the producer's name.
        key_hash, deliver_at, chunk: the entry's ``h``, ``d`` and ``u`` fields.
    """
    fields = (num_messages if num_messages > 1 else None, topic_epoch, sequence_id, record)
    numbers = ",".join("" if v is None else str(v) for v in (*fields, key_hash, deliver_at))
    chunk = chunk or ""
    options = f"{numbers},{len(chunk)},{chunk}{producer_name or ''}"
    return "" if options == ",,,,,,0," else options


def append_entries(
    lane: ScriptRunner,
    keys: TopicKeys,
    *,
    rollover: str,
    entries: Sequence[tuple[bytes, str, int]],
) -> asyncio.Future[list[bytes | int | None]]:
    """Append ``entries`` (blob, :func:`entry_options` and publish time each) in order,
    atomically.

    Args:
        rollover: the ledger rollover limits
            (:attr:`pulsar_gateway.core.model.ledger.LedgerRollover.argument`).
        entries: per entry its stored blob, its options and the producer's
            ``MessageMetadata.publish_time`` (ms; 0 when unknown: none is stored).

    Returns:
        A future of one result per entry: its stream id, :data:`DUPLICATE` or
        :data:`FENCED`.
    """
    args: list[Any] = [rollover]
    for blob, options, publish_time in entries:
        args += (blob, options, publish_time)
    return lane.eval(
        _SCRIPT,
        [keys.stream, keys.ledger, keys.last_sequence_ids, keys.topic_epoch],
        args,
        _appended,
    )


def _appended(reply: list[bytes | int | None]) -> list[bytes | int | None]:
    return reply
