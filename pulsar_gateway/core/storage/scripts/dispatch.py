"""Typed calls of the dispatch scripts: ``dispatch.lua`` (Exclusive, Shared, Failover),
``dispatch_key_shared.lua`` and ``dispatch_compacted.lua``, which share one reply format,
and ``settle_read.lua``, which settles what a native read may not deliver (the read itself,
and what it may deliver, is :mod:`pulsar_gateway.core.consuming.native_read`).

This is the consume hot path: the reply is decoded in one pass, reading only the entry
fields a consumer needs (the blob and the batch size; the deliver-at time of an entry read
natively).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pulsar_gateway.core.model.entry import (
    BLOB,
    DELIVER_AT,
    NUM_MESSAGES,
    Delivery,
    decode_ack_set,
)
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.storage.keys import SubscriptionKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner, text

__all__ = [
    "NO_UNACKED_LIMITS",
    "DispatchReply",
    "DispatchStatus",
    "SettleReply",
    "UnackedArgs",
    "decode_dispatch",
    "delivery_fields",
    "dispatch",
    "dispatch_compacted",
    "dispatch_key_shared",
    "settle_read",
]

_DISPATCH = SCRIPTS["dispatch"]
_KEY_SHARED = SCRIPTS["dispatch_key_shared"]
_COMPACTED = SCRIPTS["dispatch_compacted"]
_SETTLE = SCRIPTS["settle_read"]


#: ``unacked_limits`` of the dispatch calls: consumer limit, consumer blocked (1/0),
#: subscription limit, subscription blocked (1/0); a limit of 0 is none.
UnackedArgs = tuple[int, int, int, int]
NO_UNACKED_LIMITS: UnackedArgs = (0, 0, 0, 0)


class DispatchStatus(enum.IntEnum):
    """The first item of every dispatch reply."""

    OK = 0
    #: the consumer's lease expired and it was reaped: close it
    CONSUMER_GONE = 2
    #: Failover: the consumer asking is not the active one (``active`` names it)
    NOT_ACTIVE = 6
    #: Shared, Key_Shared: over an unacked limit (``unacked``, ``consumer_blocked``,
    #: ``subscription_blocked`` say which)
    BLOCKED = 7
    #: ``dispatch_compacted.lua``: nothing at or before the horizon, use :func:`dispatch`
    NOT_COMPACTED = 100


@dataclass(slots=True)
class DispatchReply:
    """What one dispatch call did. (Not frozen: one is built per dispatch round, and a
    frozen dataclass's construction, or a ``dataclasses.replace``, costs 1.4-2.8 µs; the
    native read completes the script's reply in place before anyone else sees it.)

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
        now_ms: Redis's clock when the script ran.
        drained: a native read (:mod:`pulsar_gateway.core.consuming.native_read`) found no
            more new entries; None
            for a script's reply (the caller judges by the messages it got).
        settled: a native read's ``settle_read.lua`` call, when entries had to be handed
            back or scheduled; None otherwise.
        unacked: with BLOCKED, the consumer's and the subscription's unacked entries.
        consumer_blocked, subscription_blocked: with BLOCKED, which limit they are over.
        room: entries the consumer may still get under the unacked limits after this
            reply's deliveries (-1: no limit); a native read delivers no more.
    """

    status: DispatchStatus
    wake_fleet: bool = False
    next_due_ms: int = -1
    lateness_ms: list[int] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    active: str = ""
    now_ms: int = 0
    drained: bool | None = None
    settled: asyncio.Future[SettleReply] | None = None
    unacked: tuple[int, int] = (0, 0)
    consumer_blocked: bool = False
    subscription_blocked: bool = False
    room: int = -1


@dataclass(frozen=True, slots=True)
class SettleReply:
    """What ``settle_read.lua`` did: ``wake_fleet`` and ``next_due_ms`` as
    :class:`DispatchReply`'s."""

    wake_fleet: bool
    next_due_ms: int


def decode_dispatch(reply: list[Any]) -> DispatchReply:
    """``{code, moved, next_due, lateness, now, room, (id, fields, redelivery_count, ack
    set)...}`` -> :class:`DispatchReply`."""
    status = DispatchStatus(reply[0])
    if status is DispatchStatus.NOT_ACTIVE:
        return DispatchReply(status, active=text(reply[1]))
    if status is DispatchStatus.BLOCKED:
        return DispatchReply(
            status,
            unacked=(int(reply[1]), int(reply[2])),
            consumer_blocked=bool(reply[3]),
            subscription_blocked=bool(reply[4]),
        )
    if status is not DispatchStatus.OK:
        return DispatchReply(status)
    deliveries: list[Delivery] = []
    for i in range(6, len(reply), 4):
        blob, num, _ = delivery_fields(reply[i + 1])
        delivery = Delivery(reply[i], blob, num, int(reply[i + 2]))
        ack_set = reply[i + 3]
        if ack_set:
            delivery.ack_set = decode_ack_set(ack_set)
            delivery.num_messages = ack_set.count(b"1")
        deliveries.append(delivery)
    return DispatchReply(
        status,
        bool(reply[1]),
        int(reply[2]),
        reply[3],
        deliveries,
        now_ms=int(reply[4]),
        room=int(reply[5]),
    )


def delivery_fields(fields: list[bytes]) -> tuple[bytes, int, int | None]:
    """An entry's blob, number of messages and deliver-at time (None: none) from its flat
    field list (as a script or ``XREADGROUP`` returns it); the only fields a delivery
    reads."""
    blob = b""
    num = 1
    at = None
    for j in range(0, len(fields), 2):
        name = fields[j]
        if name == BLOB:
            blob = fields[j + 1]
        elif name == NUM_MESSAGES:
            num = int(fields[j + 1])
        elif name == DELIVER_AT:
            at = int(fields[j + 1])
    return blob, num, at


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
    new_entries: bool = True,
    unacked_limits: UnackedArgs = NO_UNACKED_LIMITS,
) -> asyncio.Future[DispatchReply]:
    """Hand up to ``permits`` messages of an Exclusive, Shared or Failover subscription to
    ``consumer`` (its uid): redeliveries first, then due scheduled messages, then new
    entries (unless ``new_entries`` is False: the caller reads them natively).
    ``messages_per_entry`` sizes the first read; ``partition`` picks the active Failover
    consumer of a partition (-1 for none). ``unacked_limits``: on Shared, the consumer's
    unacked limit and whether it is blocked, the subscription's and whether it is (a limit
    of 0 is none): over them nothing is sent (BLOCKED), and no more than the room they
    leave."""
    args = _args(
        subscription, consumer, permits, messages_per_entry, lease_ms, int(subscription_type)
    )
    # ARGV[8]: 1 when the caller reads new entries natively; ARGV[9..12]: unacked limits
    args += (partition, 0 if new_entries else 1, *unacked_limits)
    return lane.eval(_DISPATCH, keys.all, args, decode_dispatch)


