"""The redelivery rule both front ends apply (``redeliver_unacknowledged``, Pulsar's
``ServerCnx.handleRedeliverUnacknowledged``): named ids count on Shared and Key_Shared
subscriptions only; elsewhere, and when none is named, everything the consumer holds comes
again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest

from pulsar_gateway.core import ConsumerHandle, SubscriptionType, redeliver_unacknowledged


class _Consumer:
    def __init__(self, sub_type: SubscriptionType) -> None:
        self.subscription_type = sub_type
        self.calls: list[Sequence[bytes] | None] = []

    def redeliver(self, stream_ids: Sequence[bytes] | None) -> Any:
        self.calls.append(stream_ids)
        return None


IDS = [b"5-1", b"5-3"]


@pytest.mark.parametrize("sub_type", [SubscriptionType.SHARED, SubscriptionType.KEY_SHARED])
def test_shared_types_redeliver_the_named_ids(sub_type: SubscriptionType) -> None:
    consumer = _Consumer(sub_type)
    assert redeliver_unacknowledged(cast(ConsumerHandle, consumer), IDS) is False
    assert consumer.calls == [IDS]


@pytest.mark.parametrize("sub_type", [SubscriptionType.EXCLUSIVE, SubscriptionType.FAILOVER])
def test_exclusive_and_failover_redeliver_everything(sub_type: SubscriptionType) -> None:
    consumer = _Consumer(sub_type)
    assert redeliver_unacknowledged(cast(ConsumerHandle, consumer), IDS) is True
    assert consumer.calls == [None]


@pytest.mark.parametrize("sub_type", list(SubscriptionType))
def test_no_ids_is_everything(sub_type: SubscriptionType) -> None:
    consumer = _Consumer(sub_type)
    assert redeliver_unacknowledged(cast(ConsumerHandle, consumer), []) is True
    assert consumer.calls == [None]
