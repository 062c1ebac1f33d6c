"""Pulsar's admin operations over whole namespaces and single topics
(``adapters/http/admin/namespaces.py``, ``topics/operations.py``) and the policy catalogue
(``policies.py``), against a live gateway with a real HTTP client and the official
client."""

from __future__ import annotations

import re
import time
import zlib
from typing import Any

import pulsar
import pytest

from pulsar_gateway.adapters.http.admin.policies import PULSAR_POLICIES
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread
from tests.rawclient import raw

T = pb.BaseCommand.Type

NS = "/admin/v2/namespaces/public/default"
TOPICS = "/admin/v2/persistent/public/default"
FULL_BUNDLE = "0x00000000_0xffffffff"


def _produce(client: Any, topic: str, count: int, sub: str | None = None) -> None:
    if sub is not None:
        client.subscribe(topic, sub).close()
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(count):
        producer.send(f"m{i}".encode())
    producer.close()


def _backlog(gw: GatewayThread, name: str, sub: str) -> int:
    status, stats = admin("GET", f"{gw.http_url}{TOPICS}/{name}/stats")
    assert status == 200, stats
    return int(stats["subscriptions"][sub]["msgBacklog"])


# -- namespaces -------------------------------------------------------------------------------


def test_namespace_topics_by_mode(gateway: GatewayThread) -> None:
    base = gateway.http_url
    assert admin("PUT", f"{base}{TOPICS}/listed")[0] == 204
    assert admin("PUT", f"{base}{TOPICS}/listed-p/partitions", 2)[0] == 204
    status, topics = admin("GET", f"{base}{NS}/topics")
    assert status == 200
    assert "persistent://public/default/listed" in topics
    assert "persistent://public/default/listed-p-partition-1" in topics
    assert admin("GET", f"{base}{NS}/topics?mode=NON_PERSISTENT")[1] == []
    assert admin("GET", f"{base}{NS}/topics?mode=sideways")[0] == 400
    assert admin("GET", f"{base}/admin/v2/namespaces/public/nope/topics")[0] == 404


def test_clear_backlog_and_unsubscribe_across_the_namespace(
    gateway: GatewayThread, client: Any
) -> None:
    for name in ("cb-1", "cb-2"):
        _produce(client, f"persistent://public/default/{name}", 3, sub="a")
        client.subscribe(f"persistent://public/default/{name}", "b").close()
        _produce(client, f"persistent://public/default/{name}", 2)
    base = gateway.http_url
    assert _backlog(gateway, "cb-1", "a") == 5
    assert admin("POST", f"{base}{NS}/clearBacklog/a")[0] == 204
    assert (_backlog(gateway, "cb-1", "a"), _backlog(gateway, "cb-2", "a")) == (0, 0)
    assert _backlog(gateway, "cb-1", "b") == 2  # only subscription a was cleared
    assert admin("POST", f"{base}{NS}/{FULL_BUNDLE}/clearBacklog")[0] == 204
    assert _backlog(gateway, "cb-2", "b") == 0
    assert admin("POST", f"{base}{NS}/unsubscribe/b")[0] == 204
    for name in ("cb-1", "cb-2"):
        assert admin("GET", f"{base}{TOPICS}/{name}/subscriptions")[1] == ["a"]
    # a subscription with a connected consumer is not deleted (412, Pulsar's answer)
    consumer = client.subscribe("persistent://public/default/cb-1", "a")
    status, body = admin("POST", f"{base}{NS}/unsubscribe/a")
    assert status == 412, body
    consumer.close()


def test_bundles(gateway: GatewayThread) -> None:
    base = gateway.http_url
    assert admin("PUT", f"{base}{TOPICS}/hashed")[0] == 204
    assert admin("GET", f"{base}{NS}/bundles") == (
        200,
        {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1},
    )
    status, positions = admin("GET", f"{base}{NS}/{FULL_BUNDLE}/topicHashPositions")
    assert status == 200
    name = "persistent://public/default/hashed"
    # Pulsar's NamespaceBundleFactory.getLongHashCode: the CRC-32 of the name
    assert positions["topicHashPositions"][name] == zlib.crc32(name.encode())
    status, body = admin("PUT", f"{base}{NS}/{FULL_BUNDLE}/split")
    assert status == 501 and "bundle" in body["reason"]
    assert admin("DELETE", f"{base}{NS}/{FULL_BUNDLE}")[0] == 412
    assert admin("GET", f"{base}{NS}/0x00000000_0x7fffffff/topicHashPositions")[0] == 404


