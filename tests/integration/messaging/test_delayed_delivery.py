"""Delayed delivery (PIP-26) through the gateway with the official client (pulsar-client 3.13).

A producer's ``deliver_after`` / ``deliver_at`` travels as ``MessageMetadata.deliver_at_time``
(ms since epoch, stamped by the client's clock). Shared and Key_Shared subscriptions hold a
message until that time; Exclusive and Failover deliver at once, in order; a time in the past
is due at once. The gateway, Redis and the client run on this machine and share its clock,
so "never early" is checked as ``received_ms >= deliver_at_ms - 1`` (one ms for rounding):
each receive is already waiting when the message is due, so an early delivery would be seen
early. Lateness is only bounded generously (``LATE_MS``): the gateway wakes for the earliest
due message instead of ticking, but the machine is shared and slow.

A subscription's ``msgDelayed`` (topic stats, Pulsar ``SubscriptionStats.msgDelayed``) counts
the messages it holds scheduled.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pulsar
import pulsar.asyncio
import pytest

from tests.adminhttp import admin
from tests.conftest import TIME_SCALE, TIMEOUT, wait_for
from tests.integration.messaging.test_key_shared import keys_in

# The cluster pass of ./dev test runs this file on a Redis Cluster too: delayed delivery
# (Shared, Key_Shared, Exclusive, Failover; a fleet of gateways; seek; msgDelayed in topic
# stats)
pytestmark = pytest.mark.cluster

Shared = pulsar.ConsumerType.Shared
KeyShared = pulsar.ConsumerType.KeyShared
Exclusive = pulsar.ConsumerType.Exclusive
Failover = pulsar.ConsumerType.Failover
EARLIEST = pulsar.InitialPosition.Earliest
RECEIVE_MS = int(TIMEOUT * 1000)
#: How long "nothing arrives" waits, ms.
QUIET_MS = 400
#: How late a due message may arrive, ms: generous, the machine is shared.
LATE_MS = 250 * TIME_SCALE
SUB = "dd"
LOW = (0, 32767)
HIGH = (32768, 65535)
SHARED_TYPES = pytest.mark.parametrize(
    "sub_type", [Shared, KeyShared], ids=["shared", "key_shared"]
)


# -- helpers ---------------------------------------------------------------------------------


def now_ms() -> int:
    return int(time.time() * 1000)


def subscribe(client: Any, topic: str, sub_type: Any, name: str = SUB, **kwargs: Any) -> Any:
    return client.subscribe(topic, name, consumer_type=sub_type, **kwargs)


def producer_of(client: Any, topic: str, batching: bool = False) -> Any:
    # a full pending queue blocks send_async instead of failing the send
    return client.create_producer(topic, batching_enabled=batching, block_if_queue_full=True)


class Sends:
    """Callbacks for ``send_async`` that keep every result, to check none failed."""

    def __init__(self) -> None:
        self.results: list[Any] = []
        self._lock = threading.Lock()

    def __call__(self, result: Any, _msg_id: Any) -> None:
        with self._lock:
            self.results.append(result)

    def assert_all_ok(self, count: int) -> None:
        wait_for(lambda: len(self.results) >= count)
        assert Counter(self.results) == {pulsar.Result.Ok: count}


def receive_at(consumer: Any, timeout_ms: int = RECEIVE_MS) -> tuple[Any, int]:
    """One message and the wall time (ms) it reached the application."""
    msg = consumer.receive(timeout_millis=timeout_ms)
    return msg, now_ms()


def receive_timed(consumer: Any, count: int, ack: bool = True) -> list[tuple[bytes, int]]:
    """``count`` messages as (payload, received ms), acknowledged unless told otherwise."""
    out = []
    for _ in range(count):
        msg, at = receive_at(consumer)
        if ack:
            consumer.acknowledge(msg)
        out.append((msg.data(), at))
    return out


def assert_nothing(*consumers: Any, quiet_ms: int = QUIET_MS) -> None:
    for consumer in consumers:
        with pytest.raises(pulsar.Timeout):
            msg = consumer.receive(timeout_millis=quiet_ms)
            pytest.fail(f"unexpected message {msg.data()!r}")


def assert_on_time(received_ms: int, deliver_at: int, what: object = "message") -> None:
    """Not before its time (1 ms of rounding), and not much after it."""
    assert received_ms >= deliver_at - 1, f"{what} {deliver_at - received_ms} ms early"
    late = received_ms - deliver_at
    assert late < LATE_MS, f"{what} {late} ms late"


def msg_delayed(gw: Any, topic: str, sub: str = SUB) -> int:
    """The subscription's ``msgDelayed`` in the topic stats (admin REST, aiohttp)."""
    status, body = admin("GET", f"{gw.http_url}/admin/v2/persistent/public/default/{topic}/stats")
    assert status == 200, body
    return int(body["subscriptions"][sub]["msgDelayed"])


