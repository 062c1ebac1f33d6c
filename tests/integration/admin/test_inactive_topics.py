"""Inactive topic deletion (``inactiveTopicPolicies``) and subscription expiry
(``subscriptionExpirationTime``), with the official client, the admin API and a real Redis.

Sweeps are stepped by calling the gateway's ``inactive_topics.run_gc_once()`` and
``run_expiry_once()`` (their loops run once an hour here), except in the test that proves
the loop runs with the gateway. Waiting for an inactive time to pass is a wait with a
deadline that sweeps again until the topic goes; "kept" is asserted after the inactive time
has certainly passed, and followed by the deletion once the client leaves, so the check
could have deleted it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from pulsar_gateway.core.admin.inactive_topics import ExpiryRound, GcRound
from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage.keys import LAST_ACTIVE_FIELD, KeySchema, hash_tag
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import inactivity
from pulsar_gateway.core.storage.scripts.inactivity import Activity, ActivityStatus, InactiveMode
from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread, data_keys, stream_key, wait_for
from tests.helpers import produce

RECEIVE_MS = int(TIMEOUT * 1000)
NAMESPACE = "public/default"
NS_URL = f"/admin/v2/namespaces/{NAMESPACE}"
TOPICS_URL = f"/admin/v2/persistent/{NAMESPACE}"
#: The background loops stay out of the way: tests step the sweeps themselves.
NO_LOOP = {
    "broker_delete_inactive_topics_frequency_seconds": 3600.0,
    "subscription_expiry_check_interval_in_minutes": 0,
}
#: The inactive time of the tests' policies (seconds), and a wait certainly past it.
INACTIVE_SECONDS = 1
PAST_IT = INACTIVE_SECONDS + 0.5


@pytest.fixture
def topic(topic: str) -> str:
    """The shared fixture's name, without the "-partition" a test name may put in it."""
    return topic.replace("-partition", "-part")


def full(name: str) -> str:
    return f"persistent://{NAMESPACE}/{name}"


def policy(mode: str = "delete_when_no_subscriptions", enabled: bool = True) -> dict[str, Any]:
    return {
        "inactiveTopicDeleteMode": mode,
        "maxInactiveDurationSeconds": INACTIVE_SECONDS,
        "deleteWhileInactive": enabled,
    }


def set_namespace_policy(gw: GatewayThread, value: Any) -> None:
    assert admin("POST", f"{gw.http_url}{NS_URL}/inactiveTopicPolicies", value) == (204, None)


def gc(gw: GatewayThread) -> GcRound:
    result: GcRound = gw.call(gw.gateway.core.inactive_topics.run_gc_once())
    return result


def expire(gw: GatewayThread) -> ExpiryRound:
    result: ExpiryRound = gw.call(gw.gateway.core.inactive_topics.run_expiry_once())
    return result


def listed(gw: GatewayThread) -> list[str]:
    status, topics = admin("GET", f"{gw.http_url}{TOPICS_URL}")
    assert status == 200, topics
    return list(topics)


def keys_of(redis: Any, name: str) -> list[str]:
    """The topic's keys left in Redis."""
    tag = hash_tag(full(name))
    return [key for key in data_keys(redis) if tag in key]


def swept_away(gw: GatewayThread) -> int:
    """Sweep until a topic is deleted (the inactive time must pass first)."""
    deleted: int = wait_for(lambda: gc(gw).deleted, interval=0.2)
    return deleted


def kept(gw: GatewayThread) -> bool:
    """One sweep found the topic active and deleted nothing."""
    result = gc(gw)
    return (result.active, result.deleted) == (1, 0)


def sweep_until_none_listed(gw: GatewayThread) -> None:
    def swept() -> bool:
        gc(gw)
        return listed(gw) == []

    wait_for(swept, interval=0.2)


# -- delete_when_no_subscriptions -------------------------------------------------------------


def test_a_topic_without_subscriptions_is_deleted_once_inactive(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    redis_clean: Any,
    topic: str,
) -> None:
    gw = gateway_factory(**NO_LOOP)
    set_namespace_policy(gw, policy())
    produce(client_factory(gw.url), topic, 3)
    assert listed(gw) == [full(topic)]
    started = time.monotonic()
    first = gc(gw)  # the first sweep that finds it inactive marks it: not deleted yet
    assert (first.checked, first.inactive, first.deleted) == (1, 1, 0)
    assert swept_away(gw) == 1
    assert time.monotonic() - started >= INACTIVE_SECONDS * 0.9
    # as an admin delete: its keys, its name in the namespace; the policy stays
    assert listed(gw) == []
    assert keys_of(redis_clean, topic) == []
    status, body = admin("GET", f"{gw.http_url}{TOPICS_URL}/{topic}/stats")
    assert status == 404, body
    assert admin("GET", f"{gw.http_url}{NS_URL}/inactiveTopicPolicies") == (200, policy())