def test_namespace_properties(gateway: GatewayThread) -> None:
    base = gateway.http_url + NS
    assert admin("GET", f"{base}/properties") == (200, {})
    assert admin("PUT", f"{base}/properties", {"a": "1", "b": "2"})[0] == 204
    assert admin("PUT", f"{base}/property/c/3")[0] == 204
    assert admin("GET", f"{base}/properties") == (200, {"a": "1", "b": "2", "c": "3"})
    assert admin("GET", f"{base}/property/b") == (200, "2")
    assert admin("DELETE", f"{base}/property/b")[0] == 204
    assert admin("GET", f"{base}/property/b") == (200, None)
    assert admin("PUT", f"{base}/properties", {"a": 1})[0] == 412
    assert admin("DELETE", f"{base}/properties")[0] == 204
    assert admin("GET", f"{base}/properties") == (200, {})


def test_anti_affinity_groups(gateway: GatewayThread) -> None:
    base = gateway.http_url + "/admin/v2/namespaces"
    assert admin("PUT", f"{base}/public/other")[0] == 204
    for ns in ("default", "other"):
        assert admin("POST", f"{base}/public/{ns}/antiAffinity", "group-1")[0] == 204
    assert admin("GET", f"{base}/public/default/antiAffinity") == (200, "group-1")
    assert admin("GET", f"{base}/standalone/antiAffinity/group-1?tenant=public") == (
        200,
        ["public/default", "public/other"],
    )
    assert admin("GET", f"{base}/standalone/antiAffinity/group-1")[0] == 412
    assert admin("DELETE", f"{base}/public/other/antiAffinity")[0] == 204
    assert admin("GET", f"{base}/standalone/antiAffinity/group-1?tenant=public")[1] == [
        "public/default"
    ]


# -- topics -----------------------------------------------------------------------------------


def test_message_id_by_timestamp_uses_publish_times(gateway: GatewayThread, client: Any) -> None:
    topic = "persistent://public/default/by-time"
    producer = client.create_producer(topic, batching_enabled=False)
    ids = []
    for i in range(3):
        ids.append(producer.send(f"t{i}".encode()))
        time.sleep(0.01)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    times = [reader.read_next(int(TIMEOUT * 1000)).publish_timestamp() for _ in range(3)]
    url = f"{gateway.http_url}{TOPICS}/by-time/messageid"
    status, found = admin("GET", f"{url}/{times[1]}")
    assert status == 200
    assert (found["ledgerId"], found["entryId"]) == (ids[1].ledger_id(), ids[1].entry_id())
    status, found = admin("GET", f"{url}/{times[0] + 1}")  # just after the first: the second
    assert (found["ledgerId"], found["entryId"]) == (ids[1].ledger_id(), ids[1].entry_id())
    assert admin("GET", f"{url}/{times[2] + 1}")[0] == 404
    assert admin("GET", f"{url}/soon")[0] == 400
    assert admin("GET", f"{gateway.http_url}{TOPICS}/nothing-here/messageid/0")[0] == 404


def test_topic_properties(gateway: GatewayThread) -> None:
    base = f"{gateway.http_url}{TOPICS}/with-props"
    assert admin("PUT", base)[0] == 204
    assert admin("GET", f"{base}/properties") == (200, {})
    assert admin("PUT", f"{base}/properties", {"owner": "team-a", "tier": "1"})[0] == 204
    assert admin("DELETE", f"{base}/properties?key=tier")[0] == 204
    assert admin("GET", f"{base}/properties") == (200, {"owner": "team-a"})
    assert admin("DELETE", f"{base}/properties")[0] == 412  # the key is required
    assert admin("GET", f"{gateway.http_url}{TOPICS}/no-such/properties")[0] == 404


