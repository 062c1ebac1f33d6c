"""DelayedDeliveryPolicy: PIP-437's precedence (inactive, fixed, max, requested) and the
admin API's JSON, as data."""

from __future__ import annotations

import pytest

from pulsar_gateway.core.errors import NotAllowed
from pulsar_gateway.core.policies.delayed_delivery import (
    DelayedDeliveryPolicy,
    DeliveryDelayNotAllowed,
)

PUBLISH = 1_700_000_000_000


def test_default_honours_the_requested_time() -> None:
    policy = DelayedDeliveryPolicy()
    assert policy.deliver_at(PUBLISH, PUBLISH + 5000) == PUBLISH + 5000
    assert policy.deliver_at(PUBLISH, None) is None
    # a time in the past is kept: dispatch finds it due and delivers at once
    assert policy.deliver_at(PUBLISH, PUBLISH - 10) == PUBLISH - 10
    assert not policy.overrides(PUBLISH + 5000)


def test_inactive_delivers_at_once_whatever_else_is_set() -> None:
    policy = DelayedDeliveryPolicy(active=False, max_delay_ms=10, fixed_delay_ms=1000)
    assert policy.deliver_at(PUBLISH, PUBLISH + 5000) is None
    assert policy.deliver_at(PUBLISH, None) is None
    assert not policy.overrides(PUBLISH + 5000)


def test_fixed_delay_wins_over_the_request_and_the_maximum() -> None:
    policy = DelayedDeliveryPolicy(max_delay_ms=10, fixed_delay_ms=3000)
    assert policy.deliver_at(PUBLISH, PUBLISH + 60_000) == PUBLISH + 3000
    assert policy.deliver_at(PUBLISH, None) == PUBLISH + 3000  # also without a request
    assert policy.overrides(PUBLISH + 60_000)
    assert not policy.overrides(None)  # only a client-asked time counts as overridden


def test_maximum_refuses_a_longer_delay_with_pulsars_message() -> None:
    policy = DelayedDeliveryPolicy(max_delay_ms=1000)
    assert policy.deliver_at(PUBLISH, PUBLISH + 1000) == PUBLISH + 1000  # at the limit
    with pytest.raises(DeliveryDelayNotAllowed) as excinfo:
        policy.deliver_at(PUBLISH, PUBLISH + 1001)
    assert isinstance(excinfo.value, NotAllowed)
    assert str(excinfo.value) == "Exceeds max allowed delivery delay of 1000 milliseconds"


def test_json_round_trip_with_pulsars_field_names() -> None:
    body = {
        "active": True,
        "tickTime": 500,
        "maxDeliveryDelayInMillis": 60_000,
        "fixedDeliveryDelayInMillis": 0,
    }
    policy = DelayedDeliveryPolicy.from_json(body)
    assert policy == DelayedDeliveryPolicy(True, 500, 60_000, 0)
    assert policy.to_json() == body
    # missing numbers are 0 (off)
    assert DelayedDeliveryPolicy.from_json({"active": False}).to_json() == {
        "active": False,
        "tickTime": 0,
        "maxDeliveryDelayInMillis": 0,
        "fixedDeliveryDelayInMillis": 0,
    }


@pytest.mark.parametrize(
    "body",
    [
        [],
        "x",
        {},  # active is required
        {"active": "true"},
        {"active": True, "tickTime": -1},
        {"active": True, "maxDeliveryDelayInMillis": 1.5},
        {"active": True, "fixedDeliveryDelayInMillis": True},
        {"active": True, "fixedDeliveryDelayInMillis": "10"},
    ],
)
def test_invalid_json_is_refused(body: object) -> None:
    with pytest.raises(ValueError):
        DelayedDeliveryPolicy.from_json(body)
