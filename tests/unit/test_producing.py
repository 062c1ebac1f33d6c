"""The producer and the producer registry against their narrow collaborators: a
:class:`~tests.unit.fake_lane.FakeLane` in memory instead of Redis and a recording notifier.

Objects are built as the composition root (``pulsar_gateway/server/wiring.py``) builds them:
a :class:`Topic` from :class:`Topics` on a :class:`KeySchema`, the gateway's
:class:`GatewayMetrics` and a topic's ``rate_in`` meter from :class:`GatewayMeters`. Scripts
are answered with raw replies in the shapes their ``.lua`` headers document, so the typed
calls' decoding runs too.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from pulsar_gateway.core.errors import ProducerBusy, ProducerFenced, ServiceNotReady, StorageError
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.rates import GatewayMeters
from pulsar_gateway.core.model.access_mode import ProducerAccessMode
from pulsar_gateway.core.model.key_shared import sticky_key_hash
from pulsar_gateway.core.model.ledger import LedgerRollover
from pulsar_gateway.core.policies.delayed_delivery import (
    DelayedDeliveryPolicy,
    DeliveryDelayNotAllowed,
)
from pulsar_gateway.core.policies.topic_creation import TopicCreationRules
from pulsar_gateway.core.producing.producer import EntryToAppend, Producer, ProducerHandle
from pulsar_gateway.core.producing.producer_registry import ProducerRegistry
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.scripts.append import AppendOutcome, AppendStatus
from pulsar_gateway.core.topics.topic import Topic, Topics
from tests.unit.fake_lane import FakeLane, replies

TOPIC = "persistent://public/default/orders"
PRODUCER = "orders-producer"
LEASE_MS = 30_000

Shared, Exclusive = ProducerAccessMode.SHARED, ProducerAccessMode.EXCLUSIVE
WaitForExclusive = ProducerAccessMode.WAIT_FOR_EXCLUSIVE


async def _require_namespace(namespace: str) -> None:
    pass


ROLLOVER = LedgerRollover(max_entries=3)


def _append_ids() -> Callable[[Any, Any], list[bytes]]:
    """An ``append_entries`` stand-in numbering entries 1000-0, 1000-1, ... as Redis would
    in one ledger (args: the rollover limits, then blob, options and publish time per
    entry)."""
    count = itertools.count()
    return lambda keys, args: [b"1000-%d" % next(count) for _ in args[1::3]]


def _answers(*replies: Any) -> Callable[[Any, Any], list[Any]]:
    """An ``append_entries`` stand-in answering ``replies`` to one call."""
    return lambda keys, args: list(replies)


def entries_sent(gateway: Gateway) -> list[tuple[Any, Any]]:
    """(blob, options) of every entry sent, call after call."""
    return [(blob, options) for blob, options, _ in timed_entries_sent(gateway)]


def timed_entries_sent(gateway: Gateway) -> list[tuple[Any, Any, Any]]:
    """(blob, options, publish time) of every entry sent, call after call."""
    out = []
    for call in gateway.lane.named("append_entries"):
        assert call.args[0] == ROLLOVER.argument
        out += list(zip(call.args[1::3], call.args[2::3], call.args[3::3], strict=True))
    return out


@dataclass
class Gateway:
    """The parts of one gateway a producer is built with (as wiring.py builds them)."""

    lane: FakeLane = field(default_factory=FakeLane)
    metrics: GatewayMetrics = field(default_factory=GatewayMetrics)
    meters: GatewayMeters = field(default_factory=GatewayMeters)

    @property
    def topic(self) -> Topic:
        rules = TopicCreationRules(None)
        topics = Topics(self.lane, KeySchema(), _require_namespace, ROLLOVER, rules)  # type: ignore[arg-type]
        return topics.get(TOPIC)

    def producer(
        self,
        *,
        uid: str = "gw-p0",
        access_mode: ProducerAccessMode = Shared,
        epoch: int = 0,
        deduplication: bool = False,
    ) -> Producer:
        topic = self.topic
        producer = Producer(
            topic,
            PRODUCER,
            self.lane,  # type: ignore[arg-type]
            self.metrics,
            topic_meter=self.meters.topic(topic.full_name).rate_in,
            uid=uid,
            access_mode=access_mode,
            epoch=epoch,
        )
        producer.deduplication = deduplication
        return producer


@pytest.fixture
def gateway() -> Gateway:
    gw = Gateway()
    gw.lane.on_script("append_entries", _append_ids())
    return gw


# -- Producer.append ---------------------------------------------------------------------------


def _entry(blob: bytes, num_messages: int = 1, **fields: Any) -> EntryToAppend:
    return EntryToAppend(blob, num_messages, **fields)


def _at(ledger_id: int, entry_id: int) -> AppendOutcome:
    return AppendOutcome(AppendStatus.STORED, ledger_id, entry_id)


@pytest.mark.parametrize(
    ("num_messages", "options", "fields"),
    [
        pytest.param(1, {}, "", id="single-message"),
        pytest.param(5, {}, "5,,,,,,0,", id="batch"),
        pytest.param(
            1, {"sticky_key": b"user-7"}, f",,,,{sticky_key_hash(b'user-7')},,0,", id="sticky-key"
        ),
        pytest.param(1, {"chunk": "0:uuid-1"}, ",,,,,,8,0:uuid-1", id="chunk"),
        pytest.param(
            1, {"publish_time": 1000, "deliver_at": 5000}, ",,,,,5000,0,", id="deliver-at"
        ),
        pytest.param(1, {"sequence_id": 9, "record": 9}, "", id="sequence-id-unchecked"),
    ],
)
async def test_append_stores_the_entry_in_the_topic_ledger(
    gateway: Gateway, num_messages: int, options: dict[str, Any], fields: str
) -> None:
    producer = gateway.producer()
    keys = gateway.topic.keys

    outcome = await producer.append(_entry(b"blob", num_messages, **options))

    assert outcome == _at(1000, 0)
    (call,) = gateway.lane.named("append_entries")
    assert call.keys == (keys.stream, keys.ledger, keys.last_sequence_ids, keys.topic_epoch)
    # no checks: no epoch, producer name, sequence ids; the publish time rides along
    assert timed_entries_sent(gateway) == [(b"blob", fields, options.get("publish_time", 0))]


async def test_appends_of_one_tick_go_in_one_call(gateway: Gateway) -> None:
    producer = gateway.producer()
    first = [producer.append(_entry(b"m-%d" % i)) for i in range(3)]
    assert gateway.lane.named("append_entries") == []  # sent at the end of the tick
    assert [await fut for fut in first] == [_at(1000, 0), _at(1000, 1), _at(1000, 2)]
    later = await producer.append(_entry(b"m-3"))
    assert later == _at(1000, 3)
    assert [len(c.args) for c in gateway.lane.named("append_entries")] == [10, 4]


async def test_a_failed_append_call_fails_every_entry_of_its_tick(gateway: Gateway) -> None:
    producer = gateway.producer()
    gateway.lane.fail_next("append_entries", StorageError("Redis connection lost"))
    appends = [producer.append(_entry(b"m-%d" % i)) for i in range(2)]
    for fut in appends:
        with pytest.raises(StorageError):
            await fut


async def test_append_to_tick_answers_a_tick_with_one_future_in_send_order(
    gateway: Gateway,
) -> None:
    producer = gateway.producer()
    first = producer.append(_entry(b"m-0"))  # an entry with a future of its own, then two
    (tick, i), (same, j) = (producer.append_to_tick(_entry(b"m-%d" % n)) for n in (1, 2))
    assert tick is same and (i, j) == (1, 2)  # indexes in the tick's one append call
    assert await first == _at(1000, 0)
    assert (await tick)[i] == _at(1000, 1) and (await tick)[j] == _at(1000, 2)
    later, k = producer.append_to_tick(_entry(b"m-3"))
    assert later is not tick and k == 0  # the next tick's
    assert await later == [_at(1000, 3)]
    assert [len(c.args) for c in gateway.lane.named("append_entries")] == [10, 4]


async def test_a_failed_append_call_fails_the_tick_future_too(gateway: Gateway) -> None:
    producer = gateway.producer()
    gateway.lane.fail_next("append_entries", StorageError("Redis connection lost"))
    own = producer.append(_entry(b"m-0"))
    tick, _ = producer.append_to_tick(_entry(b"m-1"))
    for fut in (own, tick):
        with pytest.raises(StorageError):
            await fut


async def test_append_notifies_the_topic_once_per_tick_and_counts(gateway: Gateway) -> None:
    producer = gateway.producer()
    channel = gateway.topic.keys.notify_channel

    appends = [
        producer.append(_entry(b"abc")),
        producer.append(_entry(b"0123456789", 5)),
        producer.append(_entry(b"wxyz")),
    ]
    assert gateway.lane.notified == []  # asked with the tick's append call...
    assert [await fut for fut in appends] == [_at(1000, 0), _at(1000, 1), _at(1000, 2)]
    assert gateway.lane.notified == [channel]
    await gateway.lane.drain()
    assert gateway.lane.published == [channel]  # ...published once for the tick

    assert (gateway.metrics.in_messages, gateway.metrics.in_bytes) == (7, 17)
    assert (producer.meter.messages, producer.meter.bytes) == (7, 17)
    topic_meter = gateway.meters.topic(TOPIC).rate_in
    assert (topic_meter.messages, topic_meter.bytes) == (7, 17)

    await producer.append(_entry(b"next"))
    await gateway.lane.drain()
    assert gateway.lane.published == [channel, channel]


@pytest.mark.parametrize("deduplication", [False, True], ids=["plain", "deduplicated"])
async def test_delay_refused_by_policy_stores_nothing_and_is_counted(
    gateway: Gateway, deduplication: bool
) -> None:
    producer = gateway.producer(deduplication=deduplication)
    producer.delayed_delivery = DelayedDeliveryPolicy(max_delay_ms=10_000)
    name = gateway.topic.name
    late = _entry(b"late", sequence_id=7, record=7, publish_time=1000, deliver_at=60_000)

    with pytest.raises(DeliveryDelayNotAllowed, match="10000 milliseconds"):
        producer.append(late)

    assert gateway.lane.calls == []
    assert gateway.metrics.delayed_rejected[name.namespace, str(name)] == 1
    assert gateway.metrics.in_messages == 0
    assert producer.meter.messages == 0


async def test_fixed_delay_policy_overrides_the_requested_time(gateway: Gateway) -> None:
    producer = gateway.producer()
    producer.delayed_delivery = DelayedDeliveryPolicy(fixed_delay_ms=500)
    name = gateway.topic.name
    overridden = gateway.metrics.fixed_delay_overridden

    await producer.append(_entry(b"asked", publish_time=1000, deliver_at=90_000))
    assert overridden[name.namespace, str(name)] == 1
    await producer.append(_entry(b"not-asked", publish_time=2000))
    assert overridden[name.namespace, str(name)] == 1  # nothing was asked, nothing overridden

    assert [options for _, options in entries_sent(gateway)] == [",,,,,1500,0,", ",,,,,2500,0,"]


# -- the checks: deduplication and fencing ------------------------------------------------------


async def test_a_deduplicating_append_sends_the_sequence_ids_and_the_name(
    gateway: Gateway,
) -> None:
    producer = gateway.producer(deduplication=True)
    producer.topic_epoch = 4  # a Shared producer's epoch is not checked
    gateway.lane.on_script("append_entries", _answers(b"1000-7"))
    keys = gateway.topic.keys

    batch = _entry(b"batch", 3, sequence_id=10, record=12, sticky_key=b"k")
    assert await producer.append(batch) == _at(1000, 7)

    (call,) = gateway.lane.named("append_entries")
    assert call.keys == (keys.stream, keys.ledger, keys.last_sequence_ids, keys.topic_epoch)
    hashed = sticky_key_hash(b"k")
    assert entries_sent(gateway) == [(b"batch", f"3,,10,12,{hashed},,0,{PRODUCER}")]
    assert gateway.lane.notified == [keys.notify_channel]
    assert gateway.metrics.in_messages == 3


async def test_an_exclusive_producer_sends_only_its_topic_epoch(gateway: Gateway) -> None:
    producer = gateway.producer(access_mode=Exclusive)
    producer.topic_epoch = 4
    gateway.lane.on_script("append_entries", _answers(b"1000-8"))

    chunk = _entry(b"chunk", sequence_id=10, record=None, chunk="1:uuid-1", publish_time=5)
    await producer.append(chunk)

    # the epoch, no deduplication fields
    assert entries_sent(gateway) == [(b"chunk", ",4,,,,,8,1:uuid-1")]


@pytest.mark.parametrize(
    ("raw", "status"),
    [(None, AppendStatus.DUPLICATE), (0, AppendStatus.REFUSED)],
    ids=["duplicate", "fenced-or-terminated"],
)
async def test_duplicates_and_refusals_store_nothing_and_carry_no_position(
    gateway: Gateway, raw: Any, status: AppendStatus
) -> None:
    producer = gateway.producer(access_mode=Exclusive, deduplication=True)
    gateway.lane.on_script("append_entries", _answers(raw))

    outcome = await producer.append(_entry(b"again", sequence_id=10, record=10))
    assert outcome == AppendOutcome(status, -1, -1)


@pytest.mark.parametrize(
    ("access_mode", "deduplication", "options"),
    [
        (Shared, False, ""),
        (Shared, True, f",,42,42,,,0,{PRODUCER}"),
        (Exclusive, False, ",3,,,,,0,"),
    ],
    ids=["plain", "deduplicated", "exclusive"],
)
async def test_the_producer_decides_which_checks_an_entry_carries(
    gateway: Gateway,
    access_mode: ProducerAccessMode,
    deduplication: bool,
    options: str,
) -> None:
    producer = gateway.producer(access_mode=access_mode, deduplication=deduplication)
    producer.topic_epoch = 3

    outcome = await producer.append(_entry(b"msg", sequence_id=42, record=42))

    assert outcome == _at(1000, 0)
    assert [c.name for c in gateway.lane.calls if c.kind != "notify"] == ["append_entries"]
    assert entries_sent(gateway) == [(b"msg", options)]


# -- ProducerRegistry --------------------------------------------------------------------------


@dataclass
class RecordingNotifier:
    """The two Notifier calls the registry makes, recorded."""

    callbacks: dict[str, Callable[[], None]] = field(default_factory=dict)
    unsubscribed: list[str] = field(default_factory=list)

    def subscribe(self, channel: str, callback: Callable[[], None]) -> None:
        self.callbacks[channel] = callback

    def unsubscribe(self, channel: str) -> None:
        self.callbacks.pop(channel, None)
        self.unsubscribed.append(channel)


OK, BUSY, FENCED, QUEUED = 0, 3, 4, 5


def add_reply(
    status: int, message: bytes | None = None, topic_epoch: int = -1, last_sequence_id: int = -1
) -> list[Any]:
    """``{code, message, topic_epoch, last_sequence_id, others_removed}`` (none removed)."""
    if message is None:
        message = b"Waiting for exclusive access" if status == QUEUED else b"OK"
    return [status, message, topic_epoch, last_sequence_id, 0]


def registry_on(gateway: Gateway) -> tuple[ProducerRegistry, RecordingNotifier]:
    notifier = RecordingNotifier()
    return ProducerRegistry(gateway.lane, notifier, LEASE_MS), notifier  # type: ignore[arg-type]


async def test_add_registers_the_producer_with_the_fleet(gateway: Gateway) -> None:
    registry, notifier = registry_on(gateway)
    gateway.lane.on_script("add_producer", lambda keys, args: add_reply(OK, b"OK", 7, 41))
    producer = gateway.producer(access_mode=Exclusive, epoch=2, deduplication=True)
    keys = gateway.topic.keys

    await registry.add(producer)

    (call,) = gateway.lane.named("add_producer")
    assert call.keys == (
        keys.producers,
        keys.producer_owners,
        keys.producer_waiters,
        keys.topic_epoch,
        keys.last_sequence_ids,
    )
    assert call.args == (PRODUCER, "gw-p0", int(Exclusive), 2, 1, "", LEASE_MS, 1, 0)
    assert (producer.topic_epoch, producer.last_sequence_id) == (7, 41)
    assert producer.ready.done() and not producer.waiting
    assert registry.producers() == [producer]
    assert list(notifier.callbacks) == [keys.producer_channel]
    assert gateway.lane.notified == []  # nobody else was fenced


async def test_add_that_fences_others_tells_their_gateways(gateway: Gateway) -> None:
    registry, _ = registry_on(gateway)
    gateway.lane.on_script("add_producer", lambda keys, args: [0, b"OK", -1, -1, 2])
    producer = gateway.producer()
    producer.topic_epoch = 3  # echoed by the client

    await registry.add(producer)

    assert gateway.lane.named("add_producer")[0].args[5] == 3
    assert producer.topic_epoch is None  # the topic never had an exclusive producer
    assert gateway.lane.notified == [gateway.topic.keys.producer_channel]


@pytest.mark.parametrize(
    ("status", "error", "message"),
    [
        (BUSY, ProducerBusy, b"Producer with name 'orders-producer' is already connected to topic"),
        (FENCED, ProducerFenced, b"Topic has an existing exclusive producer: billing-producer"),
    ],
    ids=["busy", "fenced"],
)
async def test_add_refused_raises_and_forgets_the_topic(
    gateway: Gateway, status: int, error: type[Exception], message: bytes
) -> None:
    registry, notifier = registry_on(gateway)
    gateway.lane.on_script("add_producer", lambda keys, args: add_reply(status, message))
    producer = gateway.producer()

    with pytest.raises(error) as refused:
        await registry.add(producer)

    assert str(refused.value) == message.decode()
    assert registry.producers() == []
    assert not producer.ready.done()
    assert notifier.callbacks == {}
    assert notifier.unsubscribed == [gateway.topic.keys.producer_channel]


async def test_add_that_fails_in_redis_forgets_the_topic(gateway: Gateway) -> None:
    registry, notifier = registry_on(gateway)
    gateway.lane.fail_next("add_producer", StorageError("Redis connection lost"))
    producer = gateway.producer()

    with pytest.raises(StorageError):
        await registry.add(producer)

    assert registry.producers() == []
    assert notifier.callbacks == {}
    assert notifier.unsubscribed == [gateway.topic.keys.producer_channel]


async def test_wait_for_exclusive_producer_queues_until_a_renewal_retry_succeeds(
    gateway: Gateway,
) -> None:
    registry, _ = registry_on(gateway)
    gateway.lane.on_script(
        "add_producer", replies(add_reply(QUEUED), add_reply(QUEUED), add_reply(OK, b"OK", 1))
    )
    gateway.lane.on_script("renew_producer_leases", lambda keys, args: [])
    producer = gateway.producer(access_mode=WaitForExclusive)

    await registry.add(producer)
    assert producer.waiting and not producer.ready.done()
    assert registry.producers() == []

    await registry.renew()  # the topic is still taken
    assert producer.waiting and not producer.ready.done()

    await registry.renew()
    assert producer.ready.done() and producer.ready.result() is None
    assert not producer.waiting
    assert producer.topic_epoch == 1
    assert registry.producers() == [producer]
    renewal = gateway.lane.named("renew_producer_leases")[0]
    assert renewal.args == (LEASE_MS, 0, "gw-p0")  # no registered producer, one waiter
    assert [call.args[-1] for call in gateway.lane.named("add_producer")] == [0, 1, 1]


async def test_hint_on_the_producer_channel_retries_waiters(gateway: Gateway) -> None:
    registry, notifier = registry_on(gateway)
    gateway.lane.on_script("add_producer", replies(add_reply(QUEUED), add_reply(OK)))
    gateway.lane.on_script("renew_producer_leases", lambda keys, args: [])
    producer = gateway.producer(access_mode=WaitForExclusive)
    await registry.add(producer)

    notifier.callbacks[gateway.topic.keys.producer_channel]()  # the holder left
    await gateway.lane.drain()

    assert producer.ready.done() and not producer.waiting
    assert registry.producers() == [producer]


async def test_renewal_reporting_a_uid_lost_closes_that_producer(gateway: Gateway) -> None:
    registry, notifier = registry_on(gateway)
    gateway.lane.on_script("add_producer", lambda keys, args: add_reply(OK))
    gateway.lane.on_script("renew_producer_leases", lambda keys, args: [b"gw-p0"])
    lost: list[ProducerHandle] = []
    producer = gateway.producer()
    producer.on_lost = lost.append
    await registry.add(producer)

    await registry.renew()

    renewal = gateway.lane.named("renew_producer_leases")[0]
    assert renewal.args == (LEASE_MS, 1, PRODUCER, "gw-p0")
    assert lost == [producer]
    assert producer.closed
    assert registry.producers() == []
    assert notifier.unsubscribed == [gateway.topic.keys.producer_channel]


async def test_renewal_reporting_a_waiter_lost_fails_its_ready(gateway: Gateway) -> None:
    registry, _ = registry_on(gateway)
    gateway.lane.on_script("add_producer", lambda keys, args: add_reply(QUEUED))
    gateway.lane.on_script("renew_producer_leases", lambda keys, args: [b"gw-p0"])
    producer = gateway.producer(access_mode=WaitForExclusive)
    await registry.add(producer)

    await registry.renew()

    with pytest.raises(ProducerFenced, match="while waiting"):
        producer.ready.result()
    assert producer.closed
    assert len(gateway.lane.named("add_producer")) == 1  # no retry for a fenced waiter


@pytest.mark.parametrize(("waiters_exist", "notified"), [(1, 1), (0, 0)])
async def test_remove_releases_and_wakes_waiters_when_told(
    gateway: Gateway, waiters_exist: int, notified: int
) -> None:
    registry, notifier = registry_on(gateway)
    gateway.lane.on_script("add_producer", lambda keys, args: add_reply(OK))
    gateway.lane.on_script("release_producer", lambda keys, args: waiters_exist)
    producer = gateway.producer()
    await registry.add(producer)
    keys = gateway.topic.keys

    await registry.remove(producer)

    (call,) = gateway.lane.named("release_producer")
    assert call.keys == (keys.producers, keys.producer_owners, keys.producer_waiters)
    assert call.args == (PRODUCER, "gw-p0")
    assert producer.closed
    assert registry.producers() == []
    assert notifier.unsubscribed == [keys.producer_channel]
    assert gateway.lane.notified == [keys.producer_channel] * notified


async def test_remove_of_a_waiting_producer_fails_its_ready(gateway: Gateway) -> None:
    registry, _ = registry_on(gateway)
    gateway.lane.on_script("add_producer", lambda keys, args: add_reply(QUEUED))
    gateway.lane.on_script("release_producer", lambda keys, args: 0)
    producer = gateway.producer(access_mode=WaitForExclusive)
    await registry.add(producer)

    await registry.remove(producer)

    with pytest.raises(ServiceNotReady):
        producer.ready.result()
    assert gateway.lane.named("release_producer")[0].args == (PRODUCER, "gw-p0")