def test_backlog_internal_info_and_analysis(gateway: GatewayThread, client: Any) -> None:
    _produce(client, "persistent://public/default/analyzed", 4, sub="s")
    base = f"{gateway.http_url}{TOPICS}/analyzed"
    status, backlog = admin("GET", f"{base}/backlog")
    assert status == 200
    assert backlog["messageBacklog"] == 4 and backlog["cursorDetails"]["s"]["cursorBacklog"] == 4
    status, info = admin("GET", f"{base}/internal-info")
    assert status == 200 and sum(ledger["entries"] for ledger in info["ledgers"]) == 4
    status, analysis = admin("POST", f"{base}/subscription/s/analyzeBacklog")
    assert status == 200
    assert analysis["entries"] == analysis["filterAcceptedEntries"] == 4
    assert admin("POST", f"{base}/subscription/nope/analyzeBacklog")[0] == 404
    replicated = f"{base}/subscription/s/replicatedSubscriptionStatus"
    assert admin("GET", replicated) == (200, {"persistent://public/default/analyzed": False})
    assert admin("POST", replicated, False)[0] == 204
    assert admin("POST", replicated, True)[0] == 501
    assert admin("POST", replicated, raw="maybe")[0] == 400
    for method in ("GET", "PUT"):
        status, body = admin(method, f"{base}/offload")
        assert status == 501 and "Redis" in body["reason"]


def test_create_missed_partitions(gateway: GatewayThread, redis_clean: Any) -> None:
    base = f"{gateway.http_url}{TOPICS}/missed"
    assert admin("PUT", f"{base}/partitions", 3)[0] == 204
    listed = "pgw:ns:{public/default}:topics"
    redis_clean.srem(listed, "persistent://public/default/missed-partition-2")
    assert admin("POST", f"{base}/createMissedPartitions")[0] == 204
    assert redis_clean.sismember(listed, "persistent://public/default/missed-partition-2")
    assert (
        admin("POST", f"{gateway.http_url}{TOPICS}/not-partitioned/createMissedPartitions")[0]
        == 404
    )


def test_non_persistent_topics_of_the_bundle(gateway: GatewayThread, client: Any) -> None:
    producer = client.create_producer("non-persistent://public/default/np-listed")
    producer.send(b"x")
    status, topics = admin(
        "GET", f"{gateway.http_url}/admin/v2/non-persistent/public/default/{FULL_BUNDLE}"
    )
    assert status == 200 and "non-persistent://public/default/np-listed" in topics


# -- the policy catalogue ---------------------------------------------------------------------

_VALUES: dict[str, Any] = {
    "autoTopicCreation": {
        "allowAutoTopicCreation": True,
        "topicType": "partitioned",
        "defaultNumPartitions": 2,
    },
    "autoSubscriptionCreation": {"allowAutoSubscriptionCreation": False},
    "dispatchRate": {
        "dispatchThrottlingRateInMsg": 100,
        "dispatchThrottlingRateInByte": -1,
        "relativeToPublishRate": False,
        "ratePeriodInSecond": 1,
    },
    "subscriptionDispatchRate": {
        "dispatchThrottlingRateInMsg": 10,
        "dispatchThrottlingRateInByte": 1000,
        "relativeToPublishRate": False,
        "ratePeriodInSecond": 2,
    },
    "publishRate": {"publishThrottlingRateInMsg": 5, "publishThrottlingRateInByte": -1},
    "subscribeRate": {"subscribeThrottlingRatePerConsumer": 3, "ratePeriodInSecond": 30},
    "inactiveTopicPolicies": {
        "inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
        "maxInactiveDurationSeconds": 600,
        "deleteWhileInactive": True,
    },
    "encryptionRequired": True,
    "maxProducersPerTopic": 3,
    "maxConsumersPerTopic": 4,
    "maxConsumersPerSubscription": 2,
    "maxSubscriptionsPerTopic": 7,
    "maxTopicsPerNamespace": 100,
    "maxMessageSize": 1024,
    "subscriptionExpirationTime": 60,
    "subscriptionTypesEnabled": ["Shared", "Failover"],
    "subscriptionAuthMode": "Prefix",
    "replicationClusters": ["standalone"],
    "antiAffinityGroup": "g",
}

