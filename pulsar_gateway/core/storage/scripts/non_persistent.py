"""Typed calls of the non-persistent subscription registry scripts: ``np_subscribe``,
``np_release`` and ``np_refresh`` (registry members are ``<type>|<consumer name>|<uid>``
scored by lease expiry)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pulsar_gateway.core.errors import ConsumerBusy
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.storage.keys import TopicKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner, text, texts

__all__ = ["RegistryView", "np_refresh", "np_release", "np_subscribe"]


def _subscribed(reply: list[Any]) -> None:
    code, message = reply
    if int(code) != 0:
        raise ConsumerBusy(text(message))


def np_subscribe(
    lane: ScriptRunner,
    keys: TopicKeys,
    *,
    subscription: str,
    member: str,
    subscription_type: SubscriptionType,
    lease_ms: int,
) -> asyncio.Future[None]:
    """Register ``member`` in the subscription's fleet-wide registry; fails with
    ConsumerBusy under Pulsar's rules (one Exclusive consumer, one type per subscription)."""
    return lane.eval(
        SCRIPTS["np_subscribe"],
        [keys.non_persistent_consumers(subscription), keys.subscriptions],
        [member, int(subscription_type), lease_ms, subscription],
        _subscribed,
    )


def np_release(
    lane: ScriptRunner, keys: TopicKeys, *, subscription: str, member: str
) -> asyncio.Future[int]:
    """Remove ``member``; the subscription ends with its last consumer. Resolves with the
    consumers left."""
    return lane.eval(
        SCRIPTS["np_release"],
        [keys.non_persistent_consumers(subscription), keys.subscriptions],
        [member, subscription],
        int,
    )


@dataclass(frozen=True, slots=True)
class RegistryView:
    """``lost``: this gateway's members whose lease had expired (close them); ``live``:
    every member with a live lease, sorted."""

    lost: list[str]
    live: list[str]


def _view(reply: list[Any]) -> RegistryView:
    lost, live = reply
    return RegistryView(texts(lost), sorted(texts(live)))


def np_refresh(
    lane: ScriptRunner,
    keys: TopicKeys,
    *,
    subscription: str,
    lease_ms: int,
    members: Sequence[str],
) -> asyncio.Future[RegistryView]:
    """Renew this gateway's ``members`` and read every live member of the subscription."""
    return lane.eval(
        SCRIPTS["np_refresh"],
        [keys.non_persistent_consumers(subscription)],
        [lease_ms, *members],
        _view,
    )
