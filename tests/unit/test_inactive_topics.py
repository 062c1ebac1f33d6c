"""Inactive topics and expired subscriptions, the decisions as data: the policies' parsing
and precedence, when a topic is due (Pulsar's ``PersistentTopic.checkGC`` with
``shouldTopicBeRetained``), when a subscription has expired (``checkInactiveSubscriptions``),
the scripts' calls, and the gateway options (Pulsar's broker.conf names)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest

from pulsar_gateway.core.admin.inactive_topics import (
    DELETE_WHEN_NO_SUBSCRIPTIONS,
    DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP,
    InactiveTopicPolicies,
    deletion_threshold_ms,
    expiration_ms,
    expired_subscriptions,
)
from pulsar_gateway.core.storage.keys import LAST_ACTIVE_FIELD, RESERVED, KeySchema
from pulsar_gateway.core.storage.scripts import SCRIPTS, Arg, Script, inactivity
from pulsar_gateway.core.storage.scripts.inactivity import (
    Activity,
    ActivityStatus,
    InactiveMode,
)
from pulsar_gateway.server.config import GatewayConfig, parse_config
from pulsar_gateway.server.runtime_configuration import runtime_configuration

T = TypeVar("T")

GATEWAY_DEFAULT = InactiveTopicPolicies()  # off, as the gateway's options default
ON = InactiveTopicPolicies(DELETE_WHEN_NO_SUBSCRIPTIONS, 30, True)


# -- the policy value ---------------------------------------------------------------------


def test_an_unset_policy_is_the_gateway_default() -> None:
    assert InactiveTopicPolicies.from_json(None, ON) is ON
    assert InactiveTopicPolicies.from_json("not an object", ON) is ON


def test_a_stored_policy_is_read_whole() -> None:
    value = {
        "inactiveTopicDeleteMode": DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP,
        "maxInactiveDurationSeconds": 5,
        "deleteWhileInactive": True,
    }
    policy = InactiveTopicPolicies.from_json(value, GATEWAY_DEFAULT)
    assert policy == InactiveTopicPolicies(DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP, 5, True)
    assert policy.mode is InactiveMode.CAUGHT_UP
    assert policy.to_json() == value


def test_a_malformed_field_takes_the_default() -> None:
    value = {
        "inactiveTopicDeleteMode": "delete_sometimes",
        "maxInactiveDurationSeconds": True,
        "deleteWhileInactive": "yes",
    }
    assert InactiveTopicPolicies.from_json(value, ON) == ON
    assert InactiveTopicPolicies.from_json({"deleteWhileInactive": True}, GATEWAY_DEFAULT) == (
        InactiveTopicPolicies(DELETE_WHEN_NO_SUBSCRIPTIONS, 60, True)
    )
    assert ON.mode is InactiveMode.NO_SUBSCRIPTIONS


# -- when a topic is due -------------------------------------------------------------------


def test_a_topic_is_never_deleted_unless_delete_while_inactive() -> None:
    assert deletion_threshold_ms(InactiveTopicPolicies(max_inactive_seconds=1), 0) is None


def test_the_threshold_is_the_max_inactive_duration() -> None:
    assert deletion_threshold_ms(ON, 0) == 30_000
    assert deletion_threshold_ms(InactiveTopicPolicies(delete_while_inactive=True), 0) == 60_000
    # maxInactiveDurationSeconds 0: due at the first check that finds it inactive
    assert (
        deletion_threshold_ms(InactiveTopicPolicies(DELETE_WHEN_NO_SUBSCRIPTIONS, 0, True), 0) == 0
    )


def test_retention_keeps_an_inactive_topic_as_pulsar_should_topic_be_retained() -> None:
    assert deletion_threshold_ms(ON, -1) is None  # infinite retention: kept for ever
    assert deletion_threshold_ms(ON, 10) == 600_000  # retention longer than the duration
    assert (
        deletion_threshold_ms(
            InactiveTopicPolicies(max_inactive_seconds=7200, delete_while_inactive=True), 10
        )
        == 7_200_000
    )


# -- when a subscription has expired -----------------------------------------------------


def test_the_namespace_value_wins_even_zero() -> None:
    assert expiration_ms(3, 10) == 180_000
    assert expiration_ms(0, 10) == 0  # Pulsar: a namespace value of 0 turns expiry off
    assert expiration_ms(None, 10) == 600_000  # unset: the gateway's default
    assert expiration_ms(None, 0) == 0
    assert expiration_ms("5", 2) == 120_000  # malformed: the default
    assert expiration_ms(True, 2) == 120_000


def test_a_subscription_expires_once_inactive_for_longer_than_the_expiration() -> None:
    idle = {"b-old": 60_001, "a-old": 90_000, "exactly": 60_000, "fresh": 0}
    assert expired_subscriptions(idle, 60_000) == ["a-old", "b-old"]
    assert expired_subscriptions(idle, 0) == []


# -- the scripts' calls --------------------------------------------------------------------


class Recorder:
    """A :class:`ScriptRunner` that records the call and answers a canned reply."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.calls: list[tuple[str, list[str], list[Arg]]] = []

    def eval(
        self, script: Script, keys: Sequence[str], args: Sequence[Arg], decode: Callable[[Any], T]
    ) -> asyncio.Future[T]:
        self.calls.append((script.name, list(keys), list(args)))
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        future.set_result(decode(self.reply))
        return future


KEYS = KeySchema("p").topic("persistent://t/n/x")


