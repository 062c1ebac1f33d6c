"""Key_Shared subscriptions through the gateway with the official client (pulsar-client 3.13).

A message's sticky key is its ordering key, else its partition key; its hash
(``pulsar_gateway.core.model.key_shared.sticky_key_hash``, Pulsar's Murmur3 into 0..65535) picks the
consumer whose hash range covers it, so a key always goes to one consumer, in order. AUTO_SPLIT
splits the space as consumers come and go (Pulsar ``HashRangeAutoSplitStickyKeyConsumerSelector``);
STICKY consumers bring their own ranges (``HashRangeExclusiveStickyKeyConsumerSelector``). The
assignment lives in Redis (``ks-ranges``), shared by every gateway: the tests read it to compute who
must get what.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import pulsar
import pulsar.asyncio
import pytest

from pulsar_gateway.core.model.key_shared import parse_ranges, sticky_key_hash
from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage.keys import KeySchema
from tests.conftest import TIMEOUT, stream_key, wait_for

# The cluster pass of ./dev test runs this file on a Redis Cluster too: subscriptions:
# Key_Shared (AUTO_SPLIT and STICKY ranges, ordering on handover, nacks)
pytestmark = pytest.mark.cluster

KeyShared = pulsar.ConsumerType.KeyShared
RECEIVE_MS = int(TIMEOUT * 1000)
#: How long "nothing arrives" waits, ms.
QUIET_MS = 400
SUB = "ks"
LOW = (0, 32767)
HIGH = (32768, 65535)


# -- helpers ---------------------------------------------------------------------------------


def sticky(*ranges: tuple[int, int]) -> pulsar.ConsumerKeySharedPolicy:
    return pulsar.ConsumerKeySharedPolicy(
        key_shared_mode=pulsar.KeySharedMode.Sticky, sticky_ranges=list(ranges)
    )


def subscribe(client: Any, topic: str, name: str, **kwargs: Any) -> Any:
    return client.subscribe(topic, SUB, consumer_type=KeyShared, consumer_name=name, **kwargs)


def _keys(topic: str) -> Any:
    return KeySchema().topic(parse_topic_name(topic))


def consumer_uids(redis: Any, topic: str) -> dict[str, str]:
    """Consumer name -> uid, from the consumer info hash (the name is its last field)."""
    info = redis.hgetall(_keys(topic).consumer_info(SUB))
    return {v.decode().rsplit(" ", 1)[1]: k.decode() for k, v in info.items()}


def ranges_by_name(redis: Any, topic: str) -> dict[str, list[tuple[int, int]]]:
    """The subscription's hash ranges as stored in Redis, by consumer name."""
    names = {uid: name for name, uid in consumer_uids(redis, topic).items()}
    stored = redis.hgetall(_keys(topic).key_shared_ranges(SUB))
    return {
        names[uid.decode()]: sorted(parse_ranges(value))
        for uid, value in stored.items()
        if uid != b"~mode"
    }


def owner(ranges: dict[str, list[tuple[int, int]]], key: str) -> str:
    h = sticky_key_hash(key.encode())
    (name,) = [n for n, rs in ranges.items() if any(s <= h <= e for s, e in rs)]
    return name


def keys_in(span: tuple[int, int], count: int, prefix: str = "key") -> list[str]:
    """The first ``count`` keys ``<prefix>-<i>`` whose hash lies in ``span``."""
    out: list[str] = []
    i = 0
    while len(out) < count:
        key = f"{prefix}-{i}"
        if span[0] <= sticky_key_hash(key.encode()) <= span[1]:
            out.append(key)
        i += 1
    return out


def keys_per_consumer(ranges: dict[str, list[tuple[int, int]]], count: int) -> dict[str, list[str]]:
    """``count`` keys owned by each consumer."""
    out: dict[str, list[str]] = defaultdict(list)
    i = 0
    while any(len(out[name]) < count for name in ranges):
        key = f"key-{i}"
        name = owner(ranges, key)
        if len(out[name]) < count:
            out[name].append(key)
        i += 1
    return dict(out)


