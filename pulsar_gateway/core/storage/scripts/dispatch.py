"""Typed calls of the dispatch scripts: ``dispatch.lua`` (Exclusive, Shared, Failover),
``dispatch_key_shared.lua`` and ``dispatch_compacted.lua``, which share one reply format.

This is the consume hot path: the reply is decoded in one pass, reading only the two entry
fields a consumer needs (the blob and the batch size).
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from typing import Any

from pulsar_gateway.core.model.entry import BLOB, NUM_MESSAGES, Delivery, decode_ack_set
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.storage.keys import SubscriptionKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner, text

__all__ = [
    "DispatchReply",
    "DispatchStatus",
    "decode_dispatch",
    "dispatch",
    "dispatch_compacted",
    "dispatch_key_shared",
]

_DISPATCH = SCRIPTS["dispatch"]
_KEY_SHARED = SCRIPTS["dispatch_key_shared"]
_COMPACTED = SCRIPTS["dispatch_compacted"]


class DispatchStatus(enum.IntEnum):
    """The first item of every dispatch reply."""

    OK = 0
    #: the consumer's lease expired and it was reaped: close it
    CONSUMER_GONE = 2
    #: Failover: the consumer asking is not the active one (``active`` names it)
    NOT_ACTIVE = 6
    #: ``dispatch_compacted.lua``: nothing at or before the horizon, use :func:`dispatch`
    NOT_COMPACTED = 100


@dataclass(frozen=True, slots=True)
class DispatchReply:
    """What one dispatch call did.

    Attributes:
        status: see :class:`DispatchStatus`.
        wake_fleet: entries were queued for consumers elsewhere (Key_Shared) or scheduled
            ahead of the earliest scheduled one: other gateways must be woken.
        next_due_ms: ms until the subscription's earliest scheduled message is due (Redis's
            clock), 0 = call again now, -1 = none scheduled.
        lateness_ms: for each scheduled message this call took out of the index, ms between
            its deliver-at time and then (Redis's clock): never negative, as none is early.
        deliveries: the entries handed to the consumer, in order.
        active: with NOT_ACTIVE, the active Failover consumer's uid (``""``: none known).
    """

    status: DispatchStatus
    wake_fleet: bool = False
    next_due_ms: int = -1
    lateness_ms: list[int] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    active: str = ""


def decode_dispatch(reply: list[Any]) -> DispatchReply:
    """``{code, moved, next_due, lateness, (id, fields, redelivery_count, ack set)...}`` ->
    :class:`DispatchReply`."""
    status = DispatchStatus(reply[0])
    if status is DispatchStatus.NOT_ACTIVE:
        return DispatchReply(status, active=text(reply[1]))
    if status is not DispatchStatus.OK:
        return DispatchReply(status)
    deliveries: list[Delivery] = []
    for i in range(4, len(reply), 4):
        fields = reply[i + 1]
        blob = b""
        num = 1
        for j in range(0, len(fields), 2):
            name = fields[j]
            if name == BLOB:
                blob = fields[j + 1]
            elif name == NUM_MESSAGES:
                num = int(fields[j + 1])
        delivery = Delivery(reply[i], blob, num, int(reply[i + 2]))
        ack_set = reply[i + 3]
        if ack_set:
            delivery.ack_set = decode_ack_set(ack_set)
            delivery.num_messages = ack_set.count(b"1")
        deliveries.append(delivery)
    return DispatchReply(status, bool(reply[1]), int(reply[2]), reply[3], deliveries)


def dispatch(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    consumer: str,
    permits: int,
    messages_per_entry: float,
    lease_ms: int,
    subscription_type: SubscriptionType,
    partition: int,
) -> asyncio.Future[DispatchReply]:
    """Hand up to ``permits`` messages of an Exclusive, Shared or Failover subscription to
    ``consumer`` (its uid): redeliveries first, then due scheduled messages, then new
    entries. ``messages_per_entry`` sizes the first read; ``partition`` picks the active
    Failover consumer of a partition (-1 for none)."""
    return lane.eval(
        _DISPATCH,
        keys.all,
        _args(
            subscription,
            consumer,
            permits,
            messages_per_entry,
            lease_ms,
            int(subscription_type),
            partition,
        ),
        decode_dispatch,
    )


def _args(
    subscription: str,
    consumer: str,
    permits: int,
    messages_per_entry: float,
    lease_ms: int,
    *more: int,
) -> list[str | int]:
    """ARGV of the dispatch scripts: 1..5 are common to the three, ``more`` follows."""
    return [subscription, consumer, permits, f"{messages_per_entry:.3f}", lease_ms, *more]


def dispatch_key_shared(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    consumer: str,
    permits: int,
    messages_per_entry: float,
    lease_ms: int,
) -> asyncio.Future[DispatchReply]:
    """:func:`dispatch` for a Key_Shared subscription: each key only to the consumer whose
    hash range covers it, in order."""
    return lane.eval(
        _KEY_SHARED,
        keys.all,
        _args(subscription, consumer, permits, messages_per_entry, lease_ms),
        decode_dispatch,
    )


def dispatch_compacted(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    compaction: str,
    compacted: str,
    subscription: str,
    consumer: str,
    permits: int,
    messages_per_entry: float,
    lease_ms: int,
    subscription_type: SubscriptionType,
    partition: int,
) -> asyncio.Future[DispatchReply]:
    """:func:`dispatch` for a read_compacted subscription at or before the compaction
    horizon, from the compacted view (``compaction``: the topic's compaction hash,
    ``compacted``: the view's stream). Answers NOT_COMPACTED past the horizon."""
    return lane.eval(
        _COMPACTED,
        [*keys.all, compaction, compacted],
        _args(
            subscription,
            consumer,
            permits,
            messages_per_entry,
            lease_ms,
            int(subscription_type),
            partition,
        ),
        decode_dispatch,
    )