def test_a_connected_producer_keeps_its_topic(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    redis_clean: Any,
    topic: str,
) -> None:
    gw = gateway_factory(**NO_LOOP)
    set_namespace_policy(gw, policy())
    producer = client_factory(gw.url).create_producer(topic)
    producer.send(b"x")
    assert gc(gw).active == 1
    time.sleep(PAST_IT)
    assert kept(gw)
    assert listed(gw) == [full(topic)]
    producer.close()
    assert swept_away(gw) == 1
    assert keys_of(redis_clean, topic) == []


def test_a_subscription_keeps_its_topic_in_no_subscriptions_mode(
    gateway_factory: Callable[..., GatewayThread], client_factory: Callable[..., Any], topic: str
) -> None:
    gw = gateway_factory(**NO_LOOP)
    set_namespace_policy(gw, policy())
    client = client_factory(gw.url)
    client.subscribe(topic, "durable").close()  # a subscription without consumers
    produce(client, topic, 1)
    gc(gw)
    time.sleep(PAST_IT)
    assert kept(gw)
    status, subscriptions = admin("GET", f"{gw.http_url}{TOPICS_URL}/{topic}/subscriptions")
    assert (status, subscriptions) == (200, ["durable"])
    assert admin("DELETE", f"{gw.http_url}{TOPICS_URL}/{topic}/subscription/durable")[0] == 204
    assert swept_away(gw) == 1
    assert listed(gw) == []


# -- delete_when_subscriptions_caught_up ----------------------------------------------------


def test_caught_up_mode_keeps_a_backlog_and_deletes_once_acknowledged(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    redis_clean: Any,
    topic: str,
) -> None:
    gw = gateway_factory(**NO_LOOP)
    set_namespace_policy(gw, policy("delete_when_subscriptions_caught_up"))
    client = client_factory(gw.url)
    client.subscribe(topic, "audit").close()
    produce(client, topic, 2)  # a backlog of two on "audit", nobody connected
    assert gc(gw).active == 1
    time.sleep(PAST_IT)
    assert kept(gw)
    # a connected consumer keeps it too, even with the backlog acknowledged
    consumer = client.subscribe(topic, "audit")
    for _ in range(2):
        consumer.acknowledge(consumer.receive(RECEIVE_MS))
    wait_for(lambda: redis_clean.xpending(stream_key(topic), "audit")["pending"] == 0)
    time.sleep(PAST_IT)
    assert kept(gw)
    consumer.close()
    # caught up and nobody connected: deleted, with its subscription
    assert swept_away(gw) == 1
    assert listed(gw) == []
    assert keys_of(redis_clean, topic) == []


# -- what keeps it: the policy ------------------------------------------------------------


