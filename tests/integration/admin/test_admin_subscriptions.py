"""Subscription and cursor admin endpoints (Pulsar admin REST v2), with aiohttp and the
official client (pulsar-client 3.13): each operation's effect is observed on real consumers.

Paths and statuses follow ``PersistentTopics.java`` / ``PersistentTopicsBase.java``; see
``pulsar_gateway/adapters/http/topics/subscriptions.py``. Consumers that must see a cursor
move start with an empty receiver queue (everything acknowledged), because a client keeps
what it prefetched when its consumer is reconnected.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pulsar
import pytest

from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.entry_codec import parse_blob
from tests.adminhttp import admin, admin_raw
from tests.conftest import TIMEOUT, GatewayThread, stream_key, wait_for
from tests.helpers import produce, receive_payloads

RECEIVE_MS = int(TIMEOUT * 1000)
#: How long "nothing arrives" is watched for.
QUIET_MS = 300

Shared = pulsar.ConsumerType.Shared
Exclusive = pulsar.ConsumerType.Exclusive


# -- helpers ---------------------------------------------------------------------------------


def topic_url(gw: GatewayThread, topic: str, domain: str = "persistent") -> str:
    return f"{gw.http_url}/admin/v2/{domain}/public/default/{topic}"


def sub_url(gw: GatewayThread, topic: str, sub: str, domain: str = "persistent") -> str:
    return f"{topic_url(gw, topic, domain)}/subscription/{sub}"


def ok(status_body: tuple[int, Any]) -> Any:
    status, body = status_body
    assert status in (200, 204), body
    return body


def produce_batches(client: Any, topic: str, batches: int, size: int) -> list[Any]:
    """``batches`` client batches of ``size`` messages ``b"b<batch>-<i>"`` (one entry each)."""
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=size,
        batching_max_publish_delay_ms=60_000,
    )
    ids: list[Any] = []
    for b in range(batches):
        sent: list[Any] = []
        for i in range(size):
            producer.send_async(f"b{b}-{i}".encode(), lambda res, mid, s=sent: s.append(mid))
        producer.flush()
        wait_for(lambda s=sent: len(s) == size)
        ids += sent
    producer.close()
    return ids


def assert_nothing(consumer: Any) -> None:
    with pytest.raises(pulsar.Timeout):
        msg = consumer.receive(timeout_millis=QUIET_MS)
        pytest.fail(f"unexpected {msg.data()!r}")


def names(count: int, prefix: str = "m", start: int = 0) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(start, count)]


def position(mid: Any, **extra: Any) -> dict[str, Any]:
    return {"ledgerId": mid.ledger_id(), "entryId": mid.entry_id(), **extra}


def publish_time(redis: Any, topic: str, message_id: Any) -> int:
    """The ``MessageMetadata.publish_time`` the producer stored with ``message_id``."""
    sid = f"{message_id.ledger_id()}-{message_id.entry_id()}"
    ((_, fields),) = redis.xrange(stream_key(topic), sid, sid)
    return int(parse_blob(fields[b"m"]).metadata.publish_time)


def consumer_uids(redis: Any, topic: str, sub: str) -> set[bytes]:
    keys = KeySchema().topic(parse_topic_name(topic))
    return set(redis.zrange(keys.consumers(sub), 0, -1))


# -- list, create, delete ----------------------------------------------------------------------


def test_create_list_and_delete(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    produce(client, topic, 3)
    assert admin("GET", f"{topic_url(gateway, topic)}/subscriptions") == (200, [])
    assert admin("PUT", sub_url(gateway, topic, "early"), "earliest") == (204, None)
    assert admin("PUT", sub_url(gateway, topic, "late")) == (204, None)  # default: latest
    assert admin("PUT", sub_url(gateway, topic, "early"), "latest") == (
        409,
        {"reason": "Subscription already exists for topic"},
    )
    assert admin("GET", f"{topic_url(gateway, topic)}/subscriptions") == (200, ["early", "late"])

    # Created at earliest, the subscription has the old messages; at latest, only new ones.
    early = client.subscribe(topic, "early", consumer_type=Shared)
    late = client.subscribe(topic, "late", consumer_type=Shared)
    assert receive_payloads(early, 3) == names(3)
    produce(client, topic, 1, prefix="n")
    assert receive_payloads(late, 1) == [b"n-0"]
    assert receive_payloads(early, 1) == [b"n-0"]
    early.close()
    late.close()

    assert admin("DELETE", sub_url(gateway, topic, "early")) == (204, None)
    assert admin("GET", f"{topic_url(gateway, topic)}/subscriptions") == (200, ["late"])
    assert admin("DELETE", sub_url(gateway, topic, "early")) == (
        404,
        {"reason": "Subscription not found"},
    )


def test_create_at_message_id(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    ids = produce(client, topic, 5)
    # Pulsar's body may be a MessageIdImpl or a ResetCursorData: delivery starts at the id.
    assert admin("PUT", sub_url(gateway, topic, "at"), position(ids[2], partitionIndex=-1)) == (
        204,
        None,
    )
    consumer = client.subscribe(topic, "at")
    assert receive_payloads(consumer, 3) == names(5, start=2)
    assert_nothing(consumer)


def test_subscriptions_of_unknown_topic(gateway, topic):
    status, body = admin("GET", f"{topic_url(gateway, topic)}/subscriptions")
    assert status == 404
    assert "not found" in body["reason"]


def test_delete_refused_while_consumers_connected_then_forced_across_gateways(
    gateway_factory, client_factory, redis_clean, topic
):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client_b = client_factory(gw_b.url)
    consumer = client_b.subscribe(topic, "busy", consumer_type=Shared)
    produce(client_b, topic, 2)
    assert receive_payloads(consumer, 2) == names(2)
    before = consumer_uids(redis_clean, topic, "busy")

    assert admin("DELETE", sub_url(gw_a, topic, "busy")) == (
        412,
        {"reason": "Subscription has active connected consumers"},
    )
    assert admin("GET", f"{topic_url(gw_a, topic)}/subscriptions") == (200, ["busy"])

    # Forced from the other gateway: the consumer is disconnected, its client subscribes
    # again (a new consumer, the subscription recreated at latest), and keeps receiving.
    assert admin("DELETE", sub_url(gw_a, topic, "busy") + "?force=true") == (204, None)
    wait_for(lambda: (after := consumer_uids(redis_clean, topic, "busy")) and not after & before)
    produce(client_b, topic, 1, prefix="n")
    assert receive_payloads(consumer, 1) == [b"n-0"]


# -- skip, skip_all --------------------------------------------------------------------------


def test_skip_then_the_consumer_starts_after(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    ok(admin("PUT", sub_url(gateway, topic, "s"), "earliest"))
    produce(client, topic, 6)
    assert admin("POST", sub_url(gateway, topic, "s") + "/skip/3") == (204, None)
    consumer = client.subscribe(topic, "s")
    assert receive_payloads(consumer, 3) == names(6, start=3)
    assert_nothing(consumer)


def test_skip_takes_unacked_messages_first(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    consumer = client.subscribe(topic, "s", consumer_type=Shared, receiver_queue_size=2)
    produce(client, topic, 5)
    # Two delivered, not acknowledged: the backlog starts with them (Pulsar's mark-delete
    # order), so skipping 3 drops those two and m-2.
    first = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(2)]
    assert [m.data() for m in first] == names(2)
    consumer.close()
    assert admin("POST", sub_url(gateway, topic, "s") + "/skip/3") == (204, None)
    again = client.subscribe(topic, "s", consumer_type=Shared)
    assert receive_payloads(again, 2) == names(5, start=3)
    assert_nothing(again)


def test_skip_counts_a_batch_as_one_entry(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    ok(admin("PUT", sub_url(gateway, topic, "s"), "earliest"))
    produce_batches(client, topic, batches=2, size=4)
    # Pulsar skips entries (ManagedCursor.asyncSkipEntries): one batch of 4 messages.
    assert admin("POST", sub_url(gateway, topic, "s") + "/skip/1") == (204, None)
    consumer = client.subscribe(topic, "s")
    assert receive_payloads(consumer, 4) == [f"b1-{i}".encode() for i in range(4)]
    assert_nothing(consumer)


def test_skip_all_clears_the_backlog_for_connected_consumers(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    consumer = client.subscribe(topic, "s", receiver_queue_size=1)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        producer.send(f"m-{i}".encode())
    assert admin("POST", sub_url(gateway, topic, "s") + "/skip_all") == (204, None)
    # What the client prefetched before (a message or two) may still come; nothing after.
    leftovers = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=QUIET_MS)
        except pulsar.Timeout:
            break
        leftovers.append(msg.data())
        consumer.acknowledge(msg)
    assert len(leftovers) <= 3, leftovers
    producer.send(b"after")
    assert receive_payloads(consumer, 1) == [b"after"]
    url = f"{topic_url(gateway, topic)}/internalStats"
    wait_for(
        lambda: (
            (stats := ok(admin("GET", url)))["cursors"]["s"]["markDeletePosition"]
            == stats["lastConfirmedEntry"]
        )
    )


def test_skip_all_on_shared_drops_scheduled_messages(gateway, client_factory, redis_clean, topic):
    client = client_factory(gateway.url)
    consumer = client.subscribe(topic, "s", consumer_type=Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"later-0", deliver_after=timedelta(minutes=5))
    producer.send(b"later-1", deliver_after=timedelta(minutes=5))
    producer.send(b"now")
    assert receive_payloads(consumer, 1) == [b"now"]
    listing = f"{sub_url(gateway, topic, 's')}/scheduled"
    wait_for(lambda: ok(admin("GET", listing))["total"] == 2)

    # The scheduled messages are the backlog: peek shows the first, skip 1 takes it.
    status, headers, body = admin_raw("GET", sub_url(gateway, topic, "s") + "/position/1")
    assert (status, body) == (200, b"later-0")
    assert headers["x-pulsar-deliver-at-time"][0].endswith("Z")
    assert admin("POST", sub_url(gateway, topic, "s") + "/skip/1") == (204, None)
    assert ok(admin("GET", listing))["total"] == 1
    assert admin("POST", sub_url(gateway, topic, "s") + "/skip_all") == (204, None)
    assert ok(admin("GET", listing))["total"] == 0
    delayed = KeySchema().topic(parse_topic_name(topic)).delayed("s")
    assert redis_clean.exists(delayed) == 0
    assert redis_clean.xpending(stream_key(topic), "s")["pending"] == 0
    assert_nothing(consumer)


# -- expire ------------------------------------------------------------------------------------


def test_expire_by_age_acknowledges_old_messages(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    ok(admin("PUT", sub_url(gateway, topic, "s"), "earliest"))
    produce(client, topic, 3, prefix="old")
    time.sleep(1.2)
    produce(client, topic, 2, prefix="new")
    assert admin("POST", sub_url(gateway, topic, "s") + "/expireMessages/1") == (204, None)
    consumer = client.subscribe(topic, "s")
    assert receive_payloads(consumer, 2) == names(2, prefix="new")
    assert_nothing(consumer)


def test_expire_not_issued_on_an_empty_backlog(gateway, client_factory, topic):
    ok(admin("PUT", sub_url(gateway, topic, "s"), "latest"))
    status, body = admin("POST", sub_url(gateway, topic, "s") + "/expireMessages/10")
    assert status == 409
    assert body["reason"].startswith("Expire message by timestamp not issued on topic")
    # A connected consumer with a short backlog whose oldest message is younger than the
    # age: "almost caught up", not issued either (PersistentSubscription.expireMessages).
    client = client_factory(gateway.url)
    consumer = client.subscribe(topic, "s", receiver_queue_size=1)
    produce(client, topic, 3)
    consumer.receive(timeout_millis=RECEIVE_MS)
    assert admin("POST", sub_url(gateway, topic, "s") + "/expireMessages/60")[0] == 409
    # With an age they all exceed, it is issued and the backlog is acknowledged.
    time.sleep(1.1)
    assert admin("POST", sub_url(gateway, topic, "s") + "/expireMessages/1") == (204, None)
    stats = ok(admin("GET", f"{topic_url(gateway, topic)}/internalStats"))
    assert stats["cursors"]["s"]["markDeletePosition"] == stats["lastConfirmedEntry"]


def test_expire_by_position(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    ok(admin("PUT", sub_url(gateway, topic, "s"), "earliest"))
    ids = produce(client, topic, 5)
    # Everything up to and including the position is acknowledged.
    assert admin("POST", sub_url(gateway, topic, "s") + "/expireMessages", position(ids[2])) == (
        204,
        None,
    )
    consumer = client.subscribe(topic, "s")
    assert receive_payloads(consumer, 2) == names(5, start=3)
    # A position after the last entry: not issued.
    beyond = {"ledgerId": ids[-1].ledger_id() + 1000, "entryId": 0}
    assert admin("POST", sub_url(gateway, topic, "s") + "/expireMessages", beyond)[0] == 409
    # A position of another partition: 412.
    other = position(ids[1], partitionIndex=3)
    status, body = admin("POST", sub_url(gateway, topic, "s") + "/expireMessages", other)
    assert status == 412
    assert "partition index" in body["reason"]


def test_expire_by_position_inside_a_batch(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    ok(admin("PUT", sub_url(gateway, topic, "s"), "earliest"))
    ids = produce_batches(client, topic, batches=2, size=4)
    # Up to batch index 2 of the first batch (not excluded: indexes 0 and 1 expire).
    body = position(ids[0], batchIndex=2)
    assert admin("POST", sub_url(gateway, topic, "s") + "/expireMessages", body) == (204, None)
    consumer = client.subscribe(topic, "s")
    expected = [b"b0-2", b"b0-3"] + [f"b1-{i}".encode() for i in range(4)]
    assert receive_payloads(consumer, 6) == expected
    assert_nothing(consumer)


def test_expire_all_subscriptions(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    for sub in ("a", "b"):
        ok(admin("PUT", sub_url(gateway, topic, sub), "earliest"))
    produce(client, topic, 3)
    time.sleep(1.1)
    url = f"{topic_url(gateway, topic)}/all_subscription/expireMessages/1"
    assert admin("POST", url) == (204, None)
    stats = ok(admin("GET", f"{topic_url(gateway, topic)}/internalStats"))
    for sub in ("a", "b"):
        assert stats["cursors"][sub]["markDeletePosition"] == stats["lastConfirmedEntry"]
    # Nothing left: a second expiry is not issued (Pulsar answers 409).
    assert admin("POST", url)[0] == 409


# -- reset cursor ------------------------------------------------------------------------------


def test_reset_cursor_by_time_redelivers(gateway_factory, client_factory, redis_clean, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client = client_factory(gw_b.url)
    consumer = client.subscribe(topic, "s", consumer_type=Shared)
    ids = produce(client, topic, 5, gap_ms=3)
    assert receive_payloads(consumer, 5) == names(5)
    wait_for(lambda: redis_clean.xpending(stream_key(topic), "s")["pending"] == 0)
    before = consumer_uids(redis_clean, topic, "s")

    # By the time m-2 was published: Pulsar restarts after the newest entry published before
    # it (PersistentMessageFinder). The consumer on the other gateway is disconnected, comes
    # back and gets m-2 onwards again.
    at = publish_time(redis_clean, topic, ids[2])
    url = f"{sub_url(gw_a, topic, 's')}/resetcursor/{at}"
    assert admin("POST", url) == (204, None)
    wait_for(lambda: (after := consumer_uids(redis_clean, topic, "s")) and not after & before)
    assert receive_payloads(consumer, 3) == names(5, start=2)
    assert_nothing(consumer)


@pytest.mark.parametrize("excluded", [False, True], ids=["inclusive", "excluded"])
def test_reset_cursor_to_a_message_id(gateway, client_factory, topic, excluded):
    client = client_factory(gateway.url)
    consumer = client.subscribe(topic, "s")
    ids = produce(client, topic, 5)
    assert receive_payloads(consumer, 5) == names(5)
    body = position(ids[1], isExcluded=excluded, partitionIndex=-1, batchIndex=-1)
    assert admin("POST", sub_url(gateway, topic, "s") + "/resetcursor", body) == (204, None)
    start = 2 if excluded else 1
    assert receive_payloads(consumer, 5 - start) == names(5, start=start)
    assert_nothing(consumer)


@pytest.mark.parametrize(
    "sub_type",
    [Shared, pulsar.ConsumerType.Failover, pulsar.ConsumerType.KeyShared],
    ids=["Shared", "Failover", "Key_Shared"],
)
def test_reset_cursor_and_skip_on_each_subscription_type(gateway, client_factory, topic, sub_type):
    client = client_factory(gateway.url)
    consumer = client.subscribe(topic, "s", consumer_type=sub_type)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m-{i}".encode(), partition_key=f"k{i % 2}") for i in range(4)]
    assert sorted(receive_payloads(consumer, 4)) == names(4)
    assert admin("POST", sub_url(gateway, topic, "s") + "/resetcursor", position(ids[1])) == (
        204,
        None,
    )
    assert sorted(receive_payloads(consumer, 3, ack=False)) == names(4, start=1)
    # Those three are unacked at the consumer: skipping 2 acknowledges m-1 and m-2 (the
    # oldest of the backlog); a reset to earliest then brings everything back.
    assert admin("POST", sub_url(gateway, topic, "s") + "/skip/2") == (204, None)
    cursor = ok(admin("GET", f"{topic_url(gateway, topic)}/internalStats"))["cursors"]["s"]
    assert cursor["markDeletePosition"] == f"{ids[2].ledger_id()}:{ids[2].entry_id()}"
    assert admin("POST", sub_url(gateway, topic, "s") + "/resetcursor", "earliest") == (204, None)
    assert sorted(receive_payloads(consumer, 4)) == names(4)
    assert_nothing(consumer)


def test_reset_cursor_inside_a_batch(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    consumer = client.subscribe(topic, "s")
    ids = produce_batches(client, topic, batches=1, size=5)
    assert receive_payloads(consumer, 5) == [f"b0-{i}".encode() for i in range(5)]
    # Jackson spells ResetCursorData.isExcluded "excluded": both are read.
    body = position(ids[0], batchIndex=2, excluded=False)
    assert admin("POST", sub_url(gateway, topic, "s") + "/resetcursor", body) == (204, None)
    assert receive_payloads(consumer, 3) == [b"b0-2", b"b0-3", b"b0-4"]
    assert_nothing(consumer)


def test_reset_cursor_to_earliest_and_latest(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    consumer = client.subscribe(topic, "s")
    produce(client, topic, 3)
    assert receive_payloads(consumer, 3) == names(3)
    url = sub_url(gateway, topic, "s") + "/resetcursor"
    assert admin("POST", url, "earliest") == (204, None)
    assert receive_payloads(consumer, 3) == names(3)
    assert admin("POST", url, "latest") == (204, None)
    assert_nothing(consumer)


def test_reset_and_expire_at_ids_past_every_entry(gateway, client_factory, topic):
    """Any long is a ResetCursorData's ledger or entry id: ids of 2**53 and more (beyond
    what the scripts' Lua numbers hold exactly) are positions past every entry."""
    client = client_factory(gateway.url)
    ok(admin("PUT", sub_url(gateway, topic, "s"), "earliest"))
    ids = produce(client, topic, 3)
    url = sub_url(gateway, topic, "s")
    far = 2**63 - 1  # the largest long; both halves at it is "latest"
    for body in (
        {"ledgerId": far, "entryId": 0},
        {"ledgerId": ids[-1].ledger_id(), "entryId": far, "isExcluded": True},
        {"ledgerId": far, "entryId": far - 1, "batchIndex": 3},
    ):
        assert admin("POST", url + "/resetcursor", body) == (204, None), body
        consumer = client.subscribe(topic, "s")
        assert_nothing(consumer)  # the cursor is past every entry
        consumer.close()
    assert admin("POST", url + "/resetcursor", "earliest") == (204, None)
    # expiring up to a position past the last entry is not issued, as for any such position
    status, _ = admin("POST", url + "/expireMessages", {"ledgerId": far, "entryId": 7})
    assert status == 409
    consumer = client.subscribe(topic, "s")
    assert receive_payloads(consumer, 3) == names(3)


