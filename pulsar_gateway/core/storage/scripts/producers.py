"""Typed calls of the producer registry scripts: ``add_producer``, ``release_producer`` and
``renew_producer_leases`` (one topic's registry: ``producers`` zset, ``producer-owners``
hash, ``producer-waiters`` zset, topic epoch; :mod:`pulsar_gateway.core.storage.keys`)."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pulsar_gateway.core.errors import GatewayError, ProducerBusy, ProducerFenced
from pulsar_gateway.core.model.access_mode import ProducerAccessMode
from pulsar_gateway.core.storage.keys import TopicKeys
from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner, text, texts

__all__ = [
    "AddProducerReply",
    "AddProducerStatus",
    "add_producer",
    "release_producer",
    "renew_producer_leases",
]


class AddProducerStatus(enum.IntEnum):
    """``add_producer.lua`` status codes."""

    OK = 0
    #: the name is taken, or a Shared producer meets an exclusive one
    PRODUCER_BUSY = 3
    #: exclusive access refused, or the topic epoch moved on
    PRODUCER_FENCED = 4
    #: WaitForExclusive: queued as a waiter (not an error)
    QUEUED = 5


_ERRORS: dict[AddProducerStatus, type[GatewayError]] = {
    AddProducerStatus.PRODUCER_BUSY: ProducerBusy,
    AddProducerStatus.PRODUCER_FENCED: ProducerFenced,
}


@dataclass(frozen=True, slots=True)
class AddProducerReply:
    """What ``add_producer.lua`` answered.

    Attributes:
        topic_epoch: Pulsar's topic epoch (None when the topic never had an exclusive
            producer).
        last_sequence_id: the name's highest stored sequence id (-1 unless deduplication
            asked for it and one is stored).
        others_removed: producers or waiters this call fenced or superseded; their gateways
            must be told on the topic's producer channel.
    """

    status: AddProducerStatus
    message: str
    topic_epoch: int | None
    last_sequence_id: int
    others_removed: int

    def raise_for_status(self) -> None:
        """Raise ProducerBusy or ProducerFenced for those statuses (OK and QUEUED pass)."""
        error = _ERRORS.get(self.status)
        if error is not None:
            raise error(self.message)


def _add_reply(reply: list[Any]) -> AddProducerReply:
    code, message, topic_epoch, last_sequence_id, removed = reply
    epoch = int(topic_epoch)
    return AddProducerReply(
        AddProducerStatus(code),
        text(message),
        None if epoch < 0 else epoch,
        int(last_sequence_id),
        int(removed),
    )


def add_producer(
    lane: ScriptRunner,
    keys: TopicKeys,
    *,
    name: str,
    uid: str,
    access_mode: ProducerAccessMode,
    epoch: int,
    user_provided_name: bool,
    topic_epoch: int | None,
    lease_ms: int,
    deduplication: bool,
    retry: bool,
) -> asyncio.Future[AddProducerReply]:
    """Register producer ``name`` (owned by ``uid``) for the whole fleet under Pulsar's
    name and access-mode rules (PIP-68).

    Args:
        epoch: ``CommandProducer.epoch`` (the client's reconnect counter).
        topic_epoch: the topic epoch the client echoes, None when absent.
        deduplication: answer the name's last stored sequence id.
        retry: a queued WaitForExclusive producer trying again.
    """
    return lane.eval(
        SCRIPTS["add_producer"],
        [*_registry(keys), keys.topic_epoch, keys.last_sequence_ids],
        [
            name,
            uid,
            int(access_mode),
            epoch,
            int(user_provided_name),
            "" if topic_epoch is None else topic_epoch,
            lease_ms,
            int(deduplication),
            int(retry),
        ],
        _add_reply,
    )


def _registry(keys: TopicKeys) -> list[str]:
    return [keys.producers, keys.producer_owners, keys.producer_waiters]


def release_producer(
    lane: ScriptRunner, keys: TopicKeys, *, name: str, uid: str
) -> asyncio.Future[bool]:
    """Remove producer ``name``'s registration if ``uid`` still owns it. Resolves True when
    waiting producers should be told the topic changed."""
    return lane.eval(SCRIPTS["release_producer"], _registry(keys), [name, uid], bool)


def renew_producer_leases(
    lane: ScriptRunner,
    keys: TopicKeys,
    *,
    lease_ms: int,
    producers: Sequence[tuple[str, str]],
    waiters: Sequence[str],
) -> asyncio.Future[list[str]]:
    """Renew the leases of ``producers`` (name, uid) and queued ``waiters`` (uids).
    Resolves with the uids that no longer own their registration (fenced, superseded or
    reaped): the gateway must close them."""
    args: list[str | int] = [lease_ms, len(producers)]
    for name, uid in producers:
        args += [name, uid]
    args += list(waiters)
    return lane.eval(SCRIPTS["renew_producer_leases"], _registry(keys), args, texts)
