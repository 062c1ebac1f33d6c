"""Topic and partitioned-topic admin endpoints (Pulsar admin REST v2), with aiohttp.

Statuses and bodies follow Pulsar's ``PersistentTopicsBase`` / ``AdminResource``; the state
behind them is checked in Redis and through the binary protocol's answers.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pulsar
import pytest

from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage.keys import KeySchema
from tests.adminhttp import admin, call
from tests.conftest import TIMEOUT, data_keys, stream_key, wait_for

# The cluster pass of ./dev test runs this file on a Redis Cluster too: admin REST: topics,
# partitions, deletion (what a deleted topic leaves in Redis)
pytestmark = pytest.mark.cluster

RECEIVE_MS = int(TIMEOUT * 1000)


@pytest.fixture
def topic(topic: str) -> str:
    """The shared fixture's name, minus any "-partition-" a test name puts in it."""
    return topic.replace("-partition", "-part")


def base(gw: Any, domain: str = "persistent") -> str:
    return f"{gw.http_url}/admin/v2/{domain}/public/default"


def full(name: str, domain: str = "persistent") -> str:
    return f"{domain}://public/default/{name}"


def partitions(name: str, count: int, domain: str = "persistent") -> list[str]:
    return [f"{full(name, domain)}-partition-{i}" for i in range(count)]


# -- partitioned topics ---------------------------------------------------------------------


def test_create_get_list_partitioned_topic(gateway, topic, redis_clean):
    url = f"{base(gateway)}/{topic}/partitions"
    assert admin("PUT", url, 3) == (204, None)
    assert admin("GET", url) == (200, {"partitions": 3})
    status, body = admin("PUT", url, 3)
    assert status == 409
    assert body == {"reason": "This topic already exists"}
    assert admin("GET", f"{base(gateway)}/partitioned") == (200, [full(topic)])
    # getList lists the partitions, never the partitioned name (Pulsar creates them).
    assert admin("GET", base(gateway)) == (200, partitions(topic, 3))
    # The binary protocol answers the same count.
    assert gateway.call(gateway.gateway.services.topics.partitions(parse_topic_name(topic))) == 3
    assert (
        gateway.call(
            gateway.gateway.services.topics.partitions(parse_topic_name(f"{topic}-partition-1"))
        )
        == 0
    )
    # Metadata is one hash field in the namespace's hash.
    key = KeySchema().namespace_partitioned("public/default")
    assert redis_clean.hgetall(key) == {full(topic).encode(): b"3"}


def test_partitioned_metadata_body_object(gateway, topic):
    # Pulsar's second PUT variant takes a PartitionedTopicMetadata object.
    url = f"{base(gateway)}/{topic}/partitions"
    assert admin("PUT", url, {"partitions": 2, "properties": {"a": "b"}}) == (204, None)
    assert admin("GET", url) == (200, {"partitions": 2})


@pytest.mark.parametrize(
    ("raw", "status", "reason"),
    [
        ("0", 406, "Number of partitions should be more than 0"),
        ("-3", 406, "Number of partitions should be more than 0"),
        ("abc", 400, None),
        ("2.5", 400, None),
        ("true", 400, None),
        ("", 400, None),
    ],
)
def test_bad_partition_counts(gateway, raw, status, reason):
    # (The test's own name holds "-partition-", which the path may not.)
    url = f"{base(gateway)}/t-counts/partitions"
    got_status, body = admin("PUT", url, raw=raw)
    assert got_status == status
    assert "reason" in body
    if reason:
        assert body["reason"] == reason
    assert admin("GET", url)[0] == 404  # nothing was created


def test_bad_names(gateway, topic):
    status, body = admin("PUT", f"{base(gateway)}/{topic}-partition-1/partitions", 2)
    assert (status, body) == (
        412,
        {"reason": "Partitioned Topic Name should not contain '-partition-'"},
    )
    status, body = admin(
        "PUT", f"{gateway.http_url}/admin/v2/persistent/public/bad%20ns/{topic}", 2
    )
    assert status == 412
    status, body = admin("GET", f"{gateway.http_url}/admin/v2/persistent/public/bad%20ns")
    assert (status, body) == (412, {"reason": "Namespace name is not valid"})
    # The gateway keeps serving.
    assert admin("PUT", f"{base(gateway)}/{topic}/partitions", 2) == (204, None)


