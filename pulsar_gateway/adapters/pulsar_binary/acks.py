"""What an ACK asks of a consumer, as data (:func:`ack_calls`), and the core calls that
carry it out (:func:`acknowledge`).

The forms a client sends (Pulsar's ``CommandAck``, docs/binary_protocol.md "Consuming,
acknowledging, seeking"):

* individual: each ``(L, E)`` is acked whole, unless it carries an ``ack_set``: a partly
  acknowledged batch (batch-index ack), whose cleared bits only are acked;
* cumulative ``(L, E)``: everything up to and including the entry;
* cumulative ``(L, E)`` with an ``ack_set``: everything before the entry, and the entry's
  cleared bits;
* cumulative ``(L, -1)``: everything before ``(L, 0)`` (the client's id of "before the
  first entry of ledger L"); ids with a negative ledger ack nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any, NamedTuple

from pulsar_gateway.adapters.pulsar_binary.commands import Ack
from pulsar_gateway.core import ConsumerHandle, previous_stream_id, stream_id

__all__ = ["AckCalls", "ack_calls", "acknowledge"]


class AckCalls(NamedTuple):
    """The core calls one ACK makes (each empty or None when not made)."""

    #: stream ids acknowledged whole (``ConsumerHandle.ack``)
    whole: list[bytes]
    #: (stream id, ack set) of partly acknowledged batches (``ack_batch_indexes``)
    batch_indexes: list[tuple[bytes, tuple[int, ...]]]
    #: everything up to and including this stream id (``ack_cumulative``)
    cumulative: bytes | None = None


def ack_calls(cmd: Ack) -> AckCalls:
    """The calls ACK ``cmd`` asks for."""
    if cmd.cumulative:
        return _cumulative(cmd)
    whole: list[bytes] = []
    partial: list[tuple[bytes, tuple[int, ...]]] = []
    ack_sets = cmd.ack_sets
    for i, (ledger, entry) in enumerate(cmd.message_ids):
        if ledger < 0 or entry < 0:
            continue
        ack_set = ack_sets.get(i) if ack_sets else None
        if ack_set:
            partial.append((stream_id(ledger, entry), ack_set))
        else:
            whole.append(stream_id(ledger, entry))
    return AckCalls(whole, partial)


def _cumulative(cmd: Ack) -> AckCalls:
    if not cmd.message_ids:
        return AckCalls([], [])
    ledger, entry = cmd.message_ids[0]
    if ledger < 0:
        return AckCalls([], [])
    ack_set = cmd.ack_sets.get(0)
    upto = previous_stream_id(ledger, entry) if entry < 0 or ack_set else stream_id(ledger, entry)
    if upto is None:
        return AckCalls([], [])
    partial = [(stream_id(ledger, entry), ack_set)] if ack_set and entry >= 0 else []
    return AckCalls([], partial, upto)


def acknowledge(consumer: ConsumerHandle, calls: AckCalls) -> asyncio.Future[Any] | None:
    """Make ``calls`` on ``consumer``: one future, done when all are and failed if any
    fails (an ACK_RESPONSE must not report success while one of them failed); None when
    the ACK asked for nothing.

    Raises:
        GatewayError: the consumer refuses the form (a cumulative ack on Shared or
            Key_Shared).
    """
    made: list[asyncio.Future[int]] = []
    if calls.cumulative is not None:
        made.append(consumer.ack_cumulative(calls.cumulative))
    if calls.whole:
        made.append(consumer.ack(calls.whole))
    if calls.batch_indexes:
        made.append(consumer.ack_batch_indexes(calls.batch_indexes))
    if not made:
        return None
    if len(made) == 1:
        return made[0]
    joined = asyncio.gather(*made)
    # an ACK without a request id is never answered: its failure is the consumer's
    # business (it is abandoned), not an error nobody retrieved
    joined.add_done_callback(_retrieve)
    return joined


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
