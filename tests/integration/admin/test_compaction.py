"""Topic compaction (docs/lifecycle.md) with the official client, the admin API and Redis.

Compaction is triggered through ``PUT .../compaction`` and watched through ``GET``; readers
and consumers with ``is_read_compacted=True`` must see exactly the latest value of each key
up to the horizon, then everything after it, with the original message ids; a normal
reader still sees every message.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import pulsar
import pytest

from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.conftest import TIMEOUT, GatewayThread, stream_key, wait_for
from tests.rawclient import raw

# The cluster pass of ./dev test runs this file on a Redis Cluster too: compaction (manual
# trigger, read_compacted readers and consumers)
pytestmark = pytest.mark.cluster

T = pb.BaseCommand

Exclusive = pulsar.ConsumerType.Exclusive
Earliest = pulsar.InitialPosition.Earliest
RECEIVE_MS = int(TIMEOUT * 1000)

#: (key or None, value or None for a tombstone)
Record = tuple[str | None, bytes | None]

HISTORY: list[Record] = [
    ("k1", b"a"),
    ("k2", b"a"),
    ("k1", b"b"),
    (None, b"no key"),
    ("k3", b"a"),
    ("k2", None),  # tombstone: k2 is gone
    ("k3", b"b"),
]
#: the latest value of each surviving key, in id order
COMPACTED: list[Record] = [("k1", b"b"), ("k3", b"b")]


def produce(client: Any, topic: str, records: list[Record], **producer_args: Any) -> list[Any]:
    """Send ``records`` in order (async, then flush) and return their message ids."""
    producer = client.create_producer(topic, **producer_args)
    ids: list[Any] = [None] * len(records)
    done = threading.Event()
    lock = threading.Lock()
    left = [len(records)]

    def callback(i: int) -> Callable[[Any, Any], None]:
        def sent(result: Any, msg_id: Any) -> None:
            assert result == pulsar.Result.Ok
            with lock:
                ids[i] = msg_id
                left[0] -= 1
                if not left[0]:
                    done.set()

        return sent

    for i, (key, value) in enumerate(records):
        kwargs = {"partition_key": key} if key is not None else {}
        producer.send_async(value, callback(i), **kwargs)
    producer.flush()
    assert done.wait(TIMEOUT)
    producer.close()
    return ids


def read_all(reader: Any, timeout_ms: int = 500) -> list[Any]:
    out = []
    while True:
        try:
            out.append(reader.read_next(timeout_millis=timeout_ms))
        except pulsar.Timeout:
            return out


def records(messages: list[Any]) -> list[Record]:
    return [(m.partition_key() or None, None if m.has_null_value() else m.data()) for m in messages]


def ids_of(messages: list[Any]) -> list[str]:
    return [str(m.message_id()) for m in messages]


def admin_url(gw: GatewayThread, topic: str) -> str:
    name = parse_topic_name(topic)
    return f"{gw.http_url}/admin/v2/persistent/{name.namespace}/{name.local_name}/compaction"


def http(gw: GatewayThread, method: str, url: str) -> tuple[int, Any]:
    async def call() -> tuple[int, Any]:
        async with aiohttp.ClientSession() as session, session.request(method, url) as r:
            body = await r.json() if r.content_type == "application/json" else await r.text()
            return r.status, body

    result: tuple[int, Any] = gw.call(call())
    return result


def compact(gw: GatewayThread, topic: str) -> None:
    """Trigger through the admin API and wait for SUCCESS."""
    status, _ = http(gw, "PUT", admin_url(gw, topic))
    assert status == 204
    wait_for(lambda: http(gw, "GET", admin_url(gw, topic))[1]["status"] != "RUNNING")
    assert http(gw, "GET", admin_url(gw, topic)) == (200, {"status": "SUCCESS", "lastError": ""})


@pytest.fixture
def gw(gateway_factory: Callable[..., GatewayThread]) -> GatewayThread:
    return gateway_factory(topic_maintenance_interval_seconds=3600.0)


# -- the compacted view ----------------------------------------------------------------------


def test_read_compacted_reader_sees_latest_value_per_key_then_the_tail(
    gw: GatewayThread, client_factory: Any, redis_clean: Any, topic: str
) -> None:
    client = client_factory(gw.url)
    assert http(gw, "GET", admin_url(gw, topic))[1] == {"status": "NOT_RUN", "lastError": ""}
    ids = produce(client, topic, HISTORY, batching_enabled=False)
    compact(gw, topic)
    tail = produce(client, topic, [("k1", b"c"), ("k4", b"a")], batching_enabled=False)

    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    got = read_all(reader)
    assert records(got) == [*COMPACTED, ("k1", b"c"), ("k4", b"a")]
    # the same message ids the producers got
    assert ids_of(got) == [str(ids[2]), str(ids[6]), *map(str, tail)]

    # a normal reader still sees every message, tombstone and keyless one included
    plain = read_all(client.create_reader(topic, pulsar.MessageId.earliest))
    assert records(plain) == [*HISTORY, ("k1", b"c"), ("k4", b"a")]
    # the topic itself is untouched
    assert redis_clean.xlen(stream_key(topic)) == len(HISTORY) + 2


@pytest.mark.parametrize(
    "compression", [pulsar.CompressionType.NONE, pulsar.CompressionType.LZ4], ids=str
)
def test_partly_superseded_batches_keep_their_ids(
    gw: GatewayThread, client_factory: Any, redis_clean: Any, topic: str, compression: Any
) -> None:
    client = client_factory(gw.url)
    batches: list[Record] = [
        *[("k1", b"a"), ("k2", b"a"), ("k1", b"b"), ("k3", b"a")],
        *[("k2", b"b"), ("k3", None), ("k5", b"a"), ("k5", b"b")],
    ]
    ids = produce(
        client,
        topic,
        batches,
        batching_enabled=True,
        batching_max_messages=4,
        batching_max_publish_delay_ms=60_000,
        compression_type=compression,
    )
    assert redis_clean.xlen(stream_key(topic)) == 2  # two client batches, two entries
    compact(gw, topic)

    got = read_all(client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True))
    assert records(got) == [("k1", b"b"), ("k2", b"b"), ("k5", b"b")]
    assert ids_of(got) == [str(ids[2]), str(ids[4]), str(ids[7])]
    assert records(read_all(client.create_reader(topic, pulsar.MessageId.earliest))) == batches


def test_durable_read_compacted_consumer_acks_and_redelivery(
    gw: GatewayThread, client_factory: Any, redis_clean: Any, topic: str
) -> None:
    client = client_factory(gw.url)
    produce(client, topic, HISTORY, batching_enabled=False)
    compact(gw, topic)

    def subscribe() -> Any:
        return client.subscribe(
            topic, "compacted", Exclusive, initial_position=Earliest, is_read_compacted=True
        )

    consumer = subscribe()
    first = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in COMPACTED]
    assert records(first) == COMPACTED
    # Unacked: a new consumer gets them again, from the compacted view.
    consumer.close()
    consumer = subscribe()
    again = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in COMPACTED]
    assert records(again) == COMPACTED
    for msg in again:
        consumer.acknowledge(msg)
    stream = stream_key(topic)
    wait_for(lambda: redis_clean.xpending(stream, "compacted")["pending"] == 0)
    produce(client, topic, [("k9", b"z")], batching_enabled=False)
    tail = consumer.receive(timeout_millis=RECEIVE_MS)
    assert records([tail]) == [("k9", b"z")]
    consumer.acknowledge(tail)
    wait_for(lambda: redis_clean.xpending(stream, "compacted")["pending"] == 0)
    consumer.close()
    consumer = subscribe()
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)


def test_failover_read_compacted_feeds_only_the_active_consumer(
    gw: GatewayThread, client_factory: Any, topic: str
) -> None:
    client = client_factory(gw.url)
    produce(client, topic, HISTORY, batching_enabled=False)
    compact(gw, topic)
    consumers = [
        client.subscribe(
            topic,
            "fo",
            pulsar.ConsumerType.Failover,
            initial_position=Earliest,
            is_read_compacted=True,
            consumer_name=f"c{i}",
        )
        for i in range(2)
    ]
    got: list[list[Any]] = [[], []]
    deadline = time.monotonic() + TIMEOUT
    while sum(map(len, got)) < len(COMPACTED) and time.monotonic() < deadline:
        for i, consumer in enumerate(consumers):
            try:
                got[i].append(consumer.receive(timeout_millis=50))
            except pulsar.Timeout:
                pass
    assert sorted(map(len, got)) == [0, len(COMPACTED)]
    assert records(got[0] or got[1]) == COMPACTED


def test_compaction_is_incremental_and_survives_retention(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Any,
    redis_clean: Any,
    topic: str,
) -> None:
    gw = gateway_factory(topic_maintenance_interval_seconds=3600.0)  # default retention: 0
    client = client_factory(gw.url)
    consumer = client.subscribe(topic, "all", Exclusive)
    produce(client, topic, HISTORY, batching_enabled=False)
    for _ in HISTORY:
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    stream = stream_key(topic)
    wait_for(lambda: redis_clean.xpending(stream, "all")["pending"] == 0)
    # Not compacted yet: the round must not trim beyond what the compactor has read...
    compact(gw, topic)
    produce(client, topic, [("k3", b"c"), ("k6", b"a")], batching_enabled=False)
    for _ in range(2):
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    wait_for(lambda: redis_clean.xpending(stream, "all")["pending"] == 0)
    gw.call(gw.gateway.core.maintenance.run_once())
    # ...so the acked history up to the horizon is gone, the two newer entries stay.
    assert redis_clean.xlen(stream) == 2

    # The view still serves the trimmed history, merged with a second compaction.
    compact(gw, topic)
    got = read_all(client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True))
    assert records(got) == [("k1", b"b"), ("k3", b"c"), ("k6", b"a")]
    gw.call(gw.gateway.core.maintenance.run_once())
    assert redis_clean.xlen(stream) == 0


def test_every_key_deleted_leaves_an_empty_view(
    gw: GatewayThread, client_factory: Any, redis_clean: Any, topic: str
) -> None:
    client = client_factory(gw.url)
    produce(client, topic, [("k", b"v"), ("k", None)], batching_enabled=False)
    compact(gw, topic)
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert read_all(reader) == []
    produce(client, topic, [("k", b"w")], batching_enabled=False)
    assert records(read_all(reader)) == [("k", b"w")]


def test_compacting_a_topic_without_entries_succeeds(
    gw: GatewayThread, client_factory: Any, redis_clean: Any, topic: str
) -> None:
    client = client_factory(gw.url)
    client.subscribe(topic, "s", Exclusive)  # the stream exists, with no entries
    compact(gw, topic)  # Pulsar: "Skip compaction of the empty topic", SUCCESS
    state = KeySchema().topic(parse_topic_name(topic)).compaction
    assert redis_clean.hget(state, "horizon") is None
    assert gw.call(gw.gateway.core.maintenance.run_once()).errors == 0
    produce(client, topic, [("k", b"v")], batching_enabled=False)
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert records(read_all(reader)) == [("k", b"v")]


# -- admin API and refusals --------------------------------------------------------------------


def test_trigger_conflicts_and_not_found(
    gw: GatewayThread, client_factory: Any, redis_clean: Any, topic: str
) -> None:
    status, body = http(gw, "PUT", admin_url(gw, topic))
    assert (status, body) == (404, {"reason": "Topic not found"})

    produce(client_factory(gw.url), topic, HISTORY, batching_enabled=False)
    state = KeySchema().topic(parse_topic_name(topic)).compaction
    # Another gateway is compacting (its lease is live): 409, status RUNNING.
    lease = int(time.time() * 1000) + 60_000
    redis_clean.hset(state, mapping={"status": "RUNNING", "run": "other", "lease": lease})
    status, body = http(gw, "PUT", admin_url(gw, topic))
    assert (status, body) == (409, {"reason": "Compaction already in progress"})
    assert http(gw, "GET", admin_url(gw, topic))[1]["status"] == "RUNNING"
    # That gateway died: its lease ran out; the status says so and a new trigger takes over.
    redis_clean.hset(state, "lease", 1)
    status, body = http(gw, "GET", admin_url(gw, topic))
    assert body["status"] == "ERROR" and "stopped" in body["lastError"]
    compact(gw, topic)


@pytest.mark.parametrize("sub_type", [1, 3], ids=["Shared", "Key_Shared"])
def test_read_compacted_is_refused_on_shared_subscriptions(
    gw: GatewayThread, topic: str, sub_type: int
) -> None:
    # The official client refuses it itself (InvalidConfiguration); the server must too, as
    # Pulsar's PersistentTopic.subscribe does, for other clients.
    with raw(gw) as conn:
        conn.handshake()
        fields = {"topic": topic, "subscription": "s", "subType": sub_type, "consumer_id": 1}
        reply = conn.request(T.SUBSCRIBE, T.ERROR, read_compacted=True, **fields)
        assert reply.error.error == pb.NotAllowedError
        assert "readCompacted only allowed" in reply.error.message
        conn.request(T.SUBSCRIBE, T.SUCCESS, read_compacted=False, **fields)  # still serving
        fields.update(consumer_id=2, subscription="x", subType=0)
        conn.request(T.SUBSCRIBE, T.SUCCESS, read_compacted=True, **fields)
