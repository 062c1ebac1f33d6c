"""Subscription types and initial positions, as ``CommandSubscribe`` numbers them.

The four types (Pulsar "Messaging Concepts", Subscription types) decide who gets what:

* Exclusive: one consumer; another one is refused (ConsumerBusy);
* Failover: several consumers, one active; the others take over in order of priority and
  name, each partition of a partitioned topic with its own active consumer;
* Shared: messages spread over the consumers, round robin; no order across them;
* Key_Shared: messages of one key always to the same consumer, in order.
"""

from __future__ import annotations

import enum

__all__ = ["InitialPosition", "SubscriptionType"]


class SubscriptionType(enum.IntEnum):
    """Pulsar's subscription types (``CommandSubscribe.SubType`` values)."""

    EXCLUSIVE = 0
    SHARED = 1
    FAILOVER = 2
    KEY_SHARED = 3

    @property
    def pulsar_name(self) -> str:
        """The name Pulsar's stats and admin API report (``Key_Shared``, ``Exclusive``)."""
        return "Key_Shared" if self is SubscriptionType.KEY_SHARED else self.name.title()

    @property
    def individual_ack_mode(self) -> bool:
        """Shared and Key_Shared spread messages over consumers, so a consumer has no
        "everything before" (Pulsar ``PersistentSubscription.isIndividualAckMode``): no
        cumulative ack, no read_compacted."""
        return self in (SubscriptionType.SHARED, SubscriptionType.KEY_SHARED)

    @property
    def counts_redeliveries(self) -> bool:
        """Whether Pulsar counts redeliveries (only Shared and Key_Shared: the others use
        ``RedeliveryTrackerDisabled``); the client's dead-letter logic depends on it."""
        return self.individual_ack_mode


class InitialPosition(enum.IntEnum):
    """Where a new subscription starts (``CommandSubscribe.InitialPosition`` values)."""

    LATEST = 0
    EARLIEST = 1