def produce_keyed(
    client: Any,
    topic: str,
    keys: Iterable[str],
    rounds: int,
    batching: bool = False,
    first_round: int = 0,
) -> list[bytes]:
    """Send ``b"<key>:<round>"`` for each round and key (keys interleaved), with the key
    as partition key; returns the payloads in send order."""
    kwargs: dict[str, Any] = {"batching_enabled": batching}
    if batching:
        kwargs.update(batching_type=pulsar.BatchingType.KeyBased, batching_max_publish_delay_ms=20)
    producer = client.create_producer(topic, **kwargs)
    sent = []
    keys = list(keys)
    for r in range(first_round, first_round + rounds):
        for key in keys:
            payload = f"{key}:{r}".encode()
            producer.send_async(payload, None, partition_key=key)
            sent.append(payload)
    producer.flush()
    producer.close()
    return sent


def receive(consumer: Any, count: int, ack: bool = True) -> list[Any]:
    out = []
    for _ in range(count):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        if ack:
            consumer.acknowledge(msg)
        out.append(msg)
    return out


def assert_nothing(*consumers: Any) -> None:
    for consumer in consumers:
        with pytest.raises(pulsar.Timeout):
            msg = consumer.receive(timeout_millis=QUIET_MS)
            pytest.fail(f"unexpected message {msg.data()!r}")


def by_key(messages: Iterable[Any]) -> dict[str, list[bytes]]:
    """Payloads grouped by the key before the colon, in arrival order."""
    out: dict[str, list[bytes]] = defaultdict(list)
    for m in messages:
        out[m.data().decode().split(":")[0]].append(m.data())
    return dict(out)


def in_order(key: str, rounds: Iterable[int]) -> list[bytes]:
    return [f"{key}:{r}".encode() for r in rounds]


def pending_at(redis: Any, topic: str, uid: str) -> list[str]:
    """Stream ids pending at one consumer of the subscription."""
    rows = redis.xpending_range(stream_key(topic), SUB, "-", "+", 10_000, consumername=uid)
    return [row["message_id"].decode() for row in rows]


def entry_id(msg: Any) -> str:
    mid = msg.message_id()
    return f"{mid.ledger_id()}-{mid.entry_id()}"


# -- AUTO_SPLIT ----------------------------------------------------------------------------


@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "key-batched"])
@pytest.mark.parametrize("gateways", [1, 2])
def test_each_key_goes_to_its_range_owner_in_order(
    gateway_factory, client_factory, redis_clean, topic, gateways, batching
):
    gws = [gateway_factory() for _ in range(gateways)]
    clients = [client_factory(gw.url) for gw in gws]
    names = ["c0", "c1", "c2"]
    consumers = {n: subscribe(clients[i % gateways], topic, n) for i, n in enumerate(names)}
    ranges = ranges_by_name(redis_clean, topic)
    # AUTO_SPLIT: each newcomer takes the lower half of the largest range
    assert ranges == {"c0": [(32768, 65535)], "c1": [(16384, 32767)], "c2": [(0, 16383)]}
    owned = keys_per_consumer(ranges, 3)
    rounds = 4
    produce_keyed(clients[-1], topic, [k for ks in owned.values() for k in ks], rounds, batching)
    for name, consumer in consumers.items():
        got = by_key(receive(consumer, len(owned[name]) * rounds))
        assert got == {key: in_order(key, range(rounds)) for key in owned[name]}
    assert_nothing(*consumers.values())


