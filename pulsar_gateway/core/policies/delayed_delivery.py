"""Delayed delivery: the deliver-at time an entry is stored with, under the topic's policy.

A producer asks for a delivery time with ``deliver_at`` / ``deliver_after``, which the
client sends as ``MessageMetadata.deliver_at_time`` (ms since epoch, PIP-26). The topic's
``delayedDelivery`` policy (namespace or topic level, Pulsar's ``DelayedDeliveryPolicies``)
decides what is stored, in PIP-437's order:

1. ``active`` false: no delivery time; the message is delivered at once.
2. ``fixedDeliveryDelayInMillis`` > 0: every entry is due at its ``publish_time`` plus the
   fixed delay, whatever the client asked (Pulsar counts the overridden requests in
   ``pulsar_broker_topic_messages_fixed_delay_overridden``).
3. ``maxDeliveryDelayInMillis`` > 0: a requested time more than that after the entry's
   ``publish_time`` is refused with NotAllowed and nothing is stored (PIP-315,
   ``PersistentTopic.isExceedMaximumDeliveryDelay``).
4. Else the requested time; one in the past is delivered at once.

The stored time goes into the entry (field ``d``), so every subscription, a new one or one
replayed by seek, schedules the entry by the same time; how subscriptions hold and deliver
scheduled entries is in ``lua/lib.lua`` ("Delayed delivery"). ``tickTime`` is kept and
returned for Pulsar's admin tools but has no effect: gateways wake for the earliest due
entry instead of ticking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pulsar_gateway.core.errors import NotAllowed

__all__ = [
    "DELAYED_DELIVERY_POLICY",
    "DelayedDeliveryPolicy",
    "DeliveryDelayNotAllowed",
    "effective",
]

#: Policy name in Pulsar's admin API (``/namespaces/{tenant}/{ns}/delayedDelivery``).
DELAYED_DELIVERY_POLICY = "delayedDelivery"

#: Pulsar's ``delayedDeliveryTickTimeMillis`` default, reported in the policy.
DEFAULT_TICK_TIME_MS = 1000


class DeliveryDelayNotAllowed(NotAllowed):
    """A requested delivery delay is longer than ``maxDeliveryDelayInMillis``."""


@dataclass(frozen=True, slots=True)
class DelayedDeliveryPolicy:
    """Pulsar's ``DelayedDeliveryPolicies``; 0 turns a delay limit off."""

    active: bool = True
    tick_time_ms: int = DEFAULT_TICK_TIME_MS
    max_delay_ms: int = 0
    fixed_delay_ms: int = 0

    @classmethod
    def from_json(cls, value: Any) -> DelayedDeliveryPolicy:
        """Validate the admin API's JSON body.

        ``active`` is required: Pulsar reads a missing one as false, which would silently
        turn delayed delivery off for a body that only meant to set a limit.

        Raises:
            ValueError: not an object, ``active`` missing or not a bool, or a number field
                that is not an integer >= 0.
        """
        if not isinstance(value, dict):
            raise ValueError(
                'expected {"active": bool, "tickTime": int, "maxDeliveryDelayInMillis": int, '
                '"fixedDeliveryDelayInMillis": int}'
            )
        active = value.get("active")
        if not isinstance(active, bool):
            raise ValueError("active must be true or false")
        numbers = {}
        for name in ("tickTime", "maxDeliveryDelayInMillis", "fixedDeliveryDelayInMillis"):
            item = value.get(name, 0)
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                raise ValueError(f"{name} must be an integer >= 0")
            numbers[name] = item
        return cls(
            active,
            numbers["tickTime"],
            numbers["maxDeliveryDelayInMillis"],
            numbers["fixedDeliveryDelayInMillis"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "active": self.active,
            "tickTime": self.tick_time_ms,
            "maxDeliveryDelayInMillis": self.max_delay_ms,
            "fixedDeliveryDelayInMillis": self.fixed_delay_ms,
        }

    def overrides(self, requested: int | None) -> bool:
        """Whether the fixed delay replaces a time the client asked for."""
        return self.active and self.fixed_delay_ms > 0 and requested is not None

    def deliver_at(self, publish_time: int, requested: int | None) -> int | None:
        """The deliver-at time (ms) to store with an entry, None to deliver it at once.

        Args:
            publish_time: the entry's ``MessageMetadata.publish_time`` (ms).
            requested: its ``deliver_at_time``, None when the client asked for none.

        Raises:
            DeliveryDelayNotAllowed: the requested delay exceeds the maximum.
        """
        if not self.active:
            return None
        if self.fixed_delay_ms > 0:
            return publish_time + self.fixed_delay_ms
        if requested is None:
            return None
        if self.max_delay_ms > 0 and requested - publish_time > self.max_delay_ms:
            # Pulsar's wording (PersistentTopic.publishMessage).
            raise DeliveryDelayNotAllowed(
                f"Exceeds max allowed delivery delay of {self.max_delay_ms} milliseconds"
            )
        return requested


async def effective(
    policies: Any, topic: Any, default: DelayedDeliveryPolicy
) -> DelayedDeliveryPolicy:
    """The topic's ``delayedDelivery`` policy: topic level, else namespace, else
    ``default`` (the gateway's flags). A stored value is trusted: the admin API validated it.
    """
    value = await policies.effective(topic, DELAYED_DELIVERY_POLICY)
    return default if value is None else DelayedDeliveryPolicy.from_json(value)