def test_get_metadata_of_missing_and_non_partitioned_topics(gateway, topic):
    url = f"{base(gateway)}/{topic}/partitions"
    status, body = admin("GET", url)
    assert (status, body) == (404, {"reason": f"Topic {full(topic)} not found"})
    assert admin("GET", url + "?checkAllowAutoCreation=true") == (200, {"partitions": 0})
    assert admin("PUT", f"{base(gateway)}/{topic}") == (204, None)
    assert admin("GET", url) == (200, {"partitions": 0})


def test_update_partitions(gateway, topic, redis_clean):
    url = f"{base(gateway)}/{topic}/partitions"
    assert admin("PUT", url, 2) == (204, None)
    assert admin("POST", url, 4) == (204, None)
    assert admin("GET", url) == (200, {"partitions": 4})
    assert admin("GET", base(gateway)) == (200, partitions(topic, 4))
    status, body = admin("POST", url, 3)
    assert status == 422
    assert body == {"reason": "Expect partitions 3 can't less than current partitions 4."}
    assert admin("POST", url, 0)[0] == 406
    assert admin("POST", url, 4) == (204, None)  # same count: nothing to do
    # Not a partitioned topic: 409, as Pulsar.
    other = f"{base(gateway)}/{topic}-other"
    assert admin("PUT", other) == (204, None)
    assert admin("POST", f"{other}/partitions", 3)[0] == 409
    assert admin("POST", f"{base(gateway)}/{topic}-missing/partitions", 3)[0] == 409


def test_update_refuses_unexpected_partition_unless_forced(gateway, client, topic):
    url = f"{base(gateway)}/{topic}/partitions"
    assert admin("PUT", url, 2) == (204, None)
    # A client writing straight to a partition beyond the count auto-creates it.
    client.create_producer(f"{topic}-partition-5").close()
    status, body = admin("POST", url, 3)
    assert status == 409
    assert "Exist unexpected topic partition" in body["reason"]
    assert admin("POST", url + "?force=true", 6) == (204, None)
    assert admin("GET", url) == (200, {"partitions": 6})


def test_create_partitioned_conflicts_with_existing_partitions(gateway, client, topic):
    client.create_producer(f"{topic}-partition-3").close()
    status, body = admin("PUT", f"{base(gateway)}/{topic}/partitions", 2)
    assert status == 409
    assert body["reason"] == (
        "The topic has a max partition index of 3, the number of partitions must be at least 4"
    )
    assert admin("PUT", f"{base(gateway)}/{topic}/partitions", 4) == (204, None)


def test_partitioned_and_non_partitioned_names_exclude_each_other(gateway, client, topic):
    client.create_producer(topic).close()  # auto-created non-partitioned topic
    assert admin("PUT", f"{base(gateway)}/{topic}/partitions", 2)[0] == 409
    assert admin("PUT", f"{base(gateway)}/{topic}")[0] == 409
    assert admin("PUT", f"{base(gateway)}/{topic}-b/partitions", 2) == (204, None)
    assert admin("PUT", f"{base(gateway)}/{topic}-b")[0] == 409
    assert admin("PUT", f"{base(gateway)}/{topic}-b-partition-0")[0] == 409


def test_domains_are_separate(gateway, topic):
    assert admin("PUT", f"{base(gateway, 'non-persistent')}/{topic}/partitions", 2) == (204, None)
    assert admin("PUT", f"{base(gateway)}/{topic}") == (204, None)
    assert admin("GET", f"{base(gateway, 'non-persistent')}/partitioned") == (
        200,
        [full(topic, "non-persistent")],
    )
    assert admin("GET", f"{base(gateway)}/partitioned") == (200, [])
    assert admin("GET", base(gateway, "non-persistent")) == (
        200,
        partitions(topic, 2, "non-persistent"),
    )
    assert admin("GET", base(gateway)) == (200, [full(topic)])


# -- deletion -------------------------------------------------------------------------------


def test_delete_topic_removes_its_keys(gateway, client, topic, redis_clean):
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    producer.send(b"x")
    producer.close()
    consumer.close()
    assert redis_clean.exists(stream_key(topic))
    assert admin("DELETE", f"{base(gateway)}/{topic}") == (204, None)
    keys = KeySchema().topic(parse_topic_name(topic))
    assert not redis_clean.exists(keys.stream, keys.subscriptions, keys.consumers("sub"))
    assert admin("GET", base(gateway)) == (200, [])
    status, body = admin("DELETE", f"{base(gateway)}/{topic}")
    assert (status, body) == (404, {"reason": f"Topic {full(topic)} not found"})
    # Only the namespace set and hash may be left (empty sets vanish in Redis).
    assert data_keys(redis_clean) == []