class Drain:
    """Threads receiving (and acknowledging) from several consumers, recording each payload
    with its consumer's index and the wall time it arrived."""

    def __init__(self, consumers: list[Any]) -> None:
        self.got: list[tuple[bytes, int, int]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(i, c), daemon=True)
            for i, c in enumerate(consumers)
        ]

    def __enter__(self) -> Drain:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(TIMEOUT)

    def _run(self, index: int, consumer: Any) -> None:
        while not self._stop.is_set():
            try:
                msg, at = receive_at(consumer, 100)
            except pulsar.Timeout:
                continue
            consumer.acknowledge(msg)
            with self._lock:
                self.got.append((msg.data(), index, at))

    def count(self) -> int:
        with self._lock:
            return len(self.got)


# -- semantics -------------------------------------------------------------------------------


@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batching"])
@SHARED_TYPES
def test_deliver_after_and_deliver_at_are_honoured(client, topic, sub_type, batching):
    consumer = subscribe(client, topic, sub_type)
    producer = producer_of(client, topic, batching)
    later_at = now_ms() + 700
    producer.send(b"later", deliver_at=later_at)
    before = now_ms()
    producer.send(b"soon", deliver_after=timedelta(milliseconds=350))
    after = now_ms()
    producer.send(b"now")
    got = receive_timed(consumer, 3)
    assert [data for data, _ in got] == [b"now", b"soon", b"later"]
    (_, soon_ms), (_, later_ms) = got[1], got[2]
    # the client stamped "soon" with its clock between `before` and `after`
    assert soon_ms >= before + 350 - 1
    assert soon_ms - (after + 350) < LATE_MS
    assert_on_time(later_ms, later_at, "later")
    assert_nothing(consumer)


@pytest.mark.parametrize("sub_type", [Exclusive, Failover], ids=["exclusive", "failover"])
def test_exclusive_and_failover_deliver_at_once_in_order(client, topic, sub_type):
    consumer = subscribe(client, topic, sub_type)
    producer = producer_of(client, topic)
    far = now_ms() + 5000
    expected = []
    for i in range(6):
        payload = f"m-{i}".encode()
        if i % 3 == 0:
            producer.send(payload, deliver_at=far)
        elif i % 3 == 1:
            producer.send(payload, deliver_after=timedelta(seconds=5))
        else:
            producer.send(payload)
        expected.append(payload)
    got = receive_timed(consumer, 6)
    assert [data for data, _ in got] == expected
    # delivery times are ignored: everything arrived long before the delayed ones' time
    assert max(at for _, at in got) < far
    assert_nothing(consumer)


@SHARED_TYPES
def test_a_time_in_the_past_delivers_at_once(gateway, client, topic, sub_type):
    consumer = subscribe(client, topic, sub_type)
    producer = producer_of(client, topic)
    far = now_ms() + 5000
    producer.send(b"m-0", deliver_at=now_ms() - 60_000)
    producer.send(b"m-1")
    producer.send(b"m-2", deliver_at=1)
    producer.send(b"m-3", deliver_after=timedelta(0))
    got = receive_timed(consumer, 4)
    assert [data for data, _ in got] == [b"m-0", b"m-1", b"m-2", b"m-3"]
    assert max(at for _, at in got) < far
    assert msg_delayed(gateway, topic) == 0
    assert_nothing(consumer)


