"""Typed calls of the subscription admin scripts (``subscription_*.lua``): create, delete,
skip, expire, reset and peek, each one step on one partition, atomic with every gateway's
dispatchers."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import Any

from pulsar_gateway.core.model.entry import StoredEntry
from pulsar_gateway.core.storage.keys import SubscriptionKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner, count_or_none, text

__all__ = [
    "DeleteReply",
    "DeleteStatus",
    "ExpireOutcome",
    "PeekReply",
    "PeekStatus",
    "subscription_create",
    "subscription_delete",
    "subscription_expire_at",
    "subscription_expire_by_age",
    "subscription_peek",
    "subscription_properties",
    "subscription_reset_at",
    "subscription_reset_to",
    "subscription_skip",
]


def subscription_create(
    lane: ScriptRunner, keys: SubscriptionKeys, *, subscription: str, position: bytes
) -> asyncio.Future[bool]:
    """Create the subscription without a consumer, its group at ``position`` (``$``
    latest, ``0`` earliest, or the id just before the first entry to deliver). Resolves
    False when it exists already."""
    return lane.eval(SCRIPTS["subscription_create"], keys.all, [subscription, position], bool)


def subscription_properties(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    replace: dict[str, str] | None = None,
) -> asyncio.Future[dict[str, str] | None]:
    """The subscription's properties, after replacing them all with ``replace`` when given;
    None when there is no such subscription."""

    def decode(reply: Any) -> dict[str, str] | None:
        if not isinstance(reply, list):
            return None
        pairs = [text(item) for item in reply]
        return dict(zip(pairs[::2], pairs[1::2], strict=True))

    args: list[Any] = [subscription, "0" if replace is None else "1"]
    for name, value in (replace or {}).items():
        args += [name, value]
    return lane.eval(SCRIPTS["subscription_properties"], keys.all, args, decode)


class DeleteStatus(enum.IntEnum):
    """``subscription_delete.lua`` status codes."""

    DELETED = 0
    #: consumers are connected and the delete was not forced
    BUSY = 1
    NOT_FOUND = -1


@dataclass(frozen=True, slots=True)
class DeleteReply:
    """The outcome, and the live consumers found (detached when forced)."""

    status: DeleteStatus
    consumers: int


def _delete_reply(reply: list[Any]) -> DeleteReply:
    return DeleteReply(DeleteStatus(int(reply[0])), int(reply[1]))


def subscription_delete(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    force: bool,
    dry_run: bool,
) -> asyncio.Future[DeleteReply]:
    """Delete the subscription (persistent or not); ``dry_run`` only checks for consumers."""
    return lane.eval(
        SCRIPTS["subscription_delete"],
        keys.all,
        [subscription, int(force), int(dry_run)],
        _delete_reply,
    )


def subscription_skip(
    lane: ScriptRunner, keys: SubscriptionKeys, *, subscription: str, entries: int | None
) -> asyncio.Future[int | None]:
    """Acknowledge the first ``entries`` entries of the backlog (None: all of it, Pulsar's
    clear backlog). Resolves with the entries skipped, None when there is no such
    subscription."""
    return lane.eval(
        SCRIPTS["subscription_skip"],
        keys.all,
        [subscription, -1 if entries is None else entries],
        count_or_none,
    )


class ExpireOutcome(enum.IntEnum):
    """``subscription_expire.lua``'s answer."""

    ISSUED = 1
    #: Pulsar would not issue it (HTTP 409): empty or almost caught-up backlog, or a
    #: position after the last entry
    NOT_ISSUED = 0
    NOT_FOUND = -1


def subscription_expire_by_age(
    lane: ScriptRunner, keys: SubscriptionKeys, *, subscription: str, seconds: int
) -> asyncio.Future[ExpireOutcome]:
    """Acknowledge every entry stored more than ``seconds`` ago."""
    return lane.eval(
        SCRIPTS["subscription_expire"],
        keys.all,
        [subscription, "age", seconds],
        ExpireOutcome,
    )


def subscription_expire_at(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    position: bytes,
    excluded: bool,
    batch_index: int,
) -> asyncio.Future[ExpireOutcome]:
    """Acknowledge everything up to stream id ``position`` (after it when ``excluded``;
    inside a batch up to ``batch_index``, -1 for none)."""
    return lane.eval(
        SCRIPTS["subscription_expire"],
        keys.all,
        [subscription, "position", position, int(excluded), batch_index],
        ExpireOutcome,
    )


def subscription_reset_to(
    lane: ScriptRunner, keys: SubscriptionKeys, *, subscription: str, group_position: bytes
) -> asyncio.Future[int | None]:
    """Recreate the group so delivery restarts after ``group_position`` (a group id) and
    detach every consumer. Resolves with the consumers detached, None when there is no
    such subscription."""
    return lane.eval(
        SCRIPTS["subscription_reset"],
        keys.all,
        [subscription, "group", group_position],
        count_or_none,
    )


def subscription_reset_at(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    position: bytes,
    excluded: bool,
    batch_index: int,
) -> asyncio.Future[int | None]:
    """:func:`subscription_reset_to` at entry ``position`` (after it when ``excluded``;
    inside a batch at ``batch_index``, the earlier indexes counting as acknowledged)."""
    return lane.eval(
        SCRIPTS["subscription_reset"],
        keys.all,
        [subscription, "position", position, int(excluded), batch_index],
        count_or_none,
    )


class PeekStatus(enum.IntEnum):
    """``subscription_peek.lua`` status codes."""

    FOUND = 1
    #: the backlog is shorter
    NO_ENTRY = 0
    NOT_FOUND = -1


@dataclass(frozen=True, slots=True)
class PeekReply:
    status: PeekStatus
    entry: StoredEntry | None = None


def subscription_peek(
    lane: ScriptRunner,
    keys: SubscriptionKeys,
    *,
    subscription: str,
    position: int,
    partition: int,
) -> asyncio.Future[PeekReply]:
    """The ``position``-th entry (1-based) of the backlog, acknowledged entries not
    counted; its message id carries ``partition``."""

    def decode(reply: list[Any]) -> PeekReply:
        status = PeekStatus(int(reply[0]))
        if status is not PeekStatus.FOUND:
            return PeekReply(status)
        return PeekReply(status, StoredEntry.parse(reply[1], reply[2], partition))

    return lane.eval(SCRIPTS["subscription_peek"], keys.all, [subscription, position], decode)