_SETTABLE = [
    spec
    for spec in PULSAR_POLICIES
    if spec.unavailable is None and spec.set_methods and "{" not in (spec.topic_segment or "")
]
_UNAVAILABLE = [spec for spec in PULSAR_POLICIES if spec.unavailable is not None]


def _paths(spec: Any, base: str) -> list[tuple[str, bool]]:
    """The policy's URLs, path parameters (a resource group's name) filled in."""
    out = []
    if spec.namespace_segment is not None:
        out.append((f"{base}{NS}/{spec.namespace_segment}", False))
    if spec.topic_segment is not None:
        out.append((f"{base}{TOPICS}/policy-topic/{spec.topic_segment}", True))
    return [(re.sub(r"{[^}]+}", "x", url), topic_level) for url, topic_level in out]


@pytest.mark.parametrize("spec", _SETTABLE, ids=lambda s: f"{s.name}")
def test_each_policy_is_stored_shown_and_removed(gateway: GatewayThread, spec: Any) -> None:
    value = _VALUES[spec.name]
    assert admin("PUT", f"{gateway.http_url}{TOPICS}/policy-topic")[0] == 204
    for url, _ in _paths(spec, gateway.http_url):
        method = spec.set_methods[0]
        assert admin(method, url, value) == (204, None), url
        assert admin("GET", url) == (200, value), url
        status, body = admin(method, url, {"not": "valid"} if not isinstance(value, dict) else 7)
        assert status in (400, 412) and isinstance(body["reason"], str), (url, status, body)
        if spec.removable:
            assert admin("DELETE", url)[0] == 204
            assert admin("GET", url) == (200, None)


def test_topic_policies_inherit_from_the_namespace_when_applied(gateway: GatewayThread) -> None:
    base = gateway.http_url
    assert admin("PUT", f"{base}{TOPICS}/inherits")[0] == 204
    topic_url = f"{base}{TOPICS}/inherits/maxProducers"
    assert admin("GET", f"{topic_url}?applied=true") == (200, 0)  # the gateway default
    assert admin("POST", f"{base}{NS}/maxProducersPerTopic", 5)[0] == 204
    assert admin("GET", topic_url) == (200, None)  # the topic's own: unset
    assert admin("GET", f"{topic_url}?applied=true") == (200, 5)  # in force: the namespace's
    assert admin("POST", topic_url, 2)[0] == 204
    assert admin("GET", f"{topic_url}?applied=true") == (200, 2)
    max_size = f"{base}{TOPICS}/inherits/maxMessageSize?applied=true"
    assert admin("GET", max_size) == (200, gateway.gateway.config.max_message_size)


def test_a_subscription_dispatch_rate_of_its_own(gateway: GatewayThread) -> None:
    base = f"{gateway.http_url}{TOPICS}/sub-rate"
    assert admin("PUT", base)[0] == 204
    rate = _VALUES["subscriptionDispatchRate"]
    assert admin("POST", f"{base}/sub-a/dispatchRate", rate)[0] == 204
    assert admin("GET", f"{base}/sub-a/dispatchRate") == (200, rate)
    assert admin("GET", f"{base}/sub-b/dispatchRate") == (200, None)
    assert admin("GET", f"{base}/subscriptionDispatchRate") == (200, None)


@pytest.mark.parametrize("spec", _UNAVAILABLE, ids=lambda s: f"{s.name}-{s.namespace_segment}")
def test_what_cannot_mean_anything_over_redis_says_why(gateway: GatewayThread, spec: Any) -> None:
    assert admin("PUT", f"{gateway.http_url}{TOPICS}/policy-topic")[0] == 204
    for url, _ in _paths(spec, gateway.http_url):
        if spec.readable:
            assert admin("GET", url) == (200, None), url
        for method in spec.set_methods:
            status, body = admin(method, url, {})
            assert status == 501, (url, status, body)
            assert len(body["reason"]) > 20
        if spec.removable:
            assert admin("DELETE", url)[0] == 204


def test_compaction_threshold_accepts_put_as_pulsar_admin_sends_it(
    gateway: GatewayThread,
) -> None:
    url = f"{gateway.http_url}{NS}/compactionThreshold"
    assert admin("PUT", url, 1048576) == (204, None)
    assert admin("GET", url) == (200, 1048576)