@SHARED_TYPES
def test_msg_delayed_counts_scheduled_messages(gateway, client, topic, sub_type):
    consumer = subscribe(client, topic, sub_type)
    producer = producer_of(client, topic)
    assert msg_delayed(gateway, topic) == 0
    due = now_ms() + 1500
    for i in range(3):
        producer.send(f"d-{i}".encode(), deliver_at=due)
    producer.send(b"now-0")
    producer.send(b"now-1", deliver_at=now_ms() - 1)
    assert [data for data, _ in receive_timed(consumer, 2)] == [b"now-0", b"now-1"]
    # read and scheduled long before they are due; the due ones are not counted
    wait_for(lambda: msg_delayed(gateway, topic) == 3)
    got = receive_timed(consumer, 3, ack=False)
    assert sorted(data for data, _ in got) == [b"d-0", b"d-1", b"d-2"]
    for _, at in got:
        assert_on_time(at, due)
    # delivered (not yet acknowledged): no longer scheduled
    wait_for(lambda: msg_delayed(gateway, topic) == 0)
    assert_nothing(consumer)


@SHARED_TYPES
def test_non_delayed_messages_keep_their_order(client, topic, sub_type):
    consumer = subscribe(client, topic, sub_type)
    producer = producer_of(client, topic)
    base = now_ms() + 600
    plain, delayed = [], []
    for i in range(24):
        payload = f"m-{i}".encode()
        if i % 3 == 1:
            # distinct, increasing times: the delayed ones have an order of their own too
            producer.send(payload, partition_key="k", deliver_at=base + 10 * i)
            delayed.append((payload, base + 10 * i))
        else:
            producer.send(payload, partition_key="k")
            plain.append(payload)
    got = receive_timed(consumer, len(plain) + len(delayed))
    assert [data for data, _ in got[: len(plain)]] == plain
    assert [data for data, _ in got[len(plain) :]] == [p for p, _ in delayed]
    for (data, at), (payload, deliver_at) in zip(got[len(plain) :], delayed, strict=True):
        assert data == payload
        assert at >= deliver_at - 1, f"{data!r} early"
    assert_nothing(consumer)


@SHARED_TYPES
def test_messages_due_at_the_same_time_keep_publish_order(client, topic, sub_type):
    """Pulsar's trackers order scheduled messages by time, then position: a lone consumer
    gets messages due in the same millisecond in the order they were published, also when
    more than ten share a millisecond of the stream (ids ``<ms>-9`` then ``<ms>-10``)."""
    consumer = subscribe(client, topic, sub_type)
    producer = producer_of(client, topic)
    due = now_ms() + 3000  # time to send them all first, on a loaded machine too
    sent = [f"m-{i}".encode() for i in range(1000)]
    sends = Sends()
    for payload in sent:
        producer.send_async(payload, sends, partition_key="k", deliver_at=due)
    producer.flush()
    sends.assert_all_ok(len(sent))
    assert now_ms() < due, "the machine is too slow for this test's timing"
    got = [receive_at(consumer) for _ in sent]
    assert [m.data() for m, _ in got] == sent
    assert min(at for _, at in got) >= due - 1
    assert_nothing(consumer)


@SHARED_TYPES
def test_new_subscription_schedules_by_the_stored_time(client, topic, sub_type):
    first = subscribe(client, topic, sub_type, "first")
    producer = producer_of(client, topic)
    a_at, b_at = now_ms() + 200, now_ms() + 1500
    producer.send(b"a", deliver_at=a_at)
    producer.send(b"b", deliver_at=b_at)
    producer.send(b"n")
    got = receive_timed(first, 2)
    assert [data for data, _ in got] == [b"n", b"a"]
    assert_on_time(got[1][1], a_at, "a")
    # a's time has passed, b's has not: a new subscription gets a at once, b at its time
    second = subscribe(client, topic, sub_type, "second", initial_position=EARLIEST)
    again = receive_timed(second, 2)
    assert sorted(data for data, _ in again) == [b"a", b"n"]
    assert max(at for _, at in again) < b_at
    for consumer in (first, second):
        (data, at), *_ = receive_timed(consumer, 1)
        assert data == b"b"
        assert_on_time(at, b_at, "b")
    assert_nothing(first, second)


