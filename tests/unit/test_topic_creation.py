"""The auto-creation settings a namespace's ``autoTopicCreation`` policy gives
(``core/policies/topic_creation.py``), decided as data."""

from __future__ import annotations

from typing import Any

import pytest

from pulsar_gateway.core.policies.topic_creation import AutoTopicCreation

BROKER = AutoTopicCreation(allowed=True, partitioned=False, default_partitions=4)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (None, BROKER),  # unset: the gateway's options
        ({}, BROKER),
        ({"allowAutoTopicCreation": "no"}, BROKER),  # not an override Pulsar would store
        (
            {"allowAutoTopicCreation": False, "topicType": "non-partitioned"},
            AutoTopicCreation(allowed=False, partitioned=False, default_partitions=4),
        ),
        (
            {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 3},
            AutoTopicCreation(allowed=True, partitioned=True, default_partitions=3),
        ),
        # a partitioned override without a count takes the gateway's
        (
            {"allowAutoTopicCreation": True, "topicType": "partitioned"},
            AutoTopicCreation(allowed=True, partitioned=True, default_partitions=4),
        ),
        (
            {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 0},
            AutoTopicCreation(allowed=True, partitioned=True, default_partitions=4),
        ),
    ],
)
def test_override_or_the_gateways_defaults(policy: Any, expected: AutoTopicCreation) -> None:
    assert AutoTopicCreation.from_policy(policy, BROKER) == expected


def test_pulsars_broker_defaults() -> None:
    assert AutoTopicCreation() == AutoTopicCreation(
        allowed=True, partitioned=False, default_partitions=1
    )
