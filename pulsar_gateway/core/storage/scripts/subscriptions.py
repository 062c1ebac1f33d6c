"""Typed calls of the scripts that attach consumers to a subscription and detach them:
``subscribe``, ``unsubscribe``, ``release_consumer``, ``reap_consumers``, ``renew_leases``,
``failover_active``, ``seek`` and ``last_message_id``."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pulsar_gateway.core.errors import ConsumerAssignError, ConsumerBusy, GatewayError
from pulsar_gateway.core.model.entry import StoredEntry
from pulsar_gateway.core.model.key_shared import KeySharedPolicy
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.storage.keys import SubscriptionKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner, count_or_none, text, texts

__all__ = [
    "LastEntry",
    "SubscribeReply",
    "SubscribeStatus",
    "failover_active",
    "last_message_id",
    "message_id_at_time",
    "reap_consumers",
    "release_consumer",
    "renew_leases",
    "seek",
    "subscribe",
    "unsubscribe",
]


class SubscribeStatus(enum.IntEnum):
    """``subscribe.lua`` and ``unsubscribe.lua`` status codes."""

    OK = 0
    #: Exclusive already has a live consumer, or the subscription has live consumers of
    #: another type or Key_Shared mode (or, to unsubscribe: other consumers)
    CONSUMER_BUSY = 1
    #: Key_Shared STICKY ranges invalid or taken
    CONSUMER_ASSIGN_ERROR = 7


_ERRORS: dict[SubscribeStatus, type[GatewayError]] = {
    SubscribeStatus.CONSUMER_BUSY: ConsumerBusy,
    SubscribeStatus.CONSUMER_ASSIGN_ERROR: ConsumerAssignError,
}


def _raise_for(code: Any, message: Any) -> None:
    status = SubscribeStatus(code)
    if status is not SubscribeStatus.OK:
        raise _ERRORS[status](text(message))


@dataclass(frozen=True, slots=True)
class SubscribeReply:
    """A consumer attached.

    Attributes:
        handed_back: entries returned to the subscription from consumers whose lease had
            expired (other gateways should be woken).
        active: Failover: the active consumer's uid after this subscribe (``""`` for the
            other types).
    """

    handed_back: int
    active: str


def _subscribe_reply(reply: list[Any]) -> SubscribeReply:
    code, message, handed_back, active = reply
    _raise_for(code, message)
    return SubscribeReply(int(handed_back), text(active))


def subscribe(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    subscription_type: SubscriptionType,
    start_position: bytes,
    consumer: str,
    consumer_name: str,
    lease_ms: int,
    priority_level: int,
    partition: int,
    key_shared: KeySharedPolicy | None,
    durable: bool,
) -> asyncio.Future[SubscribeReply]:
    """Attach consumer ``consumer`` (its uid) to the subscription, creating the consumer
    group at ``start_position`` (a group id: ``$``, ``0`` or an entry id) if it is new.

    The future fails with ConsumerBusy (the Exclusive rule, a type or Key_Shared mode clash)
    or ConsumerAssignError (STICKY ranges refused).
    """
    policy = key_shared or KeySharedPolicy()
    is_key_shared = subscription_type is SubscriptionType.KEY_SHARED
    return lane.eval(
        SCRIPTS["subscribe"],
        keys.all,
        [
            subscription,
            int(subscription_type),
            start_position,
            consumer,
            consumer_name,
            lease_ms,
            priority_level,
            partition,
            int(policy.mode) if is_key_shared else "",
            policy.ranges_text() if is_key_shared else "",
            int(policy.allow_out_of_order),
            int(durable),
        ],
        _subscribe_reply,
    )


def _unsubscribe_reply(reply: list[Any]) -> None:
    _raise_for(*reply)


def unsubscribe(
    lane: ScriptRunner, keys: SubscriptionKeys, *, subscription: str, consumer: str
) -> asyncio.Future[None]:
    """Delete the subscription at ``consumer``'s request (Pulsar UNSUBSCRIBE). Fails with
    ConsumerBusy while other consumers are connected."""
    return lane.eval(SCRIPTS["unsubscribe"], keys.all, [subscription, consumer], _unsubscribe_reply)


def release_consumer(
    lane: ScriptRunner, keys: SubscriptionKeys, *, subscription: str, consumer: str
) -> asyncio.Future[int]:
    """Detach ``consumer``; its unacked entries go back to the subscription. Resolves with
    the number of entries handed back."""
    return lane.eval(SCRIPTS["release_consumer"], keys.all, [subscription, consumer], int)


def reap_consumers(
    lane: ScriptRunner, keys: SubscriptionKeys, *, subscription: str
) -> asyncio.Future[int]:
    """Release every consumer whose lease expired; resolves with the entries handed back."""
    return lane.eval(SCRIPTS["reap_consumers"], keys.all, [subscription], int)


def renew_leases(
    lane: ScriptRunner, keys: SubscriptionKeys, *, lease_ms: int, consumers: Sequence[str]
) -> asyncio.Future[list[str]]:
    """Extend the leases of ``consumers`` (uids); resolves with those whose lease was
    already gone (reaped elsewhere): the gateway must close them."""
    return lane.eval(SCRIPTS["renew_leases"], [keys.consumers], [lease_ms, *consumers], texts)


def failover_active(
    lane: ScriptRunner, keys: SubscriptionKeys, *, partition: int
) -> asyncio.Future[str]:
    """The uid of the Failover subscription's active consumer, ``""`` when there is none."""
    return lane.eval(SCRIPTS["failover_active"], keys.all, [partition], text)


def seek(
    lane: ScriptRunner, keys: SubscriptionKeys, *, subscription: str, position: bytes
) -> asyncio.Future[int | None]:
    """Recreate the subscription's group so delivery restarts after ``position`` (a group
    id) and detach every consumer of the fleet. Resolves with the consumers detached, None
    when the subscription does not exist."""
    return lane.eval(SCRIPTS["seek"], keys.all, [subscription, position], count_or_none)


@dataclass(frozen=True, slots=True)
class LastEntry:
    """The topic's last entry (None for an empty topic) and, when a subscription was
    named, its mark-delete position: the id before which everything is acknowledged
    (None: nothing acknowledged yet)."""

    last: StoredEntry | None
    mark_delete: bytes | None


def _last_entry(reply: list[Any]) -> LastEntry:
    last_id, fields, mark_delete = reply
    return LastEntry(StoredEntry.parse(last_id, fields) if last_id else None, mark_delete or None)


def message_id_at_time(lane: ScriptRunner, stream: str, timestamp: int) -> asyncio.Future[Any]:
    """The stream id of the first entry published at or after ``timestamp`` (ms), None when
    there is none."""
    return lane.eval(
        SCRIPTS["message_id_at_time"], [stream], [timestamp], lambda reply: reply or None
    )


def last_message_id(
    lane: ScriptRunner, stream: str, *, subscription: str | None = None
) -> asyncio.Future[LastEntry]:
    """The last entry of the topic partition whose stream is ``stream`` (Pulsar
    GET_LAST_MESSAGE_ID), with ``subscription``'s mark-delete position."""
    return lane.eval(SCRIPTS["last_message_id"], [stream], [subscription or ""], _last_entry)
