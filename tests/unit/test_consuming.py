"""The dispatcher, subscription and consumer against their narrow collaborators: a
:class:`~tests.unit.fake_lane.FakeLane` in memory instead of Redis, sinks that record what
the adapter would send, and a recording stand-in for a consumer's subscription.

Scripts are answered with raw replies in the shapes their ``.lua`` headers document, so the
typed calls' decoding runs too. ``Dispatcher.run_once`` is called directly; the background
task that ``Subscription.attach`` starts is stopped by the tests (nothing here relies on it).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from pulsar_gateway.core.consuming.consumer import Consumer, ConsumerHandle, LastMessageId
from pulsar_gateway.core.consuming.dispatcher import (
    FIRST_READ_MESSAGES,
    MAX_READ_SIZE_BYTES,
    ROUND_ROBIN_BATCH,
)
from pulsar_gateway.core.consuming.subscription import Subscription
from pulsar_gateway.core.errors import (
    ConsumerBusy,
    NotAllowed,
    ServiceNotReady,
    StorageError,
    SubscriptionNotFound,
)
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.rates import GatewayMeters, Meter
from pulsar_gateway.core.model.entry import BLOB, DELIVER_AT, NUM_MESSAGES, Delivery
from pulsar_gateway.core.model.key_shared import KeySharedMode, KeySharedPolicy
from pulsar_gateway.core.model.ledger import LedgerRollover
from pulsar_gateway.core.model.message_id import MessageId
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.policies.topic_creation import TopicCreationRules
from pulsar_gateway.core.policies.unacked_limits import UnackedLimits
from pulsar_gateway.core.storage.keys import KeySchema, SubscriptionKeys
from pulsar_gateway.core.topics.topic import Topic, Topics
from tests.unit.fake_lane import FakeLane, replies

TOPIC = "persistent://public/default/orders"
SUB = "billing"
LEASE_MS = 30_000

Shared, Exclusive = SubscriptionType.SHARED, SubscriptionType.EXCLUSIVE
Failover, KeyShared = SubscriptionType.FAILOVER, SubscriptionType.KEY_SHARED


# -- raw replies, as the .lua headers document them ------------------------------------------


def entry(
    stream_id: bytes, blob: bytes = b"payload", *, batch: int = 1, redeliveries: int = 0
) -> list[Any]:
    """One delivery of a dispatch reply: id, fields, redelivery_count, ack set ('' = none)."""
    fields: list[Any] = [BLOB, blob]
    if batch > 1:
        fields += [NUM_MESSAGES, b"%d" % batch]
    return [stream_id, fields, redeliveries, b""]


NOW_MS = 1_000_000


def dispatched(
    *entries: list[Any], moved: int = 0, next_due: int = -1, late: list[int] | None = None
) -> list[Any]:
    """``{0, moved, next_due, late, now, room, (id, fields, redelivery_count, ack set)...}``
    (room -1: no unacked limit)."""
    return [0, moved, next_due, late or [], NOW_MS, -1, *itertools.chain.from_iterable(entries)]


def read_reply(*rows: tuple[bytes, list[Any]]) -> list[Any] | None:
    """``XREADGROUP`` of one stream: ``[[stream, [[id, fields]...]]]``, None when empty."""
    return [[b"stream", [list(row) for row in rows]]] if rows else None


class Backlog:
    """A backlog of single-message entries, each handed out once: by ``dispatch.lua``
    reading it (as many as its permits, ARGV[3], allow), or by the native ``XREADGROUP``
    that follows the script when it leaves new entries to the caller (ARGV[8] = 1)."""

    def __init__(self, size: int, payload: bytes = b"payload") -> None:
        self.ids = [b"2000-%d" % i for i in range(size)]
        self.payload = payload

    def __call__(self, keys: list[str], args: list[Any]) -> list[Any]:
        if len(args) > 7 and args[7] == 1:
            return dispatched()
        taken, self.ids = self.ids[: int(args[2])], self.ids[int(args[2]) :]
        return dispatched(*(entry(i) for i in taken))

    def read(self, args: list[Any]) -> list[Any] | None:
        count = int(args[args.index("COUNT") + 1])
        taken, self.ids = self.ids[:count], self.ids[count:]
        return read_reply(*((i, [BLOB, self.payload]) for i in taken))

    def serve(self, lane: FakeLane) -> None:
        lane.on_script("dispatch", self)
        lane.on_command("XREADGROUP", self.read)


# -- the collaborators -------------------------------------------------------------------------


@dataclass
class RecordingSink:
    """The adapter's side of a consumer (ConsumerSink), recorded."""

    delivered: list[Delivery] = field(default_factory=list)
    closed_by_gateway_calls: int = 0
    reached_end_calls: int = 0
    active_changes: list[bool] = field(default_factory=list)
    on_deliver: Callable[[], None] = lambda: None

    def deliver(self, consumer: ConsumerHandle, deliveries: list[Delivery]) -> None:
        self.on_deliver()
        self.delivered += deliveries

    def closed_by_gateway(self, consumer: ConsumerHandle) -> None:
        self.closed_by_gateway_calls += 1

    def reached_end_of_topic(self, consumer: ConsumerHandle) -> None:
        self.reached_end_calls += 1

    def active_changed(self, consumer: ConsumerHandle, active: bool) -> None:
        self.active_changes.append(active)


async def _register_namespace(namespace: str) -> None:
    pass