def test_delete_refused_while_consumer_connected_unless_forced(gateway, client, topic, redis_clean):
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    status, body = admin("DELETE", f"{base(gateway)}/{topic}")
    assert (status, body) == (412, {"reason": "Topic has active producers/subscriptions"})
    assert redis_clean.exists(stream_key(topic))
    assert admin("DELETE", f"{base(gateway)}/{topic}?force=true") == (204, None)
    # The gateway closed the consumer; the client re-subscribes, recreating the topic as
    # Pulsar's auto-creation does, and keeps consuming.
    wait_for(lambda: redis_clean.exists(stream_key(topic)))
    producer = client.create_producer(topic)
    producer.send(b"after")
    assert consumer.receive(RECEIVE_MS).data() == b"after"
    assert admin("GET", base(gateway)) == (200, [full(topic)])


def test_delete_refused_while_producer_connected(gateway, client, topic, redis_clean):
    producer = client.create_producer(topic)
    producer.send(b"x")
    status, body = admin("DELETE", f"{base(gateway)}/{topic}")
    assert (status, body) == (412, {"reason": "Topic has active producers/subscriptions"})
    producer.close()
    assert admin("DELETE", f"{base(gateway)}/{topic}") == (204, None)
    # the producer registry went with the topic
    keys = KeySchema().topic(parse_topic_name(topic))
    assert not redis_clean.exists(keys.producers, keys.producer_owners, keys.stream)


def test_delete_partitioned_topic(gateway, client, topic, redis_clean):
    url = f"{base(gateway)}/{topic}/partitions"
    assert admin("PUT", url, 3) == (204, None)
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    for i in range(6):
        producer.send(b"%d" % i)
    status, body = admin("DELETE", url)
    assert (status, body) == (412, {"reason": "Topic has active producers/subscriptions"})
    # Nothing was deleted: every partition is checked before any is deleted.
    assert admin("GET", url) == (200, {"partitions": 3})
    assert all(redis_clean.exists(stream_key(p)) for p in partitions(topic, 3))
    consumer.close()
    producer.close()
    # Plain delete on a partitioned topic is a 409, as Pulsar.
    assert admin("DELETE", f"{base(gateway)}/{topic}")[0] == 409
    assert admin("DELETE", url) == (204, None)
    assert admin("GET", url)[0] == 404
    assert not any(redis_clean.exists(stream_key(p)) for p in partitions(topic, 3))
    assert admin("GET", base(gateway)) == (200, [])
    assert admin("GET", f"{base(gateway)}/partitioned") == (200, [])
    assert data_keys(redis_clean) == []
    status, body = admin("DELETE", url)
    assert (status, body) == (404, {"reason": f"Partitioned Topic {full(topic)} not found"})


def test_delete_partitioned_on_non_partitioned_topic(gateway, topic):
    assert admin("PUT", f"{base(gateway)}/{topic}") == (204, None)
    status, body = admin("DELETE", f"{base(gateway)}/{topic}/partitions")
    assert status == 409
    assert "is a non-partitioned topic" in body["reason"]


def test_delete_removes_topic_policies(gateway, topic, redis_clean):
    assert admin("PUT", f"{base(gateway)}/{topic}/partitions", 2) == (204, None)
    assert (
        admin("POST", f"{base(gateway)}/{topic}/retention", {"retentionTimeInMinutes": 5})[0] == 204
    )
    assert admin("DELETE", f"{base(gateway)}/{topic}/partitions") == (204, None)
    assert admin("GET", f"{base(gateway)}/{topic}/retention") == (200, None)


# -- fleet ----------------------------------------------------------------------------------


def test_two_gateways_share_metadata_and_race_safely(gateway_factory, topic):
    a, b = gateway_factory(), gateway_factory()

    async def race() -> list[int]:
        urls = [f"{base(gw)}/{topic}/partitions" for gw in (a, b)] * 3
        results = await asyncio.gather(*(call("PUT", u, 4) for u in urls))
        return sorted(status for status, _ in results)

    assert asyncio.run(race()) == [204, 409, 409, 409, 409, 409]
    assert admin("GET", f"{base(b)}/{topic}/partitions") == (200, {"partitions": 4})
    assert admin("POST", f"{base(b)}/{topic}/partitions", 5) == (204, None)
    assert a.call(a.gateway.services.topics.partitions(parse_topic_name(topic))) == 5