@pytest.mark.parametrize("gateways", [1, 2])
def test_leaving_consumer_hands_keys_and_unacked_messages_over_in_order(
    gateway_factory, client_factory, redis_clean, topic, gateways
):
    gws = [gateway_factory() for _ in range(gateways)]
    leaver = subscribe(client_factory(gws[0].url), topic, "leaver")
    stayer = subscribe(client_factory(gws[-1].url), topic, "stayer")
    ranges = ranges_by_name(redis_clean, topic)
    assert ranges == {"leaver": [HIGH], "stayer": [LOW]}
    owned = keys_per_consumer(ranges, 3)
    producer_client = client_factory(gws[0].url)
    produce_keyed(producer_client, topic, owned["leaver"] + owned["stayer"], 4)
    held = receive(leaver, 12, ack=False)
    assert by_key(held) == {k: in_order(k, range(4)) for k in owned["leaver"]}
    acked = [m for m in held if m.data().endswith(b":0")]
    for m in acked:
        leaver.acknowledge(m)
    leaver_uid = consumer_uids(redis_clean, topic)["leaver"]
    wait_for(lambda: len(pending_at(redis_clean, topic, leaver_uid)) == 9)
    mine = receive(stayer, 12)
    assert by_key(mine) == {k: in_order(k, range(4)) for k in owned["stayer"]}
    leaver.close()
    assert ranges_by_name(redis_clean, topic) == {"stayer": [(0, 65535)]}
    produce_keyed(producer_client, topic, owned["leaver"] + owned["stayer"], 1, first_round=4)
    got = receive(stayer, 9 + 6)
    # the leaver's unacked messages first (per key), then the new ones; nothing acked again
    expected = {k: in_order(k, [1, 2, 3, 4]) for k in owned["leaver"]}
    expected.update({k: in_order(k, [4]) for k in owned["stayer"]})
    assert by_key(got) == expected
    assert {m.redelivery_count() for m in got if not m.data().endswith(b":4")} == {1}
    assert {m.redelivery_count() for m in got if m.data().endswith(b":4")} == {0}
    assert_nothing(stayer)


@pytest.mark.parametrize("gateways", [1, 2])
def test_new_consumer_waits_until_older_messages_of_its_keys_are_acked(
    gateway_factory, client_factory, redis_clean, topic, gateways
):
    """Pulsar's "recently joined consumers" rule: keys a newcomer takes over may still have
    unacked messages at their old consumer; the newcomer gets nothing read after it joined
    until everything read before is acked, so per-key order holds."""
    gws = [gateway_factory() for _ in range(gateways)]
    producer_client = client_factory(gws[0].url)
    old = subscribe(client_factory(gws[0].url), topic, "old")
    low, high = keys_in(LOW, 2), keys_in(HIGH, 2)
    produce_keyed(producer_client, topic, low + high, 2)
    before = receive(old, 8, ack=False)
    assert by_key(before) == {k: in_order(k, range(2)) for k in low + high}
    new = subscribe(client_factory(gws[-1].url), topic, "new")
    assert ranges_by_name(redis_clean, topic) == {"old": [HIGH], "new": [LOW]}
    produce_keyed(producer_client, topic, low + high, 1, first_round=2)
    # keys "old" kept flow on; the newcomer's keys wait for the acks
    assert by_key(receive(old, 2)) == {k: in_order(k, [2]) for k in high}
    assert_nothing(new)
    for m in before:
        old.acknowledge(m)
    got = receive(new, 2)
    assert by_key(got) == {k: in_order(k, [2]) for k in low}
    assert {m.redelivery_count() for m in got} == {0}
    assert_nothing(old, new)


def test_allow_out_of_order_delivery_lets_a_new_consumer_start_at_once(
    gateway_factory, client_factory, redis_clean, topic
):
    """``allowOutOfOrderDelivery`` (KeySharedMeta) waives the recently-joined guard."""
    gw_a, gw_b = gateway_factory(), gateway_factory()
    producer_client = client_factory(gw_a.url)
    old = subscribe(client_factory(gw_a.url), topic, "old")
    low = keys_in(LOW, 2)
    produce_keyed(producer_client, topic, low, 2)
    assert by_key(receive(old, 4, ack=False)) == {k: in_order(k, range(2)) for k in low}
    new = subscribe(
        client_factory(gw_b.url),
        topic,
        "new",
        key_shared_policy=pulsar.ConsumerKeySharedPolicy(allow_out_of_order_delivery=True),
    )
    assert ranges_by_name(redis_clean, topic) == {"old": [HIGH], "new": [LOW]}
    produce_keyed(producer_client, topic, low, 1, first_round=2)
    assert by_key(receive(new, 2)) == {k: in_order(k, [2]) for k in low}
    assert_nothing(old, new)


