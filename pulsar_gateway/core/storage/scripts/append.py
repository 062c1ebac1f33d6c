"""Typed call of ``append_entries.lua``: every append to a persistent topic, in the topic's
current ledger (consecutive entry ids, rolled over as Pulsar rolls ledgers), each entry
after the deduplication and fencing checks its producer needs. One call carries the entries
one producer appended during one event-loop tick."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from pulsar_gateway.core.storage.keys import TopicKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner

__all__ = ["AppendOutcome", "AppendStatus", "append_entries", "entry_options", "stored"]


class AppendStatus(enum.Enum):
    """What became of one appended entry."""

    #: stored as ``(ledger_id, entry_id)``
    STORED = "stored"
    #: a duplicate (deduplication): nothing stored; the client still gets a receipt, for
    #: message id ``(-1, -1)`` as Pulsar answers (``MessageDeduplication`` ``Dup``)
    DUPLICATE = "duplicate"
    #: nothing stored and the producer must close: an ExclusiveWithFencing producer took
    #: the topic from this exclusive producer, or the topic is terminated (Pulsar's
    #: ``ProducerFencedException``, ``TopicTerminatedException``); the producer's next
    #: PRODUCER learns which
    REFUSED = "refused"


class AppendOutcome(NamedTuple):
    """One entry's outcome: its status and, when stored, its position (``-1, -1``
    otherwise, the id of a duplicate's receipt)."""

    status: AppendStatus
    ledger_id: int = -1
    entry_id: int = -1


_STORED: Final = AppendStatus.STORED
_DUPLICATE: Final = AppendOutcome(AppendStatus.DUPLICATE)
_REFUSED: Final = AppendOutcome(AppendStatus.REFUSED)
_new = tuple.__new__
_SCRIPT = SCRIPTS["append_entries"]


def stored(ledger_id: int, entry_id: int) -> AppendOutcome:
    """The outcome of an entry stored at ``(ledger_id, entry_id)``."""
    return _new(AppendOutcome, (_STORED, ledger_id, entry_id))


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
) -> asyncio.Future[list[AppendOutcome]]:
    """Append ``entries`` (blob, :func:`entry_options` and publish time each) in order,
    atomically.

    Args:
        rollover: the ledger rollover limits
            (:attr:`pulsar_gateway.core.model.ledger.LedgerRollover.argument`).
        entries: per entry its stored blob, its options and the producer's
            ``MessageMetadata.publish_time`` (ms; 0 when unknown: none is stored).

    Returns:
        A future of one outcome per entry, in order.
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


def _appended(reply: list[bytes | int | None]) -> list[AppendOutcome]:
    """The script answers per entry its stream id, ``false`` (nil) for a duplicate, or 0
    when refused."""
    outcomes: list[AppendOutcome] = []
    append = outcomes.append
    for result in reply:
        if type(result) is bytes:
            # parse_stream_id inlined: this runs for every appended entry
            ms, _, seq = result.partition(b"-")
            append(_new(AppendOutcome, (_STORED, int(ms), int(seq))))
        elif result is None:
            append(_DUPLICATE)
        else:
            append(_REFUSED)
    return outcomes