def test_subscription_properties_live_and_die_with_the_subscription(
    gateway: GatewayThread, redis_clean: Any
) -> None:
    base = f"{gateway.http_url}{TOPICS}/sub-props"
    url = f"{base}/subscription/s/properties"
    assert admin("PUT", f"{base}/subscription/s")[0] == 204
    assert admin("GET", url) == (200, {})
    assert admin("PUT", url, {"team": "a", "tier": "1"})[0] == 204
    assert admin("PUT", url, {"team": "b"})[0] == 204  # the map is replaced, as Pulsar does
    assert admin("GET", url) == (200, {"team": "b"})
    assert admin("PUT", url, ["not", "a", "map"])[0] == 412
    assert admin("GET", f"{base}/subscription/nope/properties")[0] == 404
    assert admin("PUT", f"{base}/subscription/nope/properties", {"a": "b"})[0] == 404
    assert admin("DELETE", f"{base}/subscription/s")[0] == 204
    key = KeySchema().topic("persistent://public/default/sub-props").subscription_properties("s")
    assert redis_clean.exists(key) == 0
    assert admin("PUT", f"{base}/subscription/s")[0] == 204  # a new subscription: no properties
    assert admin("GET", url) == (200, {})


def test_subscription_properties_on_a_partitioned_topic(gateway: GatewayThread) -> None:
    base = f"{gateway.http_url}{TOPICS}/sub-props-p"
    assert admin("PUT", f"{base}/partitions", 2)[0] == 204
    assert admin("PUT", f"{base}/subscription/s")[0] == 204
    assert admin("PUT", f"{base}/subscription/s/properties", {"k": "v"})[0] == 204
    assert admin("GET", f"{base}/subscription/s/properties") == (200, {"k": "v"})
    assert admin("GET", f"{base}-partition-1/subscription/s/properties") == (200, {"k": "v"})


def test_backlog_size_by_message_id(gateway: GatewayThread, client: Any) -> None:
    producer = client.create_producer("persistent://public/default/sized", batching_enabled=False)
    ids = [producer.send(b"x" * 1000) for _ in range(10)]
    url = f"{gateway.http_url}{TOPICS}/sized/backlogSize"

    def size_after(message_id: Any) -> int:
        status, size = admin(
            "PUT", url, {"ledgerId": message_id.ledger_id(), "entryId": message_id.entry_id()}
        )
        assert status == 200, size
        return int(size)

    after_first, after_fifth, after_last = (
        size_after(ids[0]),
        size_after(ids[4]),
        size_after(ids[9]),
    )
    assert after_last == 0
    assert after_first > after_fifth > 0
    # 9 and 5 entries of the same size: the estimate keeps their ratio
    assert after_first * 5 == pytest.approx(after_fifth * 9, rel=0.01)
    assert admin("PUT", url, {"ledgerId": "one"})[0] == 400
    assert admin("PUT", url, {"ledgerId": -1, "entryId": 0})[0] == 412


def test_truncate_moves_cursors_to_the_end_and_deletes_the_entries(
    gateway: GatewayThread, client: Any, redis_clean: Any
) -> None:
    topic = "persistent://public/default/truncated"
    _produce(client, topic, 5, sub="s")
    stream = KeySchema().topic(topic).stream
    assert redis_clean.xlen(stream) == 5
    status, _ = admin("DELETE", f"{gateway.http_url}{TOPICS}/truncated/truncate")
    assert status == 204
    assert _backlog(gateway, "truncated", "s") == 0
    assert redis_clean.xlen(stream) == 1  # the last entry keeps the ids going on
    consumer = client.subscribe(topic, "s")
    _produce(client, topic, 1)
    assert consumer.receive(int(TIMEOUT * 1000)).data() == b"m0"
    base = f"{gateway.http_url}/admin/v2"
    assert admin("DELETE", f"{base}/persistent/public/default/no-such/truncate")[0] == 404
    assert admin("DELETE", f"{base}/non-persistent/public/default/np/truncate")[0] == 405


# -- policies the subscribe path enforces -------------------------------------------------------