@pytest.mark.parametrize("gateways", [1, 2])
def test_keyless_messages_are_delivered_exactly_once(
    gateway_factory, client_factory, topic, gateways
):
    gws = [gateway_factory() for _ in range(gateways)]
    consumers = [
        subscribe(client_factory(gws[i % gateways].url), topic, f"c{i}", receiver_queue_size=5)
        for i in range(2)
    ]
    got: list[list[bytes]] = [[], []]
    stop = threading.Event()

    def drain(consumer: Any, into: list[bytes]) -> None:
        while not stop.is_set():
            try:
                msg = consumer.receive(timeout_millis=100)
            except pulsar.Timeout:
                continue
            into.append(msg.data())
            consumer.acknowledge(msg)

    pairs = zip(consumers, got, strict=True)
    threads = [threading.Thread(target=drain, args=pair) for pair in pairs]
    for t in threads:
        t.start()
    producer = client_factory(gws[0].url).create_producer(topic, batching_enabled=False)
    sent = [f"nokey-{i}".encode() for i in range(40)]
    try:
        for payload in sent:
            producer.send(payload)
        wait_for(lambda: len(got[0]) + len(got[1]) >= len(sent))
    finally:
        stop.set()
        for t in threads:
            t.join(TIMEOUT)
    assert sorted(got[0] + got[1]) == sorted(sent)
    assert_nothing(*consumers)


# -- negative acks -------------------------------------------------------------------------


def receive_zero_queue(consumer: Any) -> Any:
    """``receive()`` of a zero-queue consumer (it takes no timeout), bounded by a thread."""
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(consumer.receive()), daemon=True)
    thread.start()
    thread.join(TIMEOUT)
    assert box, "no message within the timeout"
    return box[0]


def test_nacked_message_returns_to_its_consumer_before_later_messages_of_its_key(
    gateway_factory, client_factory, redis_clean, topic
):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    # zero queue: the consumer asks for one message per receive(), so nothing of the key
    # is prefetched ahead of the redelivery and the order seen is the gateway's
    a = subscribe(
        client_factory(gw_a.url),
        topic,
        "a",
        receiver_queue_size=0,
        negative_ack_redelivery_delay_ms=100,
    )
    b = subscribe(client_factory(gw_b.url), topic, "b")
    ranges = ranges_by_name(redis_clean, topic)
    assert ranges == {"a": [HIGH], "b": [LOW]}
    key_a, key_b = keys_in(HIGH, 1)[0], keys_in(LOW, 1)[0]
    producer_client = client_factory(gw_b.url)
    producer = producer_client.create_producer(topic, batching_enabled=False)
    for r in range(4):
        producer.send(f"{key_a}:{r}".encode(), partition_key=key_a)
        if r < 2:
            producer.send(f"{key_b}:{r}".encode(), partition_key=key_b)
    first = receive_zero_queue(a)
    assert (first.data(), first.redelivery_count()) == (f"{key_a}:0".encode(), 0)
    a.negative_acknowledge(first)
    uid_a = consumer_uids(redis_clean, topic)["a"]
    wait_for(lambda: entry_id(first) not in pending_at(redis_clean, topic, uid_a))
    again = receive_zero_queue(a)
    assert (again.data(), again.redelivery_count()) == (f"{key_a}:0".encode(), 1)
    a.acknowledge(again)
    rest = [receive_zero_queue(a) for _ in range(3)]
    assert [m.data() for m in rest] == in_order(key_a, [1, 2, 3])
    for m in rest:
        a.acknowledge(m)
    assert [m.data() for m in receive(b, 2)] == in_order(key_b, [0, 1])
    assert_nothing(b)


# -- STICKY --------------------------------------------------------------------------------


