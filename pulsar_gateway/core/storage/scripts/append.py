"""Typed call of ``append_entry.lua``: every append to a persistent topic, in the topic's
current ledger (consecutive entry ids, rolled over as Pulsar rolls ledgers), with the
deduplication and fencing checks when the producer needs them."""

from __future__ import annotations

import asyncio
from typing import Final

from pulsar_gateway.core.storage.keys import TopicKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner

__all__ = ["DUPLICATE", "FENCED", "append_entry"]

#: What the append resolves with for a duplicate: nothing stored, the client still gets a
#: receipt, for message id ``(-1, -1)`` as Pulsar answers (``MessageDupStatus.Dup``).
DUPLICATE: Final = None
#: What the append resolves with when an ExclusiveWithFencing producer took the topic from
#: this exclusive producer: nothing stored, the producer must close.
FENCED: Final = 0

_SCRIPT = SCRIPTS["append_entry"]


def _optional(value: int | str | None) -> int | str:
    return "" if value is None else value


def append_entry(
    lane: ScriptRunner,
    keys: TopicKeys,
    *,
    blob: bytes,
    num_messages: int,
    rollover: str,
    key_hash: int | None = None,
    chunk: str | None = None,
    deliver_at: int | None = None,
    producer_name: str | None = None,
    sequence_id: int | None = None,
    record: int | None = None,
    topic_epoch: int | None = None,
) -> asyncio.Future[bytes | int | None]:
    """Append one entry (after the checks asked for), atomically.

    Args:
        rollover: the ledger rollover limits
            (:attr:`pulsar_gateway.core.model.ledger.LedgerRollover.argument`).
        key_hash, chunk, deliver_at: the entry's ``h``, ``u`` and ``d`` fields, if any.
        producer_name: the producer's name when deduplication is on, else None.
        sequence_id: ``CommandSend.sequence_id`` (deduplication).
        record: the highest sequence id to record (a batch's last), None for a chunk that
            is not its message's last.
        topic_epoch: the exclusive producer's topic epoch (fencing check), None to skip it.

    Returns:
        A future of the new stream id, :data:`DUPLICATE` or :data:`FENCED`.
    """
    return lane.eval(
        _SCRIPT,
        [keys.stream, keys.ledger, keys.last_sequence_ids, keys.topic_epoch],
        [
            blob,
            num_messages if num_messages > 1 else "",
            _optional(topic_epoch),
            producer_name or "",
            _optional(sequence_id),
            _optional(record),
            _optional(key_hash),
            _optional(chunk),
            _optional(deliver_at),
            rollover,
        ],
        _appended,
    )


def _appended(reply: bytes | int | None) -> bytes | int | None:
    return reply