def test_subscription_types_enabled_refuses_other_types(
    gateway: GatewayThread, client: Any
) -> None:
    base = gateway.http_url
    assert admin("POST", f"{base}{NS}/subscriptionTypesEnabled", ["Shared", "Failover"])[0] == 204
    topic = "persistent://public/default/typed"
    client.subscribe(topic, "shared", consumer_type=pulsar.ConsumerType.Shared).close()
    with pytest.raises(pulsar.NotAllowedError):
        client.subscribe(topic, "exclusive", consumer_type=pulsar.ConsumerType.Exclusive)
    # the topic's own value takes precedence over its namespace's
    assert admin("PUT", f"{base}{TOPICS}/typed")[0] in (204, 409)
    assert admin("POST", f"{base}{TOPICS}/typed/subscriptionTypesEnabled", ["Exclusive"])[0] == 204
    client.subscribe(topic, "exclusive", consumer_type=pulsar.ConsumerType.Exclusive).close()
    with pytest.raises(pulsar.NotAllowedError):
        client.subscribe(topic, "shared-2", consumer_type=pulsar.ConsumerType.Shared)


def test_auto_subscription_creation_off_refuses_new_subscriptions(
    gateway: GatewayThread, client: Any
) -> None:
    base = gateway.http_url
    off = {"allowAutoSubscriptionCreation": False}
    assert admin("POST", f"{base}{NS}/autoSubscriptionCreation", off)[0] == 204
    topic = "persistent://public/default/no-auto-sub"
    assert admin("PUT", f"{base}{TOPICS}/no-auto-sub")[0] == 204
    # ERROR SubscriptionNotFound, as ServerCnx.handleSubscribe answers (the C++ client takes
    # it for retryable and retries until its operation timeout)
    with raw(gateway) as conn:
        conn.handshake()
        refused = conn.request(
            T.SUBSCRIBE,
            T.ERROR,
            topic=topic,
            subscription="new-sub",
            subType=pb.CommandSubscribe.Exclusive,
            consumer_id=1,
        ).error
        assert refused.error == pb.SubscriptionNotFound
        assert refused.message == "Subscription does not exist"
    # a subscription created with the admin API may be used; a reader needs none
    assert admin("PUT", f"{base}{TOPICS}/no-auto-sub/subscription/made")[0] == 204
    client.subscribe(topic, "made").close()
    client.create_reader(topic, pulsar.MessageId.earliest).close()
    assert admin("DELETE", f"{base}{NS}/autoSubscriptionCreation")[0] == 204
    client.subscribe(topic, "new-sub").close()


def test_max_producers_refuses_one_more(gateway: GatewayThread, client: Any) -> None:
    base = gateway.http_url
    topic = "persistent://public/default/few-producers"
    assert admin("PUT", f"{base}{TOPICS}/few-producers")[0] == 204
    assert admin("POST", f"{base}{TOPICS}/few-producers/maxProducers", 1)[0] == 204
    first = client.create_producer(topic)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)
    first.close()
    client.create_producer(topic).close()


def test_max_subscriptions_and_consumers_per_subscription(
    gateway: GatewayThread, client: Any
) -> None:
    base = gateway.http_url
    topic = "persistent://public/default/few-subs"
    assert admin("POST", f"{base}{NS}/maxSubscriptionsPerTopic", 1)[0] == 204
    assert admin("POST", f"{base}{NS}/maxConsumersPerSubscription", 1)[0] == 204
    shared = pulsar.ConsumerType.Shared
    first = client.subscribe(topic, "only", consumer_type=shared)
    with pytest.raises(pulsar.NotAllowedError):
        client.subscribe(topic, "another", consumer_type=shared)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "only", consumer_type=shared)
    first.close()
    client.subscribe(topic, "only", consumer_type=shared).close()  # room again


def test_backlog_size_of_positions_past_every_entry(gateway: GatewayThread) -> None:
    url = f"{gateway.http_url}{TOPICS}/far/backlogSize"
    assert admin("PUT", f"{gateway.http_url}{TOPICS}/far")[0] == 204
    assert admin("PUT", url, {"ledgerId": 2**62, "entryId": 2**62}) == (200, 0)
    assert admin("PUT", url, {"ledgerId": 2**64, "entryId": 0})[0] == 412
