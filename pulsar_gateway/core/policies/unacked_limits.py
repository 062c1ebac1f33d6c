"""Unacked-message limits of Shared and Key_Shared subscriptions.

Pulsar stops dispatching to a consumer once it holds ``maxUnackedMessagesPerConsumer``
unacknowledged messages (50,000 by default), and to every consumer of a subscription once
the subscription holds ``maxUnackedMessagesPerSubscription`` (200,000), until
acknowledgements bring the count down to half (``Consumer.removePendingAcks``,
``PersistentDispatcherMultipleConsumers.addUnAckedMessages``); topic stats show it as
``blockedConsumerOnUnackedMsgs`` and ``blockedSubscriptionOnUnackedMsgs``. The limits apply
to durable Shared and Key_Shared subscriptions only (``Subscription.isIndividualAckMode``;
readers are non-durable), and 0 means no limit. The effective value is the topic's policy
(``maxUnackedMessagesOnConsumer`` / ``...OnSubscription``), else the namespace's
(``maxUnackedMessagesPerConsumer`` / ``...PerSubscription``), else the broker's setting
(Pulsar's ``PolicyHierarchyValue``).

Here the count is the subscription's pending entries at real consumers in Redis, fleet-wide,
checked by each dispatch (``lib.lua`` ``unacked_check``, which also applies the unblocking
at half); a client batch counts as one entry, as the ``unackedMessages`` of this gateway's
topic stats do (Pulsar counts its messages).
"""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_gateway.core.model.topic_name import TopicName
from pulsar_gateway.core.policies.policies import Policies

__all__ = [
    "MAX_UNACKED_PER_CONSUMER_POLICY",
    "MAX_UNACKED_PER_SUBSCRIPTION_POLICY",
    "UnackedLimits",
    "effective",
]

#: The stored names of the namespace and topic policies.
MAX_UNACKED_PER_CONSUMER_POLICY = "maxUnackedMessagesPerConsumer"
MAX_UNACKED_PER_SUBSCRIPTION_POLICY = "maxUnackedMessagesPerSubscription"


@dataclass(frozen=True, slots=True)
class UnackedLimits:
    """A subscription's limits (0: none)."""

    consumer: int = 0
    subscription: int = 0


async def effective(policies: Policies, topic: TopicName, defaults: UnackedLimits) -> UnackedLimits:
    """The limits of ``topic``'s subscriptions: topic policy, else namespace policy, else
    ``defaults`` (the gateway's settings)."""
    consumer = await policies.effective(topic, MAX_UNACKED_PER_CONSUMER_POLICY)
    subscription = await policies.effective(topic, MAX_UNACKED_PER_SUBSCRIPTION_POLICY)
    return UnackedLimits(
        defaults.consumer if consumer is None else int(consumer),
        defaults.subscription if subscription is None else int(subscription),
    )