@pytest.mark.parametrize("gateways", [1, 2])
def test_sticky_consumers_get_only_the_keys_they_cover(
    gateway_factory, client_factory, redis_clean, topic, gateways
):
    gws = [gateway_factory() for _ in range(gateways)]
    producer_client = client_factory(gws[0].url)
    low_consumer = subscribe(
        client_factory(gws[0].url), topic, "low", key_shared_policy=sticky(LOW)
    )
    low, high = keys_in(LOW, 3), keys_in(HIGH, 3)
    produce_keyed(producer_client, topic, low + high, 2)
    assert by_key(receive(low_consumer, 6)) == {k: in_order(k, range(2)) for k in low}
    assert_nothing(low_consumer)  # nobody covers the high keys: they wait
    high_consumer = subscribe(
        client_factory(gws[-1].url), topic, "high", key_shared_policy=sticky(HIGH)
    )
    assert ranges_by_name(redis_clean, topic) == {"low": [LOW], "high": [HIGH]}
    assert by_key(receive(high_consumer, 6)) == {k: in_order(k, range(2)) for k in high}
    produce_keyed(producer_client, topic, low + high, 1, first_round=2)
    assert by_key(receive(low_consumer, 3)) == {k: in_order(k, [2]) for k in low}
    assert by_key(receive(high_consumer, 3)) == {k: in_order(k, [2]) for k in high}
    assert_nothing(low_consumer, high_consumer)


def test_sticky_ranges_are_exclusive_across_gateways(
    gateway_factory, client_factory, redis_clean, topic
):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client_a, client_b = client_factory(gw_a.url), client_factory(gw_b.url)
    first = subscribe(client_a, topic, "first", key_shared_policy=sticky((0, 100)))
    with pytest.raises(pulsar.ConsumerAssignError):
        subscribe(client_b, topic, "overlap", key_shared_policy=sticky((50, 200)))
    # AUTO_SPLIT on a STICKY subscription with live consumers: refused
    with pytest.raises(pulsar.ConsumerBusy):
        subscribe(client_b, topic, "auto")
    second = subscribe(client_b, topic, "second", key_shared_policy=sticky((101, 200)))
    assert ranges_by_name(redis_clean, topic) == {"first": [(0, 100)], "second": [(101, 200)]}
    first.close()
    second.close()
    # no live consumers left: the subscription may change mode
    subscribe(client_a, topic, "auto")
    assert ranges_by_name(redis_clean, topic) == {"auto": [(0, 65535)]}


def test_ordering_key_takes_precedence_over_partition_key(gateway_factory, client_factory, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    low_consumer = subscribe(client_factory(gw_a.url), topic, "low", key_shared_policy=sticky(LOW))
    high_consumer = subscribe(
        client_factory(gw_b.url), topic, "high", key_shared_policy=sticky(HIGH)
    )
    ordering_key, partition_key = keys_in(LOW, 1, "order")[0], keys_in(HIGH, 1, "part")[0]
    producer = client_factory(gw_a.url).create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(f"both:{i}".encode(), partition_key=partition_key, ordering_key=ordering_key)
        producer.send(f"part:{i}".encode(), partition_key=partition_key)
    low = receive(low_consumer, 3)
    assert [m.data() for m in low] == in_order("both", range(3))
    assert {(m.ordering_key(), m.partition_key()) for m in low} == {(ordering_key, partition_key)}
    assert [m.data() for m in receive(high_consumer, 3)] == in_order("part", range(3))
    assert_nothing(low_consumer, high_consumer)


# -- asyncio client ------------------------------------------------------------------------


async def test_asyncio_client_keys_follow_the_ranges(gateway_factory, redis_clean, topic):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    client_a = pulsar.asyncio.Client(gw_a.url, operation_timeout_seconds=10)
    client_b = pulsar.asyncio.Client(gw_b.url, operation_timeout_seconds=10)
    try:
        consumers = {
            name: await client.subscribe(topic, SUB, consumer_type=KeyShared, consumer_name=name)
            for name, client in (("a", client_a), ("b", client_b))
        }
        ranges = ranges_by_name(redis_clean, topic)
        assert ranges == {"a": [HIGH], "b": [LOW]}
        owned = keys_per_consumer(ranges, 3)
        producer = await client_b.create_producer(topic, batching_enabled=False)
        for r in range(3):
            for key in owned["a"] + owned["b"]:
                await producer.send(f"{key}:{r}".encode(), partition_key=key)
        for name, consumer in consumers.items():
            got = []
            for _ in range(9):
                msg = await asyncio.wait_for(consumer.receive(), TIMEOUT)
                await consumer.acknowledge(msg)
                got.append(msg)
            assert by_key(got) == {k: in_order(k, range(3)) for k in owned[name]}
    finally:
        await client_a.close()
        await client_b.close()