def topic_of(lane: FakeLane, name: str = TOPIC) -> Topic:
    rules = TopicCreationRules(None)
    topics = Topics(lane, KeySchema(), _register_namespace, LedgerRollover(), rules)  # type: ignore[arg-type]
    return topics.get(name)


@pytest.fixture
def lane() -> FakeLane:
    lane = FakeLane()
    lane.on_command("XREADGROUP", lambda args: None)  # no new entries unless a test says
    return lane


@pytest.fixture
def idle() -> list[Subscription]:
    """Subscriptions whose last local consumer left (their ``on_idle`` calls)."""
    return []


@pytest.fixture
async def make_subscription(
    lane: FakeLane, idle: list[Subscription]
) -> AsyncIterator[Callable[..., Subscription]]:
    """Builds subscriptions as the subscription service does. Their dispatchers are stopped
    at the end, but a test that attaches should stop its own first: the task started by
    ``attach`` would otherwise run one round before this teardown."""
    made: list[Subscription] = []
    meters = GatewayMeters()

    def make(sub_type: SubscriptionType = Shared, *, durable: bool = True) -> Subscription:
        topic = topic_of(lane)
        sub = Subscription(
            topic,
            SUB,
            sub_type,
            durable,
            lane=lane,  # type: ignore[arg-type]
            lease_ms=LEASE_MS,
            metrics=GatewayMetrics(),
            meter=meters.topic(topic.full_name).out(SUB),
            on_idle=idle.append,
        )
        made.append(sub)
        return sub

    yield make
    for sub in made:
        task = sub.dispatcher.stop()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def add_consumer(sub: Subscription, uid: str, permits: int = 0) -> tuple[Consumer, RecordingSink]:
    """A consumer already attached (as ``attach`` leaves it), with ``permits``."""
    sink = RecordingSink()
    consumer = Consumer(sub, uid, f"consumer-{uid}", sink)
    sub.consumers.append(consumer)
    consumer.flow(permits)
    return consumer, sink


def permits_asked(lane: FakeLane, script: str, uid: str) -> list[int]:
    return [call.args[2] for call in lane.named(script) if call.args[1] == uid]


# -- Dispatcher.run_once ---------------------------------------------------------------------


async def test_lone_consumer_is_fed_in_chunks_each_asked_before_the_last_is_delivered(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared)
    Backlog(1000).serve(lane)
    consumer, sink = add_consumer(sub, "gw-0", permits=600)
    calls_at_delivery: list[int] = []
    sink.on_deliver = lambda: calls_at_delivery.append(len(lane.named("dispatch")))

    assert await sub.dispatcher.run_once() == 600

    first = lane.named("dispatch")[0]
    assert first.keys == tuple(sub.keys.all)
    # before any delivery told the messages' size, a request asks for a few only (a first
    # read of DISPATCH_CHUNK large messages would be DISPATCH_CHUNK x their size)
    first_read = FIRST_READ_MESSAGES
    assert first.args == (
        SUB,
        "gw-0",
        first_read,
        "1.000",
        LEASE_MS,
        int(Shared),
        -1,
        1,
        0,
        0,
        0,
        0,
    )
    assert permits_asked(lane, "dispatch", "gw-0") == [first_read, first_read, 250, 250]
    # the next chunk is requested (and flushed) before the current one goes to the client
    assert calls_at_delivery == [2, 3, 4, 4]
    assert lane.flushes == 4
    assert consumer.permits == 0
    assert [d.stream_id for d in sink.delivered] == [b"2000-%d" % i for i in range(600)]


async def test_lone_consumer_keeps_exact_permits_when_the_backlog_runs_out(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared)
    Backlog(300).serve(lane)
    consumer, sink = add_consumer(sub, "gw-0", permits=600)

    assert await sub.dispatcher.run_once() == 300

    # the third reply (200 of 250) says the backlog ran out: no fourth, empty call
    first_read = FIRST_READ_MESSAGES
    assert permits_asked(lane, "dispatch", "gw-0") == [first_read, first_read, 250]
    assert consumer.permits == 300
    assert len(sink.delivered) == 300
    assert sub.meter.messages == 300


