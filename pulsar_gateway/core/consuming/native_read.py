"""The native read: a dispatch round whose new entries reach the gateway without passing
through Lua, and what of them the consumer may have.

``dispatch.lua`` (with its ARGV[8] = 1) renews the consumer's lease, checks the Failover
consumer and hands out redeliveries and due scheduled messages; ``XREADGROUP ... >``
follows it in the same pipeline (:func:`.topic_store.read_new_entries`), so Redis's cost
per consumed message about halves (``bench/bench.py``). The dispatch policy for the entries
read is this module's (:func:`settle`): a whole entry while at least one permit is left (as
``dispatch.lua`` itself counts), none when the script refused, none beyond the room the
unacked limits leave, and on Shared none whose deliver-at time is ahead of the script's
clock (PIP-26). The rest is handed to ``settle_read.lua``: entries over the permits or
refused are un-read (or, if another read went past them meanwhile, parked: the next
dispatch hands them out first, so an Exclusive or Failover subscription keeps its order);
delayed ones are scheduled. Until it runs they are pending at the consumer, so a gateway
that dies before leaves them to the reaping of its consumers, and the redelivery path of
``dispatch.lua`` schedules one that is not due rather than deliver it early.
"""

from __future__ import annotations

import asyncio
from typing import Any, NamedTuple

from pulsar_gateway.core.model.entry import BLOB, BROKER_TIME, PUBLISH_TIME, Delivery
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.storage.keys import SubscriptionKeys
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts.dispatch import (
    NO_UNACKED_LIMITS,
    DispatchReply,
    DispatchStatus,
    UnackedArgs,
    delivery_fields,
    dispatch,
    settle_read,
)
from pulsar_gateway.core.storage.topic_store import Entry, read_new_entries

__all__ = ["Settlement", "read_natively", "settle"]


class Settlement(NamedTuple):
    """What :func:`settle` decided for the entries of one native read."""

    #: stream ids to un-read (over the permits, the unacked room, or refused), in order
    hand_back: list[bytes]
    #: ``(stream id, deliver-at)`` of the Shared entries not yet due
    schedule: list[tuple[bytes, int]]


def read_natively(
    lane: Lane,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    consumer: str,
    permits: int,
    messages_per_entry: float,
    lease_ms: int,
    subscription_type: SubscriptionType,
    partition: int,
    unacked_limits: UnackedArgs = NO_UNACKED_LIMITS,
) -> asyncio.Future[DispatchReply]:
    """One dispatch round of :func:`.dispatch.dispatch` with the new entries read natively.

    The reply's deliveries are the script's, then the entries read that the consumer may
    have (:func:`settle`); ``settled`` is the ``settle_read.lua`` call for the rest, if
    any, and ``drained`` tells whether the read reached the end of the stream.
    """
    count = max(1, int(permits / max(messages_per_entry, 1.0)))
    control = dispatch(
        lane,
        keys,
        subscription=subscription,
        consumer=consumer,
        permits=permits,
        messages_per_entry=messages_per_entry,
        lease_ms=lease_ms,
        subscription_type=subscription_type,
        partition=partition,
        new_entries=False,
        unacked_limits=unacked_limits,
    )
    read = read_new_entries(lane, keys, subscription, consumer, count)
    shared = subscription_type is SubscriptionType.SHARED
    result: asyncio.Future[DispatchReply] = asyncio.get_running_loop().create_future()

    def combine(_: asyncio.Future[Any]) -> None:
        if not (control.done() and read.done()):
            return
        # Both outcomes are read, also when the caller gave up on the result, so a failure
        # of each (the subscription deleted under both: NOGROUP) is retrieved, not reported
        # by asyncio as never retrieved.
        errors = [part.exception() for part in (control, read) if not part.cancelled()]
        if result.done():
            return
        if control.cancelled() or read.cancelled():
            # the caller abandons the consumer, which hands back whatever either one left
            # pending at it
            result.cancel()
            return
        if first := next((exc for exc in errors if exc is not None), None):
            result.set_exception(first)
            return
        try:
            reply, entries = control.result(), read.result()
            hand_back, schedule = settle(reply, entries, permits, shared=shared)
        except Exception as exc:  # an unreadable entry: the caller abandons the consumer
            result.set_exception(exc)
            return
        if hand_back or schedule:
            reply.settled = settle_read(
                lane, keys, subscription, consumer, entries[-1][0], hand_back, schedule
            )
        reply.drained = len(entries) < count
        result.set_result(reply)

    control.add_done_callback(combine)
    read.add_done_callback(combine)
    return result


def settle(reply: DispatchReply, entries: list[Entry], permits: int, *, shared: bool) -> Settlement:
    """Add to ``reply.deliveries`` the entries of a native read the consumer may have, in
    order, and lower ``reply.room`` by them; say what to hand back and what to schedule.

    Args:
        reply: the round's ``dispatch.lua`` reply (its deliveries already count against
            ``permits``; its ``room`` is what the unacked limits allow, -1 for no limit).
        entries: what ``XREADGROUP`` read, oldest first.
        permits: the permits the round was asked for.
        shared: a Shared subscription, whose delayed entries are scheduled (PIP-26).
    """
    if reply.status is not DispatchStatus.OK:
        return Settlement([stream_id for stream_id, _ in entries], [])
    left = permits - sum(d.num_messages for d in reply.deliveries)
    room = reply.room  # entries the unacked limits still allow (-1: no limit)
    now = reply.now_ms
    handed_back: list[bytes] = []
    scheduled: list[tuple[bytes, int]] = []
    deliveries = reply.deliveries
    for stream_id, fields in entries:
        if left <= 0 or room == 0:
            handed_back.append(stream_id)
            continue
        room -= 1  # (below zero from the start: no limit, never reaches 0)
        size = len(fields)
        if fields[0] == BLOB and (
            (size == 6 and fields[4] == PUBLISH_TIME)
            or (size == 4 and fields[2] == BROKER_TIME)
            or size == 2
        ):
            # one message, no key, not delayed: the blob, the broker timestamp and the
            # publish time (no publish time when stored before it was kept, the blob alone
            # when stored before ledgers)
            deliveries.append(Delivery(stream_id, fields[1], 1, 0))
            left -= 1
            continue
        blob, num, at = delivery_fields(fields)
        if shared and at is not None and at > now:
            scheduled.append((stream_id, at))
            continue
        deliveries.append(Delivery(stream_id, blob, num, 0))
        left -= num
    if reply.room >= 0:
        reply.room = max(room, 0)
    return Settlement(handed_back, scheduled)