@pytest.mark.parametrize("target", ["earliest", "publish-time"])
@SHARED_TYPES
def test_seek_replays_by_the_stored_time(client, topic, sub_type, target):
    consumer = subscribe(client, topic, sub_type)
    producer = producer_of(client, topic)
    a_at, b_at = now_ms() + 200, now_ms() + 1500
    before_n = now_ms()  # n is stored at or after this time, a and b after n
    producer.send(b"n")
    producer.send(b"a", deliver_at=a_at)
    producer.send(b"b", deliver_at=b_at)
    got = receive_timed(consumer, 2)
    assert [data for data, _ in got] == [b"n", b"a"]
    assert_on_time(got[1][1], a_at, "a")
    consumer.seek(pulsar.MessageId.earliest if target == "earliest" else before_n)
    # a (past its time) comes back at once, b (still ahead) waits for its time, once
    again = receive_timed(consumer, 2)
    assert sorted(data for data, _ in again) == [b"a", b"n"]
    assert max(at for _, at in again) < b_at
    (data, at), *_ = receive_timed(consumer, 1)
    assert data == b"b"
    assert_on_time(at, b_at, "b")
    assert_nothing(consumer)


@SHARED_TYPES
def test_redeliveries_do_not_release_a_delayed_message_early(client, topic, sub_type):
    consumer = subscribe(client, topic, sub_type, negative_ack_redelivery_delay_ms=100)
    producer = producer_of(client, topic)
    d_at = now_ms() + 1500
    producer.send(b"d", partition_key="k", deliver_at=d_at)
    producer.send(b"n", partition_key="k")
    msg, _ = receive_at(consumer)
    assert (msg.data(), msg.redelivery_count()) == (b"n", 0)
    consumer.negative_acknowledge(msg)
    msg, at = receive_at(consumer)
    assert (msg.data(), msg.redelivery_count()) == (b"n", 1)
    assert at < d_at
    # a redelivery of everything unacknowledged must not take the scheduled message along
    consumer.redeliver_unacknowledged_messages()
    msg, at = receive_at(consumer)
    if msg.data() == b"n":
        consumer.acknowledge(msg)
        msg, at = receive_at(consumer)
    assert msg.data() == b"d"
    assert_on_time(at, d_at, "d")
    # nacked after its time, the delayed message is redelivered (it is due)
    consumer.negative_acknowledge(msg)
    msg, at = receive_at(consumer)
    assert (msg.data(), msg.redelivery_count()) == (b"d", 1)
    assert at >= d_at - 1
    consumer.acknowledge(msg)
    assert_nothing(consumer)


@SHARED_TYPES
def test_scheduled_message_of_a_closed_consumer_still_waits(
    gateway_factory, client_factory, topic, sub_type
):
    gw_a, gw_b = gateway_factory(), gateway_factory()
    leaver = subscribe(client_factory(gw_a.url), topic, sub_type)
    producer = producer_of(client_factory(gw_a.url), topic)
    d_at = now_ms() + 1500
    producer.send(b"d", deliver_at=d_at)
    wait_for(lambda: msg_delayed(gw_b, topic) == 1)
    leaver.close()
    stayer = subscribe(client_factory(gw_b.url), topic, sub_type)
    msg, at = receive_at(stayer)
    assert (msg.data(), msg.redelivery_count()) == (b"d", 0)
    assert_on_time(at, d_at, "d")
    stayer.acknowledge(msg)
    assert_nothing(stayer)