# -- partitioned topics ------------------------------------------------------------------------


def test_partitioned_topic_operations_apply_to_every_partition(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    ok(admin("PUT", f"{topic_url(gateway, topic)}/partitions", 2))
    assert admin("PUT", sub_url(gateway, topic, "s"), "earliest") == (204, None)
    for i in range(2):
        part = f"{topic_url(gateway, topic)}-partition-{i}/subscriptions"
        assert admin("GET", part) == (200, ["s"])
    assert admin("GET", f"{topic_url(gateway, topic)}/subscriptions") == (200, ["s"])

    producer = client.create_producer(
        topic,
        batching_enabled=False,
        message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
    )
    for i in range(6):
        producer.send(f"m-{i}".encode())
    stats = ok(admin("GET", f"{topic_url(gateway, topic)}/partitioned-internalStats"))
    assert stats["metadata"] == {"partitions": 2}
    assert sum(p["numberOfEntries"] for p in stats["partitions"].values()) == 6

    # skip needs one partition (Pulsar 405), skip_all clears all of them.
    status, body = admin("POST", sub_url(gateway, topic, "s") + "/skip/1")
    assert status == 405
    assert "partitioned" in body["reason"]
    assert admin("POST", sub_url(gateway, topic, "s") + "/skip_all") == (204, None)
    consumer = client.subscribe(topic, "s")
    assert_nothing(consumer)

    # Reset by time on the base name rewinds every partition.
    assert admin("POST", sub_url(gateway, topic, "s") + "/resetcursor/0") == (204, None)
    assert sorted(receive_payloads(consumer, 6)) == sorted(names(6))

    # Deleting with a consumer connected is refused on the base name, forced it goes.
    assert admin("DELETE", sub_url(gateway, topic, "s"))[0] == 412
    consumer.close()
    assert admin("DELETE", sub_url(gateway, topic, "s")) == (204, None)
    assert admin("GET", f"{topic_url(gateway, topic)}/subscriptions") == (200, [])


# -- peek, message by id, examine --------------------------------------------------------------


def peek(
    gw: GatewayThread, topic: str, sub: str, n: int
) -> tuple[int, dict[str, list[str]], bytes]:
    return admin_raw("GET", f"{sub_url(gw, topic, sub)}/position/{n}")


def test_peek_nth_message_with_pulsar_headers(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    ok(admin("PUT", sub_url(gateway, topic, "s"), "earliest"))
    producer = client.create_producer(topic, batching_enabled=False)
    first = producer.send(
        b"hello", properties={"color": "red"}, partition_key="k1", event_timestamp=1234
    )
    producer.send(b"world")
    status, headers, body = peek(gateway, topic, "s", 1)
    assert status == 200
    assert body == b"hello"
    assert headers["content-type"] == ["application/octet-stream"]
    assert headers["x-pulsar-message-id"] == [f"{first.ledger_id()}:{first.entry_id()}"]
    assert headers["x-pulsar-property-color"] == ["red"]
    assert headers["x-pulsar-partition-key"] == ["k1"]
    assert headers["x-pulsar-event-time"] == ["1970-01-01T00:00:01.234Z"]
    assert headers["x-pulsar-publish-time"][0].endswith("Z")
    assert headers["x-pulsar-producer-name"] == [producer.producer_name()]
    assert headers["x-pulsar-sequence-id"] == ["0"]
    assert "x-pulsar-num-batch-message" not in headers

    assert peek(gateway, topic, "s", 2)[2] == b"world"
    status, _, body = peek(gateway, topic, "s", 3)
    assert status == 404
    # Acknowledged messages are not counted.
    consumer = client.subscribe(topic, "s")
    consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    wait_for(lambda: peek(gateway, topic, "s", 1)[2] == b"world")


def test_peek_a_compressed_batch(gateway, client_factory, topic):
    from pulsar_gateway.entry_codec import parse_batch

    client = client_factory(gateway.url)
    ok(admin("PUT", sub_url(gateway, topic, "s"), "earliest"))
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=3,
        batching_max_publish_delay_ms=60_000,
        compression_type=pulsar.CompressionType.LZ4,
    )
    for i in range(3):
        producer.send_async(f"payload-{i}".encode() * 10, None)
    producer.flush()
    status, headers, body = peek(gateway, topic, "s", 1)
    assert status == 200
    assert headers["x-pulsar-num-batch-message"] == ["3"]
    assert headers["x-pulsar-compression"] == ["LZ4"]
    # The body is the batch, decompressed (clients split it themselves).
    messages = parse_batch(body, 3)
    assert [payload for _, payload in messages] == [f"payload-{i}".encode() * 10 for i in range(3)]


def test_message_by_id_and_examine(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    ids = produce(client, topic, 4)
    url = f"{topic_url(gateway, topic)}/ledger/{ids[1].ledger_id()}/entry/{ids[1].entry_id()}"
    status, headers, body = admin_raw("GET", url)
    assert (status, body) == (200, b"m-1")
    assert headers["x-pulsar-message-id"] == [f"{ids[1].ledger_id()}:{ids[1].entry_id()}"]
    missing = f"{topic_url(gateway, topic)}/ledger/1/entry/1"
    assert admin_raw("GET", missing)[0] == 404

    examine = f"{topic_url(gateway, topic)}/examinemessage"
    assert admin_raw("GET", examine)[2] == b"m-3"  # latest, position 1
    assert admin_raw("GET", examine + "?initialPosition=earliest&messagePosition=2")[2] == b"m-1"
    assert admin_raw("GET", examine + "?initialPosition=latest&messagePosition=2")[2] == b"m-2"
    assert admin_raw("GET", examine + "?initialPosition=earliest&messagePosition=9")[0] == 404
    assert admin_raw("GET", examine + "?initialPosition=middle")[0] == 400


# -- internal stats, last message id -----------------------------------------------------------


def test_internal_stats_cursor_positions(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    consumer = client.subscribe(topic, "s")
    ids = produce(client, topic, 4)
    msgs = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(4)]
    # Acknowledge m-1 and m-2 only: m-0 holds the mark-delete position, m-1..m-2 are an
    # individually deleted range.
    consumer.acknowledge(msgs[1])
    consumer.acknowledge(msgs[2])

    def pos(mid: Any) -> str:
        return f"{mid.ledger_id()}:{mid.entry_id()}"

    def cursor() -> dict[str, Any]:
        return ok(admin("GET", f"{topic_url(gateway, topic)}/internalStats"))["cursors"]["s"]

    wait_for(lambda: cursor()["individuallyDeletedMessages"] == f"[({pos(ids[0])}..{pos(ids[2])}]]")
    stats = ok(admin("GET", f"{topic_url(gateway, topic)}/internalStats"))
    assert stats["numberOfEntries"] == 4
    assert stats["entriesAddedCounter"] == 4
    assert stats["lastConfirmedEntry"] == pos(ids[3])
    assert stats["state"] == "LedgerOpened"
    assert len(stats["ledgers"]) == 1 and stats["ledgers"][0]["entries"] == 4
    c = stats["cursors"]["s"]
    assert c["markDeletePosition"] == f"{ids[0].ledger_id()}:{ids[0].entry_id() - 1}"
    assert c["readPosition"] == f"{ids[3].ledger_id()}:{ids[3].entry_id() + 1}"
    assert c["totalNonContiguousDeletedMessagesRange"] == 1
    assert c["state"] == "Open"

    consumer.acknowledge(msgs[0])
    consumer.acknowledge(msgs[3])
    wait_for(lambda: cursor()["markDeletePosition"] == pos(ids[3]))
    assert cursor()["individuallyDeletedMessages"] == "[]"


def test_last_message_id(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    url = f"{topic_url(gateway, topic)}/lastMessageId"
    assert admin("GET", url)[0] == 404  # no such topic
    ok(admin("PUT", topic_url(gateway, topic)))
    assert admin("GET", url) == (200, {"ledgerId": -1, "entryId": -1, "partitionIndex": -1})
    ids = produce(client, topic, 2)
    assert admin("GET", url) == (
        200,
        {"ledgerId": ids[1].ledger_id(), "entryId": ids[1].entry_id(), "partitionIndex": -1},
    )
    batch = produce_batches(client, topic, batches=1, size=3)
    assert admin("GET", url) == (
        200,
        {
            "ledgerId": batch[0].ledger_id(),
            "entryId": batch[0].entry_id(),
            "partitionIndex": -1,
            "batchIndex": 2,
            "batchSize": 3,
        },
    )


# -- errors ------------------------------------------------------------------------------------


def test_error_statuses(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    produce(client, topic, 1)
    sub = sub_url(gateway, topic, "nope")
    for method, suffix, body in [
        ("POST", "/skip/1", None),
        ("POST", "/skip_all", None),
        ("POST", "/expireMessages/1", None),
        ("POST", "/expireMessages", {"ledgerId": 1, "entryId": 1}),
        ("POST", "/resetcursor/0", None),
        ("POST", "/resetcursor", {"ledgerId": 1, "entryId": 1}),
        ("GET", "/position/1", None),
    ]:
        assert admin(method, sub + suffix, body) == (404, {"reason": "Subscription not found"}), (
            suffix
        )

    # An unknown topic is named as such.
    status, body = admin("POST", sub_url(gateway, f"{topic}-x", "s") + "/skip_all")
    assert (status, body) == (
        404,
        {"reason": f"Topic persistent://public/default/{topic}-x not found"},
    )

    ok(admin("PUT", sub_url(gateway, topic, "s"), "earliest"))
    reset = sub_url(gateway, topic, "s") + "/resetcursor"
    for raw in (
        "",
        "{",
        "[1]",
        '{"ledgerId": 1}',
        '{"ledgerId": "x", "entryId": 1}',
        '{"ledgerId": 1, "entryId": 18446744073709551615}',
        '{"ledgerId": 1, "entryId": 2, "isExcluded": "yes"}',
        '"middle"',
    ):
        status, body = admin("POST", reset, raw=raw)
        assert status == 400, raw
        assert body["reason"]
    assert admin("POST", sub_url(gateway, topic, "s") + "/skip/x")[0] == 400
    assert admin("POST", sub_url(gateway, topic, "s") + "/skip/-1")[0] == 400
    assert admin("PUT", sub_url(gateway, topic, "s2"), raw="{bad")[0] == 400

    # Invalid names are 412, as topics/lifecycle.py answers them.
    bad = f"{gateway.http_url}/admin/v2/persistent/public/bad%20ns/{topic}"
    assert admin("GET", f"{bad}/subscriptions") == (412, {"reason": "Topic name is not valid"})
    assert admin("POST", f"{bad}/subscription/s/skip_all")[0] == 412

    # Non-persistent topics: Pulsar creates their subscriptions only through clients and
    # refuses cursor operations.
    np_sub = sub_url(gateway, topic, "s", "non-persistent")
    assert admin("PUT", np_sub) == (
        400,
        {"reason": "Create subscription on non-persistent topic can only be done through client"},
    )
    for method, suffix in [
        ("POST", "/skip/1"),
        ("POST", "/expireMessages/1"),
        ("GET", "/position/1"),
    ]:
        assert admin(method, np_sub + suffix)[0] == 405, suffix
    np_topic = topic_url(gateway, topic, "non-persistent")
    assert admin("GET", f"{np_topic}/lastMessageId")[0] == 405

    # A partitioned topic's base name: per-partition operations are 405.
    ok(admin("PUT", f"{topic_url(gateway, topic)}-p/partitions", 2))
    assert admin("GET", f"{topic_url(gateway, topic)}-p/lastMessageId")[0] == 405
    assert admin("GET", f"{topic_url(gateway, topic)}-p/internalStats")[0] == 405


def test_non_persistent_subscription_listed_and_deleted(
    gateway, client_factory, redis_clean, topic
):
    client = client_factory(gateway.url)
    np_topic = f"non-persistent://public/default/{topic}"
    consumer = client.subscribe(np_topic, "live", consumer_type=Shared)
    url = topic_url(gateway, topic, "non-persistent")
    assert admin("GET", f"{url}/subscriptions") == (200, ["live"])
    stats = ok(admin("GET", f"{url}/internalStats"))
    assert stats["numberOfEntries"] == 0
    assert list(stats["cursors"]) == ["live"]
    sub = sub_url(gateway, topic, "live", "non-persistent")
    assert admin("DELETE", sub)[0] == 412
    assert admin("DELETE", sub + "?force=true") == (204, None)
    # The consumer was disconnected; its client subscribes again.
    producer = client.create_producer(np_topic)
    wait_for(lambda: admin("GET", f"{url}/subscriptions") == (200, ["live"]))
    producer.send(b"x")
    assert receive_payloads(consumer, 1) == [b"x"]