async def test_inactive_topic_names_every_lease_set_of_the_topic() -> None:
    runner = Recorder([1, 1234])
    activity = await inactivity.inactive_topic(
        runner, KEYS, mode=InactiveMode.CAUGHT_UP, subscriptions=["a", "b"]
    )
    assert activity == Activity(ActivityStatus.INACTIVE, 1234)
    ((name, keys, args),) = runner.calls
    assert name == "inactive_topic"
    assert keys == [
        KEYS.ledger,
        KEYS.subscriptions,
        KEYS.stream,
        KEYS.producers,
        KEYS.producer_waiters,
        KEYS.consumers("a"),
        KEYS.consumers("b"),
    ]
    assert args == ["caught-up", "a", "b"]


async def test_inactive_subscriptions_answers_each_idle_subscription() -> None:
    runner = Recorder([b"a", 10, b"c", 0])
    idle = await inactivity.inactive_subscriptions(runner, KEYS, subscriptions=["a", "b", "c"])
    assert idle == {"a": 10, "c": 0}
    ((name, keys, args),) = runner.calls
    assert name == "inactive_subscriptions"
    assert keys == [
        KEYS.subscriptions,
        *(k for s in "abc" for k in (KEYS.consumers(s), KEYS.consumer_info(s))),
    ]
    assert args == ["a", "b", "c"]


def test_the_scripts_get_the_mark_field_from_python() -> None:
    assert RESERVED["LAST_ACTIVE"] == LAST_ACTIVE_FIELD
    source = SCRIPTS["inactive_subscriptions"].source
    assert f"local LAST_ACTIVE = '{LAST_ACTIVE_FIELD.decode()}'" in source
    assert not SCRIPTS["inactive_topic"].read_only  # both keep their marks
    assert not SCRIPTS["inactive_subscriptions"].read_only


# -- the gateway's options -------------------------------------------------------------------


def test_inactive_topic_deletion_is_off_by_default_unlike_pulsar() -> None:
    config = GatewayConfig()
    assert config.broker_delete_inactive_topics_enabled is False
    assert config.broker_delete_inactive_topics_mode == DELETE_WHEN_NO_SUBSCRIPTIONS
    assert config.broker_delete_inactive_topics_frequency_seconds == 60.0
    assert config.inactive_topic_max_seconds == 60  # unset: the frequency, as Pulsar
    assert config.broker_delete_inactive_partitioned_topic_metadata_enabled is False
    assert config.subscription_expiration_time_minutes == 0
    assert config.subscription_expiry_check_interval_in_minutes == 5.0


def test_the_options_from_flags_and_environment() -> None:
    config = parse_config(
        [
            "--broker-delete-inactive-topics-enabled",
            "true",
            "--broker-delete-inactive-topics-frequency-seconds",
            "1.5",
            "--broker-delete-inactive-topics-mode",
            DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP,
            "--subscription-expiration-time-minutes",
            "30",
        ],
        {
            "PULSAR_GATEWAY_BROKER_DELETE_INACTIVE_TOPICS_MAX_INACTIVE_DURATION_SECONDS": "120",
            "PULSAR_GATEWAY_BROKER_DELETE_INACTIVE_PARTITIONED_TOPIC_METADATA_ENABLED": "true",
            "PULSAR_GATEWAY_SUBSCRIPTION_EXPIRY_CHECK_INTERVAL_IN_MINUTES": "0.5",
        },
    )
    assert config.broker_delete_inactive_topics_enabled is True
    assert config.broker_delete_inactive_topics_frequency_seconds == 1.5
    assert config.broker_delete_inactive_topics_mode == DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP
    assert config.inactive_topic_max_seconds == 120
    assert config.broker_delete_inactive_partitioned_topic_metadata_enabled is True
    assert config.subscription_expiration_time_minutes == 30
    assert config.subscription_expiry_check_interval_in_minutes == 0.5
    assert (
        GatewayConfig(
            broker_delete_inactive_topics_frequency_seconds=1.5
        ).inactive_topic_max_seconds
        == 2
    )
    settings = runtime_configuration(config)
    assert settings["brokerDeleteInactiveTopicsEnabled"] == "true"
    assert settings["brokerDeleteInactiveTopicsMode"] == DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP
    assert settings["brokerDeleteInactiveTopicsMaxInactiveDurationSeconds"] == "120"
    assert settings["subscriptionExpirationTimeMinutes"] == "30"
    assert settings["subscriptionExpiryCheckIntervalInMinutes"] == "0.5"
    assert "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds" not in runtime_configuration(
        GatewayConfig()
    )


@pytest.mark.parametrize(
    ("flag", "raw", "reason"),
    [
        ("--broker-delete-inactive-topics-mode", "delete_always", "delete_when_no_subscriptions"),
        ("--broker-delete-inactive-topics-frequency-seconds", "0", "positive"),
        ("--broker-delete-inactive-topics-max-inactive-duration-seconds", "-1", "0 or a positive"),
        ("--subscription-expiration-time-minutes", "-5", "0 or a positive"),
        ("--subscription-expiry-check-interval-in-minutes", "-1", "0 (off)"),
        ("--broker-delete-inactive-topics-enabled", "maybe", "true or false"),
    ],
)
def test_bad_values_are_refused(
    flag: str, raw: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_config([flag, raw], {})
    assert exited.value.code == 2
    assert reason in capsys.readouterr().err