@pytest.mark.parametrize("mode", ["auto-split", "sticky"])
def test_key_shared_keeps_each_key_on_one_consumer(gateway_factory, client_factory, topic, mode):
    gw_a, gw_b = gateway_factory(), gateway_factory()

    def policy(span: tuple[int, int]) -> dict[str, Any]:
        if mode == "auto-split":
            return {}
        sticky = pulsar.ConsumerKeySharedPolicy(
            key_shared_mode=pulsar.KeySharedMode.Sticky, sticky_ranges=[span]
        )
        return {"key_shared_policy": sticky}

    # AUTO_SPLIT: the first consumer keeps the upper half, the second takes the lower
    high = subscribe(
        client_factory(gw_a.url), topic, KeyShared, consumer_name="high", **policy(HIGH)
    )
    low = subscribe(client_factory(gw_b.url), topic, KeyShared, consumer_name="low", **policy(LOW))
    owned = {0: keys_in(HIGH, 3), 1: keys_in(LOW, 3)}
    producer = producer_of(client_factory(gw_a.url), topic)
    base = now_ms() + 500
    due: dict[bytes, int] = {}
    with Drain([high, low]) as drain:
        for r in range(3):
            for i, key in enumerate(owned[0] + owned[1]):
                payload = f"{key}:{r}".encode()
                if r == 1:
                    producer.send(payload, partition_key=key)
                    continue
                due[payload] = base + 300 * (r // 2) + 20 * i
                producer.send(payload, partition_key=key, deliver_at=due[payload])
        wait_for(lambda: drain.count() >= 18)
        time.sleep(QUIET_MS / 1000)
    assert len(drain.got) == 18
    for index, keys in owned.items():
        for key in keys:
            mine = [
                (data, who) for data, who, _ in drain.got if data.split(b":")[0] == key.encode()
            ]
            # one consumer, the key's owner; the plain message first, then the delayed
            # ones in time order
            assert {who for _, who in mine} == {index}
            assert [data for data, _ in mine] == [f"{key}:{r}".encode() for r in (1, 0, 2)]
    for data, _, at in drain.got:
        if data in due:
            assert at >= due[data] - 1, f"{data!r} early"


async def test_asyncio_client_deliver_after(gateway, topic):
    client = pulsar.asyncio.Client(gateway.url, operation_timeout_seconds=10)
    try:
        consumer = await client.subscribe(topic, SUB, consumer_type=Shared)
        producer = await client.create_producer(topic, batching_enabled=False)
        before = now_ms()
        await producer.send(b"later", deliver_after=timedelta(milliseconds=400))
        after = now_ms()
        await producer.send(b"now")
        first = await asyncio.wait_for(consumer.receive(), TIMEOUT)
        assert first.data() == b"now"
        second = await asyncio.wait_for(consumer.receive(), TIMEOUT)
        at = now_ms()
        assert second.data() == b"later"
        assert at >= before + 400 - 1
        assert at - (after + 400) < LATE_MS
        await consumer.acknowledge(first)
        await consumer.acknowledge(second)
    finally:
        await client.close()


# -- on time ---------------------------------------------------------------------------------


@pytest.mark.parametrize("gateways", [1, 2])
@SHARED_TYPES
def test_gateway_wakes_for_the_earliest_due_message(
    gateway_factory, client_factory, topic, sub_type, gateways
):
    """Due at +250, +500, +750, +1000 ms but sent latest first, each a little after the
    previous: every send brings a new earliest time, which the sleeping gateway must learn
    (from a producer on another gateway, too). A 1 s tick would be up to 1 s late."""
    gws = [gateway_factory() for _ in range(gateways)]
    consumer = subscribe(client_factory(gws[0].url), topic, sub_type)
    producer = producer_of(client_factory(gws[-1].url), topic)
    base = now_ms()
    offsets = [1000, 750, 500, 250]
    for offset in offsets:
        producer.send(f"+{offset}".encode(), deliver_at=base + offset)
        time.sleep(0.04)
    for offset in reversed(offsets):
        (data, at), *_ = receive_timed(consumer, 1)
        assert data == f"+{offset}".encode()
        assert_on_time(at, base + offset, data)
    assert_nothing(consumer)


@pytest.mark.parametrize("gateways", [2, 3])
def test_fleet_delivers_each_due_message_exactly_once(
    gateway_factory, client_factory, topic, gateways
):
    gws = [gateway_factory() for _ in range(gateways)]
    clients = [client_factory(gw.url) for gw in gws]
    # small queues: no consumer can take everything that falls due at once
    consumers = [
        subscribe(c, topic, Shared, consumer_name=f"c{i}", receiver_queue_size=100)
        for i, c in enumerate(clients)
    ]
    producers = [producer_of(c, topic) for c in clients]
    count = 3000
    base = now_ms() + 800
    due: dict[bytes, int] = {}
    sends = Sends()
    with Drain(consumers) as drain:
        for i in range(count):
            # due over 450 ms, interleaved, published through every gateway
            at = base + (i * 7919) % 450
            payload = f"m-{i}".encode()
            due[payload] = at
            producers[i % gateways].send_async(payload, sends, deliver_at=at)
        for p in producers:
            p.flush()
        sends.assert_all_ok(count)
        wait_for(lambda: drain.count() >= count)
        time.sleep(QUIET_MS / 1000)  # room for a duplicate to show up
    seen = Counter(data for data, _, _ in drain.got)
    assert [d for d, n in seen.items() if n > 1] == []
    assert set(due) - set(seen) == set()
    assert len(drain.got) == count
    early = [(data, due[data] - at) for data, _, at in drain.got if at < due[data] - 1]
    assert early == []
    # every gateway's consumer took part
    assert {who for _, who, _ in drain.got} == set(range(gateways))


def test_burst_due_at_once_is_delivered_in_bounded_chunks_without_starving_others(
    gateway, client_factory, topic
):
    burst_client = client_factory(gateway.url)
    burst = subscribe(burst_client, topic, Shared, receiver_queue_size=10)
    other_topic = f"{topic}-other"
    other = subscribe(client_factory(gateway.url), other_topic, Shared)
    other_producer = producer_of(client_factory(gateway.url), other_topic)
    producer = producer_of(burst_client, topic)
    count = 5000
    due = now_ms() + 5000  # time to send them all first, on a loaded machine too
    sent = [f"m-{i}".encode() for i in range(count)]
    sends = Sends()
    for payload in sent:
        producer.send_async(payload, sends, deliver_at=due)
    producer.flush()
    sends.assert_all_ok(count)
    assert now_ms() < due, "the machine is too slow for this test's timing"
    wait_for(lambda: msg_delayed(gateway, topic) == count)
    got: Counter[bytes] = Counter()
    # 1. flow control: only what the consumer asked for leaves the schedule
    for n in range(1, 101):
        msg, at = receive_at(burst)
        assert at >= due - 1, f"{msg.data()!r} {due - at} ms early"
        burst.acknowledge(msg)
        got[msg.data()] += 1
        if n % 50 == 0:
            scheduled = msg_delayed(gateway, topic)
            assert scheduled >= count - n - 2 * 10, scheduled
    # 2. the rest drained as fast as the consumer goes, while another topic's consumer on
    # the same gateway gets its messages
    other_seen_at: list[int] = []
    with Drain([burst]) as drain:
        for i in range(5):
            other_producer.send(f"other-{i}".encode())
            msg = other.receive(timeout_millis=RECEIVE_MS)
            other_seen_at.append(drain.count())
            assert msg.data() == f"other-{i}".encode()
            other.acknowledge(msg)
        wait_for(lambda: drain.count() >= count - 100)
        time.sleep(QUIET_MS / 1000)
    # every one of them arrived while the burst was still being delivered
    assert other_seen_at[-1] < count - 100, "the other topic waited for the burst"
    for data, _, at in drain.got:
        assert at >= due - 1, f"{data!r} {due - at} ms early"
        got[data] += 1
    assert got == Counter(sent)
    wait_for(lambda: msg_delayed(gateway, topic) == 0)
    assert_nothing(burst, other)
