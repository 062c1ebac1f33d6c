"""Typed calls of the acknowledgement scripts: ``ack_batch_index``, ``cumulative_ack`` and
``redeliver`` (individual acks are a plain ``XACK`` on the hot path)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pulsar_gateway.core.model.entry import encode_ack_set
from pulsar_gateway.core.storage.keys import SubscriptionKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner

__all__ = ["ack_batch_index", "cumulative_ack", "redeliver"]


def ack_batch_index(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    acks: Sequence[tuple[bytes, Sequence[int]]],
) -> asyncio.Future[int]:
    """Batch-index acks (``CommandAck`` ids with an ``ack_set``): for each ``(stream id,
    ack set words)`` the batch's messages whose bit is clear are acknowledged, the entry
    itself once none is left. Resolves with the entries fully acknowledged."""
    args: list[bytes | str] = [subscription]
    for stream_id, words in acks:
        args += [stream_id, encode_ack_set(words) or "0"]
    return lane.eval(SCRIPTS["ack_batch_index"], [keys.stream, keys.ack_sets], args, int)


def cumulative_ack(
    lane: ScriptRunner, keys: SubscriptionKeys, *, subscription: str, upto: bytes
) -> asyncio.Future[int]:
    """Acknowledge everything up to and including stream id ``upto``; resolves with the
    pending entries acknowledged."""
    return lane.eval(
        SCRIPTS["cumulative_ack"], [keys.stream, keys.ack_sets], [subscription, upto], int
    )


def redeliver(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    consumer: str,
    stream_ids: Sequence[bytes] = (),
) -> asyncio.Future[int]:
    """Give ``consumer``'s unacked entries ``stream_ids`` (every one when empty) back for
    redelivery; resolves with the entries parked."""
    return lane.eval(SCRIPTS["redeliver"], keys.all, [subscription, consumer, *stream_ids], int)