def settle_read(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    subscription: str,
    consumer: str,
    last_read: bytes,
    hand_back: Sequence[bytes],
    schedule: Sequence[tuple[bytes, int]],
) -> asyncio.Future[SettleReply]:
    """``settle_read.lua``: un-read ``hand_back`` (the run at the end of a read whose last
    id was ``last_read``), or park it if the cursor moved on since; schedule each ``(id,
    deliver-at)`` of ``schedule``; only ids still pending at ``consumer``. Removes
    ``consumer`` from the group if it is no longer registered."""
    args: list[bytes | str | int] = [
        subscription,
        consumer,
        last_read,
        len(hand_back),
        *hand_back,
    ]
    for stream_id, at in schedule:
        args += (stream_id, at)
    return lane.eval(_SETTLE, keys.all, args, _decode_settle)


def _decode_settle(reply: list[Any]) -> SettleReply:
    return SettleReply(bool(reply[0]), int(reply[1]))


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
    unacked_limits: UnackedArgs = NO_UNACKED_LIMITS,
) -> asyncio.Future[DispatchReply]:
    """:func:`dispatch` for a Key_Shared subscription: each key only to the consumer whose
    hash range covers it, in order; ``unacked_limits`` as :func:`dispatch`'s."""
    return lane.eval(
        _KEY_SHARED,
        keys.all,
        _args(subscription, consumer, permits, messages_per_entry, lease_ms, *unacked_limits),
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