async def test_requests_ask_for_about_the_read_size_in_bytes(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    """Messages of 1 MiB: once the first delivery told their size, each request asks for
    MAX_READ_SIZE_BYTES of them (Pulsar's dispatcherMaxReadSizeBytes), not DISPATCH_CHUNK."""
    sub = make_subscription(Shared)
    Backlog(200, payload=b"x" * 1024 * 1024).serve(lane)
    _, sink = add_consumer(sub, "gw-0", permits=200)

    assert await sub.dispatcher.run_once() == 200

    asked = permits_asked(lane, "dispatch", "gw-0")
    per_read = MAX_READ_SIZE_BYTES // (1024 * 1024)
    assert asked[:2] == [FIRST_READ_MESSAGES, FIRST_READ_MESSAGES]
    assert set(asked[2:]) == {per_read}
    assert len(sink.delivered) == 200


async def test_a_consumer_whose_connection_is_not_writable_gets_nothing_until_it_is(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared)
    Backlog(100).serve(lane)
    consumer, sink = add_consumer(sub, "gw-0", permits=100)
    consumer.set_writable(False)

    assert await sub.dispatcher.run_once() == 0
    assert lane.named("dispatch") == []
    assert consumer.permits == 100  # the permits stay granted

    sub.dispatcher._wake.clear()
    consumer.set_writable(True)
    assert sub.dispatcher._wake.is_set()  # woken to deliver
    assert await sub.dispatcher.run_once() == 100
    assert len(sink.delivered) == 100


async def test_a_lone_consumer_that_stops_being_writable_gets_no_further_chunk(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    """The connection fills up while a chunk is delivered: the chunk already asked for is
    delivered, no other is asked for."""
    sub = make_subscription(Shared)
    Backlog(1000).serve(lane)
    consumer, sink = add_consumer(sub, "gw-0", permits=1000)
    sink.on_deliver = lambda: consumer.set_writable(False)

    delivered = await sub.dispatcher.run_once()

    assert delivered == 2 * FIRST_READ_MESSAGES
    assert len(lane.named("dispatch")) == 2
    assert consumer.permits == 1000 - delivered


async def test_a_consumer_at_its_unacked_limit_is_blocked_until_acks_bring_it_down(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    """A reply that leaves no room under the unacked limits is followed at once by another
    request, whose BLOCKED answer marks the consumer; its acks then make the dispatcher ask
    again, passing the script that the consumer is blocked (unblocked at half)."""
    sub = make_subscription(KeyShared)
    sub.unacked_limits = UnackedLimits(consumer=3)
    at_limit = dispatched(entry(b"2000-0"), entry(b"2000-1"), entry(b"2000-2"))
    at_limit[5] = 0  # no room left
    lane.on_script(
        "dispatch_key_shared",
        # 7: BLOCKED, then one more entry and nothing left
        replies(at_limit, [7, 3, 3, 1, 0], dispatched(entry(b"2000-3")), dispatched()),
    )
    consumer, _ = add_consumer(sub, "gw-0", permits=100)

    assert await sub.dispatcher.run_once() == 3
    assert consumer.blocked_on_unacked and not sub.blocked_on_unacked
    calls = lane.named("dispatch_key_shared")
    assert [call.args[5:] for call in calls] == [(3, 0, 0, 0), (3, 0, 0, 0)]

    assert await sub.dispatcher.run_once() == 0  # blocked: not asked
    assert len(lane.named("dispatch_key_shared")) == 2

    consumer.ack([b"2000-0", b"2000-1"])  # recheck: asked again, blocked (1) passed on
    assert sub.dispatcher._wake.is_set()
    assert await sub.dispatcher.run_once() == 1
    assert lane.named("dispatch_key_shared")[2].args[5:] == (3, 1, 0, 0)
    assert not consumer.blocked_on_unacked


async def test_consumers_with_permits_get_at_most_a_round_robin_batch_per_round(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared)
    Backlog(1000).serve(lane)
    a, sink_a = add_consumer(sub, "gw-0", permits=100)
    b, sink_b = add_consumer(sub, "gw-1", permits=30)

    assert await sub.dispatcher.run_once() == 130

    assert ROUND_ROBIN_BATCH == 20
    # two shared rounds, then gw-0 alone is fed what it has left in one request
    assert permits_asked(lane, "dispatch", "gw-0") == [20, 20, 60]
    assert permits_asked(lane, "dispatch", "gw-1") == [20, 10]
    assert {call.args[1] for call in lane.named("dispatch")[:2]} == {"gw-0", "gw-1"}
    assert (a.permits, b.permits) == (0, 0)
    ids_a = {d.stream_id for d in sink_a.delivered}
    ids_b = {d.stream_id for d in sink_b.delivered}
    assert (len(ids_a), len(ids_b)) == (100, 30)
    assert not ids_a & ids_b


async def test_consumer_gone_reply_closes_the_consumer(
    lane: FakeLane, make_subscription: Callable[..., Subscription], idle: list[Subscription]
) -> None:
    sub = make_subscription(Shared)
    lane.on_script("dispatch", lambda keys, args: [2])
    consumer, sink = add_consumer(sub, "gw-0", permits=10)

    assert await sub.dispatcher.run_once() == 0

    assert consumer.closed
    assert sink.closed_by_gateway_calls == 1
    assert sub.consumers == []
    assert idle == [sub]
    await lane.drain()
    assert lane.named("release_consumer") == []  # reaped already: nothing to hand back


async def test_not_active_reply_marks_the_named_failover_consumer_active(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Failover)
    lane.on_script("dispatch", lambda keys, args: [6, b"gw-1"])
    asking, sink_asking = add_consumer(sub, "gw-0", permits=10)
    other, sink_other = add_consumer(sub, "gw-1")

    assert await sub.dispatcher.run_once() == 0

    assert (asking.active, other.active) == (False, True)
    assert sink_asking.active_changes == [False]
    assert sink_other.active_changes == [True]
    assert sink_asking.delivered == []


async def test_failover_delivery_marks_the_receiving_consumer_active(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Failover)
    lane.on_script("dispatch", replies(dispatched(entry(b"2000-0")), dispatched()))
    receiving, sink = add_consumer(sub, "gw-0", permits=10)
    other, _ = add_consumer(sub, "gw-1")

    assert await sub.dispatcher.run_once() == 1

    assert (receiving.active, other.active) == (True, False)
    assert sink.active_changes == [True]


async def test_wake_fleet_reply_notifies_the_topic_channel(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared)
    lane.on_script("dispatch", replies(dispatched(entry(b"2000-0"), moved=1), dispatched()))
    add_consumer(sub, "gw-0", permits=10)

    assert await sub.dispatcher.run_once() == 1

    assert lane.notified == [sub.topic.keys.notify_channel]  # the second reply moved nothing


async def test_scheduled_messages_lateness_is_observed_once_each(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared)
    lane.on_script(
        "dispatch",
        replies(dispatched(entry(b"2000-0"), entry(b"2000-1"), late=[3, 1500]), dispatched()),
    )
    add_consumer(sub, "gw-0", permits=10)

    assert await sub.dispatcher.run_once() == 2

    histogram = sub.metrics.registry.get_sample_value
    name = "pulsar_gateway_delayed_delivery_lateness_seconds"
    assert histogram(f"{name}_count") == 2
    assert histogram(f"{name}_sum") == pytest.approx(1.503)
    assert histogram(f"{name}_bucket", {"le": "0.005"}) == 1


async def test_failed_dispatch_abandons_the_consumer_and_hands_its_entries_back(
    lane: FakeLane, make_subscription: Callable[..., Subscription], idle: list[Subscription]
) -> None:
    sub = make_subscription(Shared)
    lane.fail_next("dispatch", StorageError("Redis connection lost"))
    lane.on_script("release_consumer", lambda keys, args: 4)
    consumer, sink = add_consumer(sub, "gw-0", permits=10)

    with pytest.raises(StorageError):
        await sub.dispatcher.run_once()

    assert consumer.closed
    assert sink.closed_by_gateway_calls == 1
    assert idle == [sub]
    await lane.drain()
    (release,) = lane.named("release_consumer")
    assert release.keys == tuple(sub.keys.all)
    assert release.args == (SUB, "gw-0")
    assert lane.notified == [sub.topic.keys.notify_channel]  # 4 entries handed back


async def test_undecodable_dispatch_reply_abandons_a_lone_consumer(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    """The script ran (entries are pending at the consumer) but its reply cannot be read:
    the consumer is abandoned so the entries are handed back, as in a round-robin round."""
    sub = make_subscription(Shared)
    lane.on_script("dispatch", lambda keys, args: [99, 0, -1])  # no such status
    lane.on_script("release_consumer", lambda keys, args: 1)
    consumer, sink = add_consumer(sub, "gw-0", permits=10)

    with pytest.raises(Exception):  # noqa: B017 - whatever the decoder raises
        await sub.dispatcher.run_once()

    assert consumer.closed
    assert sink.closed_by_gateway_calls == 1
    await lane.drain()
    assert [call.args for call in lane.named("release_consumer")] == [(SUB, "gw-0")]


async def test_failed_call_in_a_round_abandons_only_its_consumer(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared)
    Backlog(100).serve(lane)
    lane.fail_next("dispatch", StorageError("Redis connection lost"))
    lane.on_script("release_consumer", lambda keys, args: 0)
    consumers = {uid: add_consumer(sub, uid, permits=5) for uid in ("gw-0", "gw-1")}

    with pytest.raises(StorageError):
        await sub.dispatcher.run_once()

    failed = lane.named("dispatch")[0].args[1]  # the round's first call was the failed one
    (fed,) = {"gw-0", "gw-1"} - {failed}
    assert consumers[failed][0].closed
    assert [len(consumers[uid][1].delivered) for uid in (failed, fed)] == [0, 5]
    assert not consumers[fed][0].closed
    await lane.drain()
    assert [call.args for call in lane.named("release_consumer")] == [(SUB, failed)]


async def test_dispatch_refused_at_shutdown_does_not_abandon_the_consumer(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared)
    lane.fail_next("dispatch", ServiceNotReady("the gateway is shutting down"))
    consumer, sink = add_consumer(sub, "gw-0", permits=10)

    with pytest.raises(ServiceNotReady):
        await sub.dispatcher.run_once()

    await lane.drain()
    assert not consumer.closed
    assert sink.closed_by_gateway_calls == 0
    assert lane.named("release_consumer") == []


async def test_native_read_settles_what_the_permits_and_the_clock_do_not_allow(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    """A lone Shared consumer's new entries come from the XREADGROUP after the script: a
    whole entry while a permit is left, one not yet due (deliver-at after the script's
    clock) to be scheduled, the rest handed back; the settle reply's next due time and
    moved flag reach the dispatcher."""
    sub = make_subscription(Shared)
    lane.on_script("dispatch", lambda keys, args: dispatched())
    batch = [BLOB, b"b", NUM_MESSAGES, b"3"]
    lane.on_command(
        "XREADGROUP",
        replies(
            read_reply(
                (b"2000-0", batch),
                (b"2000-1", [BLOB, b"later", DELIVER_AT, b"%d" % (NOW_MS + 5_000)]),
                (b"2000-2", batch),
                (b"2000-3", batch),
                (b"2000-4", batch),
            )
        ),
    )
    lane.on_script("settle_read", lambda keys, args: [1, 5_000])
    _, sink = add_consumer(sub, "gw-0", permits=5)

    assert await sub.dispatcher.run_once() == 6
    await lane.drain()

    (control,) = lane.named("dispatch")
    assert control.args[7] == 1  # new entries left to the native read
    (read,) = lane.named("XREADGROUP")
    assert read.args == ("GROUP", SUB, "gw-0", "COUNT", 5, "STREAMS", sub.keys.stream, ">")
    assert [d.stream_id for d in sink.delivered] == [b"2000-0", b"2000-2"]
    (settle,) = lane.named("settle_read")
    assert settle.args == (
        SUB,
        "gw-0",
        b"2000-4",
        2,
        b"2000-3",
        b"2000-4",
        b"2000-1",
        NOW_MS + 5_000,
    )
    assert lane.notified == [sub.topic.keys.notify_channel]
    assert sub.dispatcher._due_at is not None  # it wakes when the scheduled entry is due


async def test_native_read_for_a_reaped_consumer_hands_all_it_read_back(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Exclusive)
    lane.on_script("dispatch", lambda keys, args: [2])
    lane.on_command("XREADGROUP", lambda args: read_reply((b"2000-0", [BLOB, b"x"])))
    lane.on_script("settle_read", lambda keys, args: [0, -1])
    consumer, sink = add_consumer(sub, "gw-0", permits=10)

    assert await sub.dispatcher.run_once() == 0
    await lane.drain()

    assert consumer.closed
    assert sink.delivered == []
    assert [call.args for call in lane.named("settle_read")] == [
        (SUB, "gw-0", b"2000-0", 1, b"2000-0")
    ]


async def test_failed_settle_abandons_the_consumer_holding_the_entries(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared)
    lane.on_script("dispatch", lambda keys, args: dispatched())
    lane.on_command(
        "XREADGROUP", replies(read_reply((b"2000-0", [BLOB, b"a"]), (b"2000-1", [BLOB, b"b"])))
    )
    lane.fail_next("settle_read", StorageError("Redis connection lost"))
    lane.on_script("release_consumer", lambda keys, args: 1)
    consumer, sink = add_consumer(sub, "gw-0", permits=1)

    assert await sub.dispatcher.run_once() == 1
    await lane.drain()

    assert [d.stream_id for d in sink.delivered] == [b"2000-0"]
    assert consumer.closed  # 2000-1 was pending at it, unsent: released, so handed back
    assert [call.args for call in lane.named("release_consumer")] == [(SUB, "gw-0")]


async def test_unreadable_entry_in_a_native_read_abandons_the_consumer(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared)
    lane.on_script("dispatch", lambda keys, args: dispatched())
    lane.on_command(
        "XREADGROUP", lambda args: read_reply((b"2000-0", [BLOB, b"a", NUM_MESSAGES, b"many"]))
    )
    lane.on_script("release_consumer", lambda keys, args: 1)
    consumer, sink = add_consumer(sub, "gw-0", permits=10)

    with pytest.raises(ValueError):
        await sub.dispatcher.run_once()
    await lane.drain()

    assert consumer.closed
    assert sink.delivered == []
    assert [call.args for call in lane.named("release_consumer")] == [(SUB, "gw-0")]


async def test_failover_reads_natively_only_once_the_consumer_is_known_active(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Failover)
    lane.on_script("dispatch", replies(dispatched(entry(b"2000-0")), dispatched()))
    consumer, _ = add_consumer(sub, "gw-0", permits=10)

    assert await sub.dispatcher.run_once() == 1
    assert lane.named("XREADGROUP") == []  # not known active: the script read
    assert consumer.active is True

    assert await sub.dispatcher.run_once() == 0
    # ARGV[8]: 0 the script reads new entries, 1 the native read does
    assert [call.args[7] for call in lane.named("dispatch")] == [0, 1]
    assert len(lane.named("XREADGROUP")) == 1


async def test_key_shared_dispatch_uses_its_script_and_learns_the_batch_size(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(KeyShared)
    lane.on_script(
        "dispatch_key_shared", replies(dispatched(entry(b"2000-0", batch=3)), dispatched())
    )
    consumer, sink = add_consumer(sub, "gw-0", permits=5)

    assert await sub.dispatcher.run_once() == 3

    assert lane.named("dispatch") == []
    calls = lane.named("dispatch_key_shared")
    assert [call.args for call in calls] == [
        (SUB, "gw-0", 5, "1.000", LEASE_MS, 0, 0, 0, 0),
        (
            SUB,
            "gw-0",
            2,
            "1.400",
            LEASE_MS,
            0,
            0,
            0,
            0,
        ),  # permits left; 0.8 * 1 + 0.2 * 3 per entry
    ]
    assert consumer.permits == 2
    assert sink.delivered[0].num_messages == 3


async def test_partly_acked_batch_costs_only_its_unacked_messages(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared)
    partly_acked = [b"2000-0", [BLOB, b"batch", NUM_MESSAGES, b"4"], 1, b"1011"]
    lane.on_script("dispatch", replies(dispatched(partly_acked), dispatched()))
    consumer, sink = add_consumer(sub, "gw-0", permits=10)

    assert await sub.dispatcher.run_once() == 3

    (delivery,) = sink.delivered
    assert (delivery.num_messages, delivery.ack_set) == (3, (0b1101,))
    assert consumer.permits == 7
    assert consumer.batch_acks  # its whole-entry acks now clear the stored ack set


async def test_read_compacted_reads_the_compacted_view_first(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Exclusive)
    sub.read_compacted = True
    lane.on_script(
        "dispatch_compacted", replies(dispatched(entry(b"2000-3", b"compacted")), dispatched())
    )
    _, sink = add_consumer(sub, "gw-0", permits=10)

    assert await sub.dispatcher.run_once() == 1

    call = lane.named("dispatch_compacted")[0]
    topic_keys = sub.topic.keys
    assert call.keys == (*sub.keys.all, topic_keys.compaction, topic_keys.compacted)
    assert call.args == (SUB, "gw-0", 10, "1.000", LEASE_MS, int(Exclusive), -1)
    assert lane.named("dispatch") == []
    assert [d.blob for d in sink.delivered] == [b"compacted"]


async def test_read_compacted_past_the_horizon_falls_back_to_dispatch(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Exclusive)
    sub.read_compacted = True
    lane.on_script("dispatch_compacted", lambda keys, args: [100])
    lane.on_script("dispatch", replies(dispatched(entry(b"2000-9", b"tail")), dispatched()))
    _, sink = add_consumer(sub, "gw-0", permits=10)

    assert await sub.dispatcher.run_once() == 1

    names = [call.name for call in lane.calls if call.kind == "eval"]
    assert names[:2] == ["dispatch_compacted", "dispatch"]
    # the same request (the plain script takes the native-read flag and limits too)
    assert lane.named("dispatch")[0].args[:7] == lane.named("dispatch_compacted")[0].args
    assert [d.blob for d in sink.delivered] == [b"tail"]


# -- Subscription ------------------------------------------------------------------------------


async def test_attach_subscribes_with_typed_arguments_and_registers_the_consumer(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(KeyShared)
    lane.on_script("subscribe", lambda keys, args: [0, b"OK", 0, b""])
    policy = KeySharedPolicy(KeySharedMode.STICKY, ((0, 99), (200, 299)), allow_out_of_order=True)

    consumer = await sub.attach(
        "gw-0", "reader-a", RecordingSink(), b"0", priority_level=2, key_shared=policy
    )

    (call,) = lane.named("subscribe")
    assert call.keys == tuple(sub.keys.all)
    sticky, ranges, out_of_order, durable = 1, "0-99,200-299", 1, 1
    assert call.args == (
        *(SUB, int(KeyShared), b"0", "gw-0", "reader-a", LEASE_MS, 2, -1),
        *(sticky, ranges, out_of_order, durable),
    )
    assert sub.consumers == [consumer]
    assert (consumer.uid, consumer.name, consumer.subscription_type) == (
        "gw-0",
        "reader-a",
        KeyShared,
    )
    # Key_Shared membership changes wake the fleet (waiting entries are re-routed)
    assert lane.notified == [sub.topic.keys.notify_channel]
    assert sub.dispatcher.stop() is not None  # attach started the dispatcher


async def test_attach_of_a_non_durable_shared_consumer_sends_no_key_shared_policy(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared, durable=False)
    lane.on_script("subscribe", lambda keys, args: [0, b"OK", 0, b""])

    await sub.attach("gw-0", "reader-a", RecordingSink(), b"$")

    (call,) = lane.named("subscribe")
    assert call.args[8:] == ("", "", 0, 0)
    assert lane.notified == []  # Shared, nothing handed back
    assert sub.dispatcher.stop() is not None


async def test_attach_refused_with_consumer_busy(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Exclusive)
    lane.on_script(
        "subscribe", lambda keys, args: [1, b"Exclusive consumer is already connected", 0, b""]
    )

    with pytest.raises(ConsumerBusy, match="Exclusive consumer is already connected"):
        await sub.attach("gw-1", "second", RecordingSink(), b"$")

    assert sub.consumers == []
    assert sub.dispatcher.stop() is None  # no dispatcher for a refused consumer


async def test_failover_attach_sets_the_active_consumer_from_the_reply(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Failover)
    lane.on_script("subscribe", lambda keys, args: [0, b"OK", 0, b"gw-0"])
    first_sink, second_sink = RecordingSink(), RecordingSink()

    first = await sub.attach("gw-0", "first", first_sink, b"$")
    sub.dispatcher.stop()  # keep the background task out of this test
    second = await sub.attach("gw-1", "second", second_sink, b"$")

    assert (first.active, second.active) == (True, False)
    assert first_sink.active_changes == [True]
    assert second_sink.active_changes == [False]
    assert lane.notified == [sub.topic.keys.notify_channel] * 2  # Failover recomputes
    assert sub.dispatcher.stop() is not None


async def test_remove_releases_the_consumer_and_reports_idle_after_the_last(
    lane: FakeLane, make_subscription: Callable[..., Subscription], idle: list[Subscription]
) -> None:
    sub = make_subscription(Shared)
    lane.on_script("release_consumer", replies(3, 0))
    a, _ = add_consumer(sub, "gw-0")
    b, _ = add_consumer(sub, "gw-1")

    await sub.remove(a)
    assert a.closed
    assert sub.consumers == [b]
    assert idle == []
    assert lane.notified == [sub.topic.keys.notify_channel]  # 3 entries handed back

    await sub.remove(b)
    await sub.remove(b)  # already removed: nothing more is sent
    assert idle == [sub]
    assert [(c.keys, c.args) for c in lane.named("release_consumer")] == [
        (tuple(sub.keys.all), (SUB, "gw-0")),
        (tuple(sub.keys.all), (SUB, "gw-1")),
    ]
    assert len(lane.notified) == 1


async def test_non_durable_subscription_is_deleted_with_its_last_consumer(
    lane: FakeLane, make_subscription: Callable[..., Subscription], idle: list[Subscription]
) -> None:
    sub = make_subscription(Exclusive, durable=False)
    lane.on_script("unsubscribe", lambda keys, args: [0, b"OK"])
    reader, _ = add_consumer(sub, "gw-0")

    await sub.remove(reader)

    (call,) = lane.named("unsubscribe")
    assert (call.keys, call.args) == (tuple(sub.keys.all), (SUB, "gw-0"))
    assert lane.named("release_consumer") == []
    assert idle == [sub]


async def test_seek_detaches_every_local_consumer(
    lane: FakeLane, make_subscription: Callable[..., Subscription], idle: list[Subscription]
) -> None:
    sub = make_subscription(Shared)
    lane.on_script("seek", lambda keys, args: 2)
    (a, sink_a), (b, sink_b) = add_consumer(sub, "gw-0"), add_consumer(sub, "gw-1")

    await sub.seek(b"1700-3")

    (call,) = lane.named("seek")
    assert (call.keys, call.args) == (tuple(sub.keys.all), (SUB, b"1700-3"))
    assert a.closed and b.closed
    assert (sink_a.closed_by_gateway_calls, sink_b.closed_by_gateway_calls) == (1, 1)
    assert sub.consumers == []
    assert idle == [sub]
    assert lane.notified == [sub.topic.keys.notify_channel]


async def test_seek_on_a_missing_subscription_raises_and_keeps_consumers(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared)
    lane.on_script("seek", lambda keys, args: -1)
    consumer, sink = add_consumer(sub, "gw-0")

    with pytest.raises(SubscriptionNotFound, match=SUB):
        await sub.seek(b"0")

    assert not consumer.closed
    assert sink.closed_by_gateway_calls == 0
    assert lane.notified == []


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param([b"", [], b""], LastMessageId(None, 1, False, None), id="empty-topic"),
        pytest.param(
            [b"1700-3", [BLOB, b"blob", NUM_MESSAGES, b"5"], b"1700-1"],
            LastMessageId(MessageId(1700, 3), 5, True, MessageId(1700, 1)),
            id="batch-entry",
        ),
        pytest.param(
            [b"1700-4", [BLOB, b"blob"], b""],
            LastMessageId(MessageId(1700, 4), 1, False, None),
            id="nothing-acked",
        ),
    ],
)
async def test_last_message_id_maps_the_script_reply(
    lane: FakeLane,
    make_subscription: Callable[..., Subscription],
    raw: list[Any],
    expected: LastMessageId,
) -> None:
    sub = make_subscription(Exclusive)
    lane.on_script("last_message_id", lambda keys, args: raw)

    assert await sub.last_message_id() == expected
    (call,) = lane.named("last_message_id")
    assert (call.keys, call.args) == ((sub.topic.keys.stream,), (SUB,))


# -- Consumer ----------------------------------------------------------------------------------


@dataclass
class RecordingSubscription:
    """What a Consumer asks of its subscription (ConsumerSubscription), recorded."""

    lane: FakeLane
    type: SubscriptionType = Shared
    name: str = SUB
    topic_name: str = TOPIC
    partition: int = -1
    keys: SubscriptionKeys = field(
        default_factory=lambda: KeySchema().topic(TOPIC).subscription(SUB)
    )
    metrics: GatewayMetrics = field(default_factory=GatewayMetrics)
    meter: Meter = field(default_factory=Meter)
    events: list[str] = field(default_factory=list)
    blocked_on_unacked: bool = False

    def wake(self) -> None:
        self.events.append("wake")

    def recheck_unacked(self) -> None:
        self.events.append("recheck")

    def notify(self) -> None:
        self.events.append("notify")

    async def remove(self, consumer: Consumer) -> None:
        self.events.append(f"remove {consumer.uid}")

    async def unsubscribe(self, consumer: Consumer) -> None:
        self.events.append(f"unsubscribe {consumer.uid}")

    async def seek(self, group_position: bytes) -> None:
        self.events.append(f"seek {group_position!r}")

    async def last_message_id(self) -> LastMessageId:
        return LastMessageId(None, 1, False, None)

    def forget(self, consumer: Consumer) -> None:
        self.events.append(f"forget {consumer.uid}")

    def hand_back(self, uid: str) -> None:
        self.events.append(f"hand_back {uid}")


def consumer_on(
    lane: FakeLane, sub_type: SubscriptionType = Shared
) -> tuple[Consumer, RecordingSubscription, RecordingSink]:
    sub, sink = RecordingSubscription(lane, sub_type), RecordingSink()
    return Consumer(sub, "gw-0", "consumer-a", sink), sub, sink  # type: ignore[arg-type]


async def test_flow_adds_permits_and_wakes_the_dispatcher(lane: FakeLane) -> None:
    consumer, sub, _ = consumer_on(lane)

    consumer.flow(0)
    assert sub.events == []  # no permits, nothing to dispatch
    consumer.flow(10)
    consumer.flow(5)
    assert consumer.permits == 15
    assert sub.events == ["wake", "wake"]
    consumer.closed = True
    consumer.flow(5)
    assert sub.events == ["wake", "wake"]


async def test_flow_on_a_real_subscription_wakes_its_dispatcher(
    lane: FakeLane, make_subscription: Callable[..., Subscription]
) -> None:
    sub = make_subscription(Shared)
    lane.on_script("reap_consumers", lambda keys, args: 0)
    Backlog(3).serve(lane)
    consumer, sink = add_consumer(sub, "gw-0")
    sub.dispatcher.start()
    await lane.drain()  # its first round finds no permits; it waits to be woken
    assert lane.named("dispatch") == []

    consumer.flow(3)
    await lane.drain()

    assert [d.stream_id for d in sink.delivered] == [b"2000-0", b"2000-1", b"2000-2"]


async def test_ack_sends_xack_to_the_subscription_group(lane: FakeLane) -> None:
    consumer, sub, _ = consumer_on(lane)

    assert await consumer.ack([b"1-0", b"1-1"]) == 2

    assert [(c.name, c.args) for c in lane.calls] == [
        ("XACK", (sub.keys.stream, SUB, b"1-0", b"1-1"))
    ]


async def test_ack_clears_ack_sets_once_batch_acks_were_seen(lane: FakeLane) -> None:
    consumer, sub, _ = consumer_on(lane)
    consumer.deliver([Delivery(b"1-0", b"batch", 2, 0, ack_set=(0b110,))], 2)

    await consumer.ack([b"1-0"])

    assert [(c.name, c.args) for c in lane.calls] == [
        ("HDEL", (sub.keys.ack_sets, b"1-0")),
        ("XACK", (sub.keys.stream, SUB, b"1-0")),
    ]


@pytest.mark.parametrize("sub_type", [Shared, KeyShared])
async def test_cumulative_ack_is_not_allowed_on_shared_types(
    lane: FakeLane, sub_type: SubscriptionType
) -> None:
    consumer, _, _ = consumer_on(lane, sub_type)

    with pytest.raises(NotAllowed, match=f"not supported for {sub_type.pulsar_name}"):
        consumer.ack_cumulative(b"1-5")

    assert lane.calls == []


@pytest.mark.parametrize("sub_type", [Exclusive, Failover])
async def test_cumulative_ack_calls_its_script(lane: FakeLane, sub_type: SubscriptionType) -> None:
    consumer, sub, _ = consumer_on(lane, sub_type)
    lane.on_script("cumulative_ack", lambda keys, args: 4)

    assert await consumer.ack_cumulative(b"1-5") == 4

    (call,) = lane.named("cumulative_ack")
    assert (call.keys, call.args) == ((sub.keys.stream, sub.keys.ack_sets), (SUB, b"1-5"))


async def test_ack_batch_indexes_encodes_the_ack_sets(lane: FakeLane) -> None:
    consumer, sub, _ = consumer_on(lane)
    lane.on_script("ack_batch_index", lambda keys, args: 1)

    acked = await consumer.ack_batch_indexes([(b"1-0", [0b101]), (b"1-1", [0]), (b"1-2", [0, 1])])

    assert acked == 1
    (call,) = lane.named("ack_batch_index")
    assert call.keys == (sub.keys.stream, sub.keys.ack_sets)
    assert call.args == (SUB, b"1-0", "101", b"1-1", "0", b"1-2", "0" * 64 + "1")
    assert consumer.batch_acks


async def test_redeliver_counts_parked_entries_and_wakes_the_fleet(lane: FakeLane) -> None:
    consumer, sub, _ = consumer_on(lane)
    lane.on_script("redeliver", lambda keys, args: 2)

    assert await consumer.redeliver([b"1-0", b"1-1"]) == 2
    await lane.drain()

    (call,) = lane.named("redeliver")
    assert (call.keys, call.args) == (tuple(sub.keys.all), (SUB, "gw-0", b"1-0", b"1-1"))
    assert (consumer.meter.redelivered, sub.meter.redelivered) == (2, 2)
    assert sub.events == ["notify", "wake"]


async def test_redeliver_of_nothing_parked_counts_nothing(lane: FakeLane) -> None:
    consumer, sub, _ = consumer_on(lane, Exclusive)
    lane.on_script("redeliver", lambda keys, args: 0)

    assert await consumer.redeliver(None) == 0
    await lane.drain()

    assert lane.named("redeliver")[0].args == (SUB, "gw-0")  # every unacked entry
    assert (consumer.meter.redelivered, sub.meter.redelivered) == (0, 0)
    assert sub.events == []


@pytest.mark.parametrize(
    ("sub_type", "script", "reported"),
    [
        (Exclusive, "dispatch", 0),
        (Failover, "dispatch", 0),
        (Shared, "dispatch", 2),
        (KeyShared, "dispatch_key_shared", 2),
    ],
)
async def test_redelivery_count_is_reported_only_on_shared_types(
    lane: FakeLane,
    make_subscription: Callable[..., Subscription],
    sub_type: SubscriptionType,
    script: str,
    reported: int,
) -> None:
    sub = make_subscription(sub_type)
    lane.on_script(script, replies(dispatched(entry(b"2000-0", redeliveries=2)), dispatched()))
    consumer, sink = add_consumer(sub, "gw-0", permits=1)

    await sub.dispatcher.run_once()

    assert consumer.reports_redelivery_count is (reported > 0)
    assert [d.redelivery_count for d in sink.delivered] == [reported]


async def test_delivery_takes_permits_and_counts_messages(lane: FakeLane) -> None:
    consumer, sub, sink = consumer_on(lane)
    consumer.flow(10)

    consumer.deliver([Delivery(b"1-0", b"abc", 3, 0), Delivery(b"1-1", b"de", 1, 0)], 4)

    assert consumer.permits == 6
    assert [d.stream_id for d in sink.delivered] == [b"1-0", b"1-1"]
    assert sub.metrics.out_messages == 4
    assert (consumer.meter.messages, consumer.meter.bytes) == (4, 5)
    assert (sub.meter.messages, sub.meter.bytes) == (4, 5)


async def test_failed_ack_abandons_the_consumer(lane: FakeLane) -> None:
    consumer, sub, sink = consumer_on(lane)
    lane.fail_next("XACK", StorageError("Redis connection lost"))

    with pytest.raises(StorageError):
        await consumer.ack([b"1-0"])
    await lane.drain()

    assert consumer.closed
    assert sink.closed_by_gateway_calls == 1
    assert sub.events == ["forget gw-0", "hand_back gw-0"]


async def test_ack_refused_at_shutdown_does_not_abandon_the_consumer(lane: FakeLane) -> None:
    consumer, sub, sink = consumer_on(lane)
    lane.fail_next("XACK", ServiceNotReady("the gateway is shutting down"))

    with pytest.raises(ServiceNotReady):
        await consumer.ack([b"1-0"])
    await lane.drain()

    assert not consumer.closed
    assert sink.closed_by_gateway_calls == 0
    assert sub.events == []