def test_delete_while_inactive_false_keeps_a_topic(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    gw = gateway_factory(**NO_LOOP)
    set_namespace_policy(gw, policy())
    client = client_factory(gw.url)
    kept, dropped = f"{topic}-kept", f"{topic}-dropped"
    # the topic level wins over the namespace's
    url = f"{gw.http_url}{TOPICS_URL}/{kept}/inactiveTopicPolicies"
    produce(client, kept, 1)
    produce(client, dropped, 1)
    assert admin("POST", url, policy(enabled=False)) == (204, None)
    assert gc(gw).checked == 1  # only the topic whose policy deletes it
    assert swept_away(gw) == 1
    assert listed(gw) == [full(kept)]
    time.sleep(PAST_IT)
    assert gc(gw) == GcRound()
    assert listed(gw) == [full(kept)]
    assert admin("GET", url) == (200, policy(enabled=False))


def test_infinite_retention_keeps_an_inactive_topic(
    gateway_factory: Callable[..., GatewayThread], client_factory: Callable[..., Any], topic: str
) -> None:
    gw = gateway_factory(**NO_LOOP)
    set_namespace_policy(gw, policy())
    retention = {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
    url = f"{gw.http_url}{TOPICS_URL}/{topic}/retention"
    produce(client_factory(gw.url), topic, 1)
    assert admin("POST", url, retention) == (204, None)
    gc(gw)
    time.sleep(PAST_IT)
    assert gc(gw) == GcRound()  # Pulsar's shouldTopicBeRetained: not even a candidate
    assert listed(gw) == [full(topic)]


# -- the gateway's options and loop -------------------------------------------------------


def test_the_gateway_option_deletes_topics_without_a_policy_in_its_loop(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    redis_clean: Any,
    topic: str,
) -> None:
    gw = gateway_factory(
        broker_delete_inactive_topics_enabled=True,
        broker_delete_inactive_topics_frequency_seconds=0.3,
        broker_delete_inactive_topics_max_inactive_duration_seconds=INACTIVE_SECONDS,
    )
    applied = f"{gw.http_url}{TOPICS_URL}/{topic}/inactiveTopicPolicies?applied=true"
    produce(client_factory(gw.url), topic, 2)
    assert admin("GET", applied) == (200, policy())  # the gateway's, as Pulsar's broker.conf
    wait_for(lambda: listed(gw) == [], interval=0.1)
    assert keys_of(redis_clean, topic) == []
    status, settings = admin("GET", f"{gw.http_url}/admin/v2/brokers/configuration/runtime")
    assert status == 200 and settings["brokerDeleteInactiveTopicsEnabled"] == "true"


@pytest.mark.parametrize("metadata", [True, False], ids=["metadata-deleted", "metadata-kept"])
def test_a_partitioned_topic_goes_partition_by_partition(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    redis_clean: Any,
    topic: str,
    metadata: bool,
) -> None:
    gw = gateway_factory(
        **NO_LOOP, broker_delete_inactive_partitioned_topic_metadata_enabled=metadata
    )
    set_namespace_policy(gw, policy())
    url = f"{gw.http_url}{TOPICS_URL}/{topic}/partitions"
    assert admin("PUT", url, 2) == (204, None)
    produce(client_factory(gw.url), topic, 4)
    assert sorted(listed(gw)) == [f"{full(topic)}-partition-{i}" for i in range(2)]
    sweep_until_none_listed(gw)
    assert keys_of(redis_clean, f"{topic}-partition-0") == []
    assert keys_of(redis_clean, f"{topic}-partition-1") == []
    if metadata:  # Pulsar's brokerDeleteInactivePartitionedTopicMetadataEnabled
        assert admin("GET", url)[0] == 404
        assert admin("GET", f"{gw.http_url}{TOPICS_URL}/partitioned") == (200, [])
    else:  # Pulsar's default: the partitioned topic stays, its partitions come back on use
        assert admin("GET", url) == (200, {"partitions": 2})


def test_two_gateways_sweeping_one_topic_at_once_is_safe(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    redis_clean: Any,
    topic: str,
) -> None:
    gateways = gateway_factory(**NO_LOOP), gateway_factory(**NO_LOOP)
    set_namespace_policy(gateways[0], policy())
    produce(client_factory(gateways[0].url), topic, 1)
    name = parse_topic_name(topic)
    # whatever their shares of the fleet, both check it, at the same time on their loops
    for gw in gateways:
        gw.call(gw.gateway.core.inactive_topics.check_topic(name))
    time.sleep(PAST_IT)
    checks = [
        asyncio.run_coroutine_threadsafe(gw.gateway.core.inactive_topics.check_topic(name), gw.loop)
        for gw in gateways
    ]
    outcomes = sorted(check.result(TIMEOUT).value for check in checks)
    # both may run the admin deletion (it is idempotent); one that checks after it finds
    # the topic deleted (kept) or nothing stored (inactive: seen so for the first time)
    assert "deleted" in outcomes, outcomes
    assert set(outcomes) <= {"deleted", "kept", "inactive"}, outcomes
    assert listed(gateways[0]) == []
    assert keys_of(redis_clean, topic) == []


# -- subscription expiry -----------------------------------------------------------------


def age_mark(redis: Any, topic: str, subscription: str, minutes: float) -> None:
    """Make the subscription's last-active mark ``minutes`` old (Redis clock): time passing,
    without the test waiting for it."""
    seconds, micros = redis.time()
    old = seconds * 1000 + micros // 1000 - int(minutes * 60_000)
    info = KeySchema().topic(full(topic)).consumer_info(subscription)
    assert redis.hget(info, LAST_ACTIVE_FIELD) is not None  # a sweep marked it
    redis.hset(info, LAST_ACTIVE_FIELD, old)


def test_an_idle_subscription_expires_and_one_with_a_consumer_stays(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    redis_clean: Any,
    topic: str,
) -> None:
    gw = gateway_factory(**NO_LOOP)
    url = f"{gw.http_url}{NS_URL}/subscriptionExpirationTime"
    assert admin("POST", url, 1) == (204, None)
    client = client_factory(gw.url)
    client.subscribe(topic, "idle").close()
    busy = client.subscribe(topic, "busy")
    produce(client, topic, 1)
    assert expire(gw) == ExpiryRound(topics=1, expired=0)  # first seen: marked now
    age_mark(redis_clean, topic, "idle", 2)
    age_mark(redis_clean, topic, "busy", 2)
    assert expire(gw) == ExpiryRound(topics=1, expired=1)
    subs_url = f"{gw.http_url}{TOPICS_URL}/{topic}/subscriptions"
    assert admin("GET", subs_url) == (200, ["busy"])
    keys = KeySchema().topic(full(topic))
    assert not redis_clean.exists(keys.consumer_info("idle"), keys.consumers("idle"))
    assert busy.receive(RECEIVE_MS).data() == b"m-0"  # still served
    # a subscription made again under the name starts afresh
    assert admin("PUT", f"{gw.http_url}{TOPICS_URL}/{topic}/subscription/idle")[0] == 204
    assert expire(gw) == ExpiryRound(topics=1, expired=0)
    assert sorted(admin("GET", subs_url)[1]) == ["busy", "idle"]


def test_a_consumer_that_came_and_went_between_two_checks_counts(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    redis_clean: Any,
    topic: str,
) -> None:
    gw = gateway_factory(**NO_LOOP, subscription_expiration_time_minutes=1)
    client = client_factory(gw.url)
    client.subscribe(topic, "nightly").close()
    assert expire(gw) == ExpiryRound(topics=1, expired=0)  # marked
    age_mark(redis_clean, topic, "nightly", 2)
    # a consumer attaches and leaves before the next check: its departure is recorded
    client.subscribe(topic, "nightly").close()
    assert expire(gw) == ExpiryRound(topics=1, expired=0)
    subs_url = f"{gw.http_url}{TOPICS_URL}/{topic}/subscriptions"
    assert admin("GET", subs_url) == (200, ["nightly"])
    age_mark(redis_clean, topic, "nightly", 2)
    assert expire(gw) == ExpiryRound(topics=1, expired=1)
    assert admin("GET", subs_url) == (200, [])


def test_the_namespace_expiration_zero_turns_the_gateway_default_off(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    redis_clean: Any,
    topic: str,
) -> None:
    gw = gateway_factory(**NO_LOOP, subscription_expiration_time_minutes=1)
    client = client_factory(gw.url)
    client.subscribe(topic, "idle").close()
    expire(gw)
    age_mark(redis_clean, topic, "idle", 2)
    url = f"{gw.http_url}{NS_URL}/subscriptionExpirationTime"
    assert admin("POST", url, 0) == (204, None)
    assert expire(gw) == ExpiryRound()
    assert admin("DELETE", url) == (204, None)  # unset: the gateway's 1 minute
    assert expire(gw) == ExpiryRound(topics=1, expired=1)
    assert admin("GET", f"{gw.http_url}{TOPICS_URL}/{topic}/subscriptions") == (200, [])


# -- the scripts ---------------------------------------------------------------------------

KEYS = KeySchema().topic(full("scripted"))


async def _check(storage: Lane, subscriptions: list[str] | None = None) -> Activity:
    return await inactivity.inactive_topic(
        storage,
        KEYS,
        mode=InactiveMode.NO_SUBSCRIPTIONS,
        subscriptions=subscriptions or [],
    )


async def test_the_check_stores_nothing_for_a_topic_without_keys(
    storage: Lane, redis_clean: Any
) -> None:
    assert await _check(storage) == Activity(ActivityStatus.NOTHING_STORED)
    assert data_keys(redis_clean) == []  # a sweep racing a deletion leaves nothing behind


async def test_the_check_lists_the_subscriptions_again_when_they_changed(
    storage: Lane, redis_clean: Any
) -> None:
    redis_clean.hset(KEYS.subscriptions, "new", 0)
    assert (await _check(storage)).status is ActivityStatus.RETRY
    assert (await _check(storage, ["new", "gone"])).status is ActivityStatus.RETRY
    assert (await _check(storage, ["new"])).status is ActivityStatus.ACTIVE


async def test_a_lease_that_ran_out_counts_until_it_did(storage: Lane, redis_clean: Any) -> None:
    redis_clean.xadd(KEYS.stream, {"m": b"x"})
    first = await _check(storage)
    assert first == Activity(ActivityStatus.INACTIVE, 0)  # marked now
    seconds, micros = redis_clean.time()
    now = seconds * 1000 + micros // 1000
    redis_clean.hset(KEYS.ledger, "a", now - 60_000)
    # a producer whose gateway died: its lease ran out 5 s ago, never released
    redis_clean.zadd(KEYS.producers, {"dead-producer": now - 5_000})
    activity = await _check(storage)
    assert activity.status is ActivityStatus.INACTIVE
    assert 5_000 <= activity.inactive_ms < 5_000 + TIMEOUT * 1000
    # a live lease: active, the mark moves to now
    redis_clean.zadd(KEYS.producers, {"live-producer": now + 60_000})
    assert (await _check(storage)).status is ActivityStatus.ACTIVE
    assert int(redis_clean.hget(KEYS.ledger, "a")) >= now
