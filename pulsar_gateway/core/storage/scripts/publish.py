"""Typed call of ``publish_checked.lua``: an append with the deduplication and fencing
checks a plain ``XADD`` cannot make (a Shared producer without deduplication appends with a
plain ``XADD`` of :func:`pulsar_gateway.core.model.entry.entry_fields`, the hot path)."""

from __future__ import annotations

import asyncio
from typing import Final

from pulsar_gateway.core.storage.keys import TopicKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner

__all__ = ["DUPLICATE", "FENCED", "publish_checked"]

#: What the append resolves with for a duplicate: nothing stored, the client still gets a
#: receipt, for message id ``(-1, -1)`` as Pulsar answers (``MessageDupStatus.Dup``).
DUPLICATE: Final = None
#: What the append resolves with when an ExclusiveWithFencing producer took the topic from
#: this exclusive producer: nothing stored, the producer must close.
FENCED: Final = 0


def _optional(value: int | str | None) -> int | str:
    return "" if value is None else value


def publish_checked(
    lane: ScriptRunner,
    keys: TopicKeys,
    *,
    blob: bytes,
    num_messages: int,
    sequence_id: int,
    producer_name: str | None,
    record: int | None,
    topic_epoch: int | None,
    key_hash: int | None,
    chunk: str | None,
    deliver_at: int | None,
) -> asyncio.Future[bytes | int | None]:
    """Append one entry after the checks, atomically.

    Args:
        producer_name: the producer's name when deduplication is on, else None.
        sequence_id: ``CommandSend.sequence_id``.
        record: the highest sequence id to record (a batch's last), None for a chunk that
            is not its message's last.
        topic_epoch: the exclusive producer's topic epoch (fencing check), None to skip it.
        key_hash, chunk, deliver_at: the entry's ``h``, ``u`` and ``d`` fields, if any.

    Returns:
        A future of the new stream id, :data:`DUPLICATE` or :data:`FENCED`.
    """
    return lane.eval(
        SCRIPTS["publish_checked"],
        [keys.stream, keys.last_sequence_ids, keys.topic_epoch],
        [
            blob,
            num_messages if num_messages > 1 else "",
            _optional(topic_epoch),
            producer_name or "",
            sequence_id,
            _optional(record),
            _optional(key_hash),
            _optional(chunk),
            _optional(deliver_at),
        ],
        _appended,
    )


def _appended(reply: bytes | int | None) -> bytes | int | None:
    return reply
