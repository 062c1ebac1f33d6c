"""Message TTL and retention (docs/lifecycle.md) with the official client and a real Redis.

Rounds are stepped by calling ``broker.maintenance.run_once()`` (the background loop runs
once an hour here), except in the test that proves the loop itself runs. Effects are
checked from both sides: what the client receives, and the stream and consumer groups in
Redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import aiohttp
import pulsar
import pytest

from pulsar_gateway.core.admin.topic_maintenance import RoundResult
from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread, stream_key, wait_for
from tests.helpers import assert_nothing_more
from tests.rawclient import raw

# The cluster pass of ./dev test runs this file on a Redis Cluster too: TTL and retention
# (policies, the fleet-coordinated task)
pytestmark = pytest.mark.cluster

Shared = pulsar.ConsumerType.Shared
Exclusive = pulsar.ConsumerType.Exclusive
Earliest = pulsar.InitialPosition.Earliest
RECEIVE_MS = int(TIMEOUT * 1000)
#: The background loop stays out of the way: tests step rounds themselves.
NO_LOOP = 3600.0
T = pb.BaseCommand.Type


def produce(client: Any, topic: str, count: int, size: int = 0) -> list[Any]:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m-{i}".encode() + b"x" * max(0, size - 4)) for i in range(count)]
    producer.close()
    return ids


def pending(redis: Any, topic: str, sub: str) -> int:
    return int(redis.xpending(stream_key(topic), sub)["pending"])


def last_delivered(redis: Any, topic: str, sub: str) -> str:
    for group in redis.xinfo_groups(stream_key(topic)):
        if group["name"].decode() == sub:
            return str(group["last-delivered-id"].decode())
    raise AssertionError(f"no group {sub}")


def stream_ids(redis: Any, topic: str) -> list[str]:
    return [entry_id.decode() for entry_id, _ in redis.xrange(stream_key(topic))]


def entry_id(msg_id: Any) -> str:
    return f"{msg_id.ledger_id()}-{msg_id.entry_id()}"


def step(gateway: GatewayThread) -> RoundResult:
    result: RoundResult = gateway.call(gateway.gateway.core.maintenance.run_once())
    return result


@pytest.fixture
def make_gateway(
    gateway_factory: Callable[..., GatewayThread],
) -> Callable[..., GatewayThread]:
    def make(**overrides: Any) -> GatewayThread:
        overrides.setdefault("topic_maintenance_interval_seconds", NO_LOOP)
        return gateway_factory(**overrides)

    return make


# -- message TTL -----------------------------------------------------------------------------


def test_ttl_acknowledges_unacked_and_undelivered_messages(
    make_gateway: Callable[..., GatewayThread], client_factory: Any, redis_clean: Any, topic: str
) -> None:
    gw = make_gateway(
        default_message_ttl_seconds=1, default_retention_minutes=-1, default_retention_mb=-1
    )
    client = client_factory(gw.url)
    # "idle" never receives (its cursor stays behind); "holding" receives and never acks.
    client.subscribe(topic, "idle", consumer_type=Shared).close()
    holding = client.subscribe(topic, "holding", consumer_type=Shared)
    ids = produce(client, topic, 3)
    for _ in ids:
        holding.receive(timeout_millis=RECEIVE_MS)
    wait_for(lambda: pending(redis_clean, topic, "holding") == 3)

    assert step(gw).expired == 0  # younger than the TTL
    time.sleep(1.1)
    result = step(gw)
    assert result.expired == 6  # 3 entries on each subscription

    assert pending(redis_clean, topic, "holding") == 0
    assert last_delivered(redis_clean, topic, "idle") == entry_id(ids[-1])
    # Retention is infinite here: expiry acknowledges, it does not delete.
    assert len(stream_ids(redis_clean, topic)) == 3
    # Nothing comes back: not to a new consumer of "idle", not as a redelivery on "holding".
    idle = client.subscribe(topic, "idle", consumer_type=Shared)
    assert_nothing_more(idle)
    holding.close()
    holding = client.subscribe(topic, "holding", consumer_type=Shared)
    assert_nothing_more(holding)
    # Later messages are delivered as usual.
    produce(client, topic, 1)
    assert idle.receive(timeout_millis=RECEIVE_MS).data() == b"m-0"
    assert holding.receive(timeout_millis=RECEIVE_MS).data() == b"m-0"


def test_ttl_zero_never_expires(
    make_gateway: Callable[..., GatewayThread], client_factory: Any, redis_clean: Any, topic: str
) -> None:
    gw = make_gateway(default_retention_minutes=-1, default_retention_mb=-1)
    client = client_factory(gw.url)
    client.subscribe(topic, "idle", consumer_type=Shared).close()
    produce(client, topic, 2)
    time.sleep(1.1)
    assert step(gw).expired == 0
    consumer = client.subscribe(topic, "idle", consumer_type=Shared)
    got = [consumer.receive(timeout_millis=RECEIVE_MS).data() for _ in range(2)]
    assert got == [b"m-0", b"m-1"]


def test_ttl_and_expire_by_age_go_by_publish_time(
    make_gateway: Callable[..., GatewayThread], client_factory: Any, topic: str
) -> None:
    """Pulsar's MessageImpl.isEntryExpired compares the message's publish time (broker entry
    metadata being off): messages a producer stamped hours ago expire at once under a
    one-hour TTL, however recently they were stored."""
    gw = make_gateway(
        default_message_ttl_seconds=3600, default_retention_minutes=-1, default_retention_mb=-1
    )
    client = client_factory(gw.url)
    for sub in ("idle", "admin"):
        client.subscribe(topic, sub, consumer_type=Shared).close()
    now = int(time.time() * 1000)
    with raw(gw) as conn:
        conn.handshake()
        name = conn.create_producer(topic)
        for seq, hours_ago in enumerate((3, 2, 0)):
            published = now - hours_ago * 3_600_000
            conn.send_message(1, seq, name, f"m-{seq}".encode(), publish_time=published)
            conn.expect(T.SEND_RECEIPT)
    # expireMessages/{seconds} on one subscription: the two old ones
    url = f"{gw.http_url}/admin/v2/persistent/public/default/{parse_topic_name(topic).local_name}"
    status, _ = admin("POST", f"{url}/subscription/admin/expireMessages/3600")
    assert status == 204
    consumer = client.subscribe(topic, "admin", consumer_type=Shared)
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"m-2"
    assert_nothing_more(consumer)
    # the TTL round: the same two on the other subscription
    assert step(gw).expired == 2
    idle = client.subscribe(topic, "idle", consumer_type=Shared)
    assert idle.receive(timeout_millis=RECEIVE_MS).data() == b"m-2"
    assert_nothing_more(idle)


# -- retention -------------------------------------------------------------------------------


def test_default_retention_removes_only_what_every_subscription_acked(
    make_gateway: Callable[..., GatewayThread], client_factory: Any, redis_clean: Any, topic: str
) -> None:
    gw = make_gateway()  # Pulsar's defaults: retention 0 minutes / 0 MB, no TTL
    client = client_factory(gw.url)
    fast = client.subscribe(topic, "fast", consumer_type=Shared)
    slow = client.subscribe(topic, "slow", consumer_type=Exclusive)
    ids = produce(client, topic, 5)
    for _ in range(5):
        fast.acknowledge(fast.receive(timeout_millis=RECEIVE_MS))
    # "slow" acks the first two only; the third stays unacked, the rest unread or unacked.
    for i in range(3):
        msg = slow.receive(timeout_millis=RECEIVE_MS)
        if i < 2:
            slow.acknowledge(msg)
    wait_for(lambda: pending(redis_clean, topic, "fast") == 0)
    wait_for(lambda: pending(redis_clean, topic, "slow") == 3)

    result = step(gw)
    assert (result.trimmed, result.expired) == (2, 0)
    assert stream_ids(redis_clean, topic) == [entry_id(i) for i in ids[2:]]
    # The unacked messages are all still delivered.
    slow.close()
    slow = client.subscribe(topic, "slow", consumer_type=Exclusive)
    got = [slow.receive(timeout_millis=RECEIVE_MS).data() for _ in range(3)]
    assert got == [b"m-2", b"m-3", b"m-4"]
    for msg_id in ids[2:]:
        slow.acknowledge(msg_id)
    wait_for(lambda: pending(redis_clean, topic, "slow") == 0)
    assert step(gw).trimmed == 3
    assert stream_ids(redis_clean, topic) == []
    # The stream survives emptied: ids keep growing, subscriptions keep their cursors.
    later = produce(client, topic, 1)
    assert entry_id(later[0]) > entry_id(ids[-1])
    assert slow.receive(timeout_millis=RECEIVE_MS).data() == b"m-0"


def test_topic_without_subscriptions_is_kept_under_the_default_retention(
    make_gateway: Callable[..., GatewayThread], client_factory: Any, redis_clean: Any, topic: str
) -> None:
    gw = make_gateway()
    client = client_factory(gw.url)
    produce(client, topic, 3)
    assert step(gw).trimmed == 0
    assert len(stream_ids(redis_clean, topic)) == 3
    consumer = client.subscribe(topic, "late", initial_position=Earliest)
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"m-0"


def test_retention_time_keeps_acknowledged_messages(
    make_gateway: Callable[..., GatewayThread], client_factory: Any, redis_clean: Any, topic: str
) -> None:
    gw = make_gateway(default_retention_minutes=10, default_retention_mb=-1)
    client = client_factory(gw.url)
    consumer = client.subscribe(topic, "s", consumer_type=Shared)
    produce(client, topic, 3)
    for _ in range(3):
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    wait_for(lambda: pending(redis_clean, topic, "s") == 0)
    assert step(gw).trimmed == 0
    # Still readable from the start by a reader, as Pulsar's retention promises.
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert reader.read_next(timeout_millis=RECEIVE_MS).data() == b"m-0"


def test_retention_size_trims_oldest_acknowledged_down_to_the_limit(
    make_gateway: Callable[..., GatewayThread], client_factory: Any, redis_clean: Any, topic: str
) -> None:
    gw = make_gateway(default_retention_minutes=-1, default_retention_mb=1)
    client = client_factory(gw.url)
    consumer = client.subscribe(topic, "s", consumer_type=Shared)
    ids = produce(client, topic, 30, size=100_000)  # ~3 MB
    for _ in ids:
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    wait_for(lambda: pending(redis_clean, topic, "s") == 0)
    result = step(gw)
    left = stream_ids(redis_clean, topic)
    assert 0 < len(left) < 30
    assert result.trimmed == 30 - len(left)
    assert left == [entry_id(i) for i in ids[30 - len(left) :]]  # the newest stay
    assert redis_clean.memory_usage(stream_key(topic)) <= 1024 * 1024
    assert len(left) >= 8  # and about 1 MB of them
    assert step(gw).trimmed == 0  # already under the limit


def test_budget_spreads_a_large_removal_over_several_calls(
    make_gateway: Callable[..., GatewayThread], client_factory: Any, redis_clean: Any, topic: str
) -> None:
    gw = make_gateway()
    client = client_factory(gw.url)
    consumer = client.subscribe(topic, "s", consumer_type=Shared)
    producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
    for i in range(2500):
        producer.send_async(b"%d" % i, None)
    producer.flush()
    for _ in range(2500):
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    wait_for(lambda: pending(redis_clean, topic, "s") == 0)
    assert step(gw).trimmed == 2500  # BUDGET is 1000: three calls in one round
    assert redis_clean.xlen(stream_key(topic)) == 0


# -- the fleet and the loop --------------------------------------------------------------


def test_one_gateway_of_the_fleet_does_each_topic_per_round(
    make_gateway: Callable[..., GatewayThread], client_factory: Any, redis_clean: Any, topic: str
) -> None:
    first, second = make_gateway(), make_gateway()
    client = client_factory(first.url)
    consumer = client.subscribe(topic, "s", consumer_type=Shared)
    produce(client, topic, 2)
    for _ in range(2):
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    wait_for(lambda: pending(redis_clean, topic, "s") == 0)
    done = step(first)
    skipped = step(second)
    assert (done.topics, done.trimmed) == (1, 2)
    assert (skipped.topics, skipped.skipped) == (0, 1)
    lock = KeySchema().topic(parse_topic_name(topic)).maintenance_lock
    assert redis_clean.get(lock).decode() == first.gateway.core.gateway_id
    assert 0 < redis_clean.pttl(lock) <= NO_LOOP * 1000


def test_background_rounds_apply_ttl_and_report_metrics(
    make_gateway: Callable[..., GatewayThread], client_factory: Any, redis_clean: Any, topic: str
) -> None:
    gw = make_gateway(topic_maintenance_interval_seconds=0.2, default_message_ttl_seconds=1)
    client = client_factory(gw.url)
    client.subscribe(topic, "idle", consumer_type=Shared).close()
    produce(client, topic, 2)
    # TTL acknowledges them, then the default retention (0) removes them.
    wait_for(lambda: redis_clean.xlen(stream_key(topic)) == 0, timeout=TIMEOUT)

    async def scrape() -> str:
        async with aiohttp.ClientSession() as http, http.get(f"{gw.http_url}/metrics") as r:
            return await r.text()

    text = gw.call(scrape())
    assert "pulsar_gateway_ttl_expired_entries_total 2.0" in text
    assert "pulsar_gateway_retention_trimmed_entries_total 2.0" in text


def test_admin_policies_override_the_defaults(
    make_gateway: Callable[..., GatewayThread], client_factory: Any, redis_clean: Any, topic: str
) -> None:
    gw = make_gateway()
    client = client_factory(gw.url)
    other = f"{topic}-nosub"
    admin = f"{gw.http_url}/admin/v2"

    async def configure() -> None:
        async with aiohttp.ClientSession() as http:
            for url, kwargs in [
                # namespace: infinite retention; topic: TTL 1 s; the other topic: none
                (
                    f"{admin}/namespaces/public/default/retention",
                    {"json": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}},
                ),
                (f"{admin}/persistent/public/default/{topic}/messageTTL?messageTTL=1", {}),
                (
                    f"{admin}/persistent/public/default/{other}/retention",
                    {"json": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}},
                ),
            ]:
                async with http.post(url, **kwargs) as response:
                    assert response.status == 204, await response.text()

    gw.call(configure())
    client.subscribe(topic, "idle", consumer_type=Shared).close()
    produce(client, topic, 2)
    produce(client, other, 2)
    time.sleep(1.1)
    result = step(gw)
    assert (result.expired, result.trimmed) == (2, 2)
    # TTL acknowledged the topic's messages, the namespace's infinite retention keeps them;
    assert redis_clean.xlen(stream_key(topic)) == 2
    # an explicit retention policy applies to a topic without subscriptions.
    assert redis_clean.xlen(stream_key(other)) == 0
