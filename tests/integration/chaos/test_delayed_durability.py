"""Delayed delivery survives crashes (docs/delayed_delivery.md "Durability"): killing gateways
(SIGKILL) and restarting Redis with AOF at any moment loses no scheduled message and delivers no
acknowledged message again, with 100,000 scheduled messages outstanding; and no message is ever
delivered before its time.

Both tests schedule ``COUNT`` messages on one topic (batching off: the client forces it for
delayed messages), each with a unique index as its payload and a deliver-at time spread over
a window of several seconds in an order unrelated to the stream's, the first one due after
production has ended, so all of them are outstanding at once (checked with ``msgDelayed``
of the topic stats and the subscription's delayed index). Consumers of one Shared
subscription on every gateway receive and acknowledge in threads while the messages fall
due; once deliveries flow, something is killed.

Counts asserted to be zero (the gateways, Redis and the client share this machine's clock):

* **lost**: messages published (their send receipt came back, so Redis stored them) that
  were never delivered to any consumer. When some are, the failure says where they are in
  Redis now (pending at which consumer, still scheduled, ...).
* **early**: deliveries whose receive time (ms, taken when ``receive`` returned) is before
  the message's deliver-at time minus 1 ms (rounding). The receive time is at or after the
  time the client got the message; receive queues are small (``RECEIVER_QUEUE``) and
  drained as fast as messages come, so an early delivery cannot hide behind it for long.
* **duplicates**: deliveries of a message after its acknowledgement was durable. "Durable"
  comes from a snapshot of Redis taken at a moment when the acks it holds can be trusted:
  the acknowledged set is every published entry at or before the group's cursor
  (``last-delivered-id`` in ``XINFO GROUPS``) and not in its pending list (``XPENDING``),
  both read in one ``MULTI``. A delivery of a message of that set whose ``receive`` returned
  after the snapshot is a duplicate. Messages delivered but not durably acknowledged when
  something died may legitimately come again (at-least-once: the client groups acks for up
  to 100 ms, and a killed gateway's unacked messages are handed over); those are reported
  as "redelivered (allowed)", not failed.

The gateway test snapshots right after the SIGKILL (Redis keeps running, so every ack it
holds is durable) and also checks that every message delivered twice was pending at one of
the killed gateway's consumers at that moment. The Redis test runs its own ``redis-server``
(``appendonly yes``, ``appendfsync always``), kills it ``len(REDIS_KILLS)`` times during the
deliveries and restarts it on the same port and directory; around each kill it snapshots
just before and right after the restart: the first must be a subset of the second (no
durable ack lost), and duplicates are counted against all of them. Production ends before
the first kill, so a producer's resend after a failed send cannot blur the count of
published messages; the kills land mid-delivery, which is what the issue is about.
Acknowledgements a client sends while Redis is down are lost (the client gets no ack
receipt); those messages stay pending at their live consumer, delivered, and are reported.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pulsar
import pytest
import redis

from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage.keys import DELAYED_CONSUMER, PARKED_CONSUMER, KeySchema
from tests.chaos.processes import AofRedis
from tests.conftest import TIMEOUT, redis_server_binary, wait_for

Shared = pulsar.ConsumerType.Shared
EARLIEST = pulsar.InitialPosition.Earliest

#: Scheduled messages outstanding at once (the issue asks for at least 100,000).
COUNT = 100_000
#: Deliver-at times are spread over this many ms (10k messages fall due per second).
GATEWAY_WINDOW_MS = 10_000
#: The Redis test's window is longer: 5k due per second, which the consumers take as fast
#: as it comes, so dispatch runs all the time and a kill lands amid dispatch scripts, not
#: only acknowledgements.
REDIS_WINDOW_MS = 20_000
#: Lease of a killed gateway's consumers (s): handover within a few seconds.
LEASE = 1.5
SUB = "durable"
#: Prefetch of each consumer: small, so receive time stays close to arrival time.
RECEIVER_QUEUE = 200
#: Consumers per gateway, each drained by its own thread.
CONSUMERS_PER_GATEWAY = 2
#: The gateway is killed once this share of the messages was delivered.
GATEWAY_KILL_AT = 0.3
#: Redis is killed (and restarted) once each of these shares was delivered.
REDIS_KILLS = (0.15, 0.3, 0.45, 0.6, 0.75)
#: After the last expected delivery, how long a late duplicate still gets to show up (s).
QUIET_S = 1.5
#: Messages sent to measure this machine's send rate before production.
CALIBRATION = 5_000


def entry_key(entry_id: str) -> tuple[int, int]:
    ms, seq = entry_id.split("-")
    return int(ms), int(seq)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def keys_of(topic: str) -> Any:
    return KeySchema().topic(parse_topic_name(topic))


# -- production -------------------------------------------------------------------------------


@dataclass
class Published:
    """Messages with a send receipt: index -> stream id, and every index's deliver-at."""

    deliver_at: list[int]
    window_ms: int
    entry_ids: dict[int, str] = field(default_factory=dict)
    failures: list[Any] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0

    @property
    def seconds(self) -> float:
        return round(self.ended - self.started, 1)


def scheduled_producer(client: Any, topic: str) -> Any:
    return client.create_producer(
        topic, batching_enabled=False, max_pending_messages=5000, block_if_queue_full=True
    )


def first_due_after_production(client: Any, topic: str) -> int:
    """When the first message may fall due: after production surely ended. Production's
    length is estimated from the send rate of CALIBRATION messages on a topic nobody
    subscribes to, times 2.5 (production also schedules on the subscription) plus 1.5 s."""
    producer = scheduled_producer(client, f"{topic}-calibration")
    far = now_ms() + 3_600_000
    began = time.monotonic()
    for i in range(CALIBRATION):
        producer.send_async(str(i).encode(), lambda *_: None, deliver_at=far)
    producer.flush()
    seconds = time.monotonic() - began
    producer.close()
    return now_ms() + 1_500 + int(2.5 * seconds * COUNT / CALIBRATION * 1000)


def produce_scheduled(client: Any, topic: str, first_due_ms: int, window_ms: int) -> Published:
    """COUNT messages, payload = index, deliver-at spread over ``window_ms`` from
    ``first_due_ms`` in an order unrelated to send order, sent asynchronously and flushed."""
    step = 7919  # a prime not dividing COUNT: index -> slot is a permutation
    published = Published(
        deliver_at=[first_due_ms + (i * step % COUNT) * window_ms // COUNT for i in range(COUNT)],
        window_ms=window_ms,
    )
    producer = scheduled_producer(client, topic)

    def receipt(index: int) -> Callable[[Any, Any], None]:
        def done(result: Any, msg_id: Any) -> None:
            if result == pulsar.Result.Ok:
                published.entry_ids[index] = f"{msg_id.ledger_id()}-{msg_id.entry_id()}"
            else:
                published.failures.append((index, result))

        return done

    published.started = time.monotonic()
    for i in range(COUNT):
        producer.send_async(str(i).encode(), receipt(i), deliver_at=published.deliver_at[i])
    producer.flush()
    published.ended = time.monotonic()
    producer.close()
    return published


def produce_all_outstanding(
    client: Any,
    topic: str,
    window_ms: int,
    r: redis.Redis,
    stats_http_port: int,
    log: list[Delivery],
) -> tuple[Published, int]:
    """Produce, then check every message is scheduled at once, before any is due.
    Returns the published messages and the subscription's ``msgDelayed`` then."""
    first_due = first_due_after_production(client, topic)
    published = produce_scheduled(client, topic, first_due, window_ms)
    assert not published.failures
    assert len(published.entry_ids) == COUNT
    wait_for(lambda: scheduled_count(r, topic) == COUNT, timeout=3 * TIMEOUT)
    outstanding = msg_delayed(stats_http_port, topic)
    assert now_ms() < min(published.deliver_at), "production outlasted its estimate"
    assert outstanding == COUNT
    assert not log
    return published, outstanding


# -- consumption ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    index: int
    received_ns: int  # time.time_ns() when receive() returned
    redelivery_count: int
    consumer: str


class Receiver(threading.Thread):
    """Receives and acknowledges every message of one consumer until stopped."""

    def __init__(self, consumer: Any, name: str, log: list[Delivery], errors: list[str]) -> None:
        super().__init__(name=f"receiver {name}", daemon=True)
        self.consumer = consumer
        self.consumer_name = name
        self.log = log
        self.errors = errors
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                msg = self.consumer.receive(timeout_millis=100)
            except pulsar.Timeout:
                continue
            except Exception as exc:  # recorded; the test asserts there is none
                self.errors.append(f"{self.consumer_name} receive: {exc!r}")
                time.sleep(0.1)
                continue
            received = time.time_ns()
            self.log.append(
                Delivery(int(msg.data()), received, msg.redelivery_count(), self.consumer_name)
            )
            try:
                self.consumer.acknowledge(msg)
            except Exception as exc:
                self.errors.append(f"{self.consumer_name} ack: {exc!r}")

    def stop(self) -> None:
        self.stopping.set()
        self.join(TIMEOUT)


def start_receivers(
    clients: dict[str, Any], topic: str, log: list[Delivery], errors: list[str]
) -> dict[str, list[Receiver]]:
    """CONSUMERS_PER_GATEWAY consumers per client (one client per gateway, by tag), each with
    its receiver thread; consumer names are ``<tag>-<n>`` (found again in Redis)."""
    receivers: dict[str, list[Receiver]] = {}
    for tag, client in clients.items():
        receivers[tag] = []
        for n in range(CONSUMERS_PER_GATEWAY):
            name = f"{tag}-{n}"
            consumer = client.subscribe(
                topic,
                SUB,
                consumer_type=Shared,
                consumer_name=name,
                receiver_queue_size=RECEIVER_QUEUE,
                initial_position=EARLIEST,
            )
            receivers[tag].append(Receiver(consumer, name, log, errors))
    for group in receivers.values():
        for receiver in group:
            receiver.start()
    return receivers


def stop_all(receivers: list[Receiver]) -> None:
    for receiver in receivers:
        receiver.stopping.set()
    for receiver in receivers:
        receiver.stop()


def wait_delivered(published: Published, log: list[Delivery], count: float) -> None:
    """Until ``count`` deliveries were received (the messages are falling due)."""
    wait_for(lambda: len(log) >= count, timeout=published.window_ms / 1000 + 3 * TIMEOUT)


def wait_all_delivered(published: Published, log: list[Delivery]) -> None:
    """Until every published message was delivered at least once, or the time is up (the
    verdict then counts the lost ones)."""
    want = set(published.entry_ids)
    deadline = time.monotonic() + published.window_ms / 1000 + 2 * TIMEOUT
    while time.monotonic() < deadline and not want <= {d.index for d in list(log)}:
        time.sleep(0.25)


# -- Redis views ------------------------------------------------------------------------------


@dataclass
class AckSnapshot:
    """The subscription's durably acknowledged entries at ``taken_ns``."""

    taken_ns: int
    cursor: str
    acked: set[str]
    #: owner -> its pending entry ids; owner = the client's consumer name, else the uid or
    #: reserved name (``~delayed``, ``~parked``)
    pending_by: dict[str, set[str]]


def ack_snapshot(r: redis.Redis, topic: str, published: Published) -> AckSnapshot:
    keys = keys_of(topic)
    pipe = r.pipeline(transaction=True)
    pipe.xinfo_groups(keys.stream)
    pipe.xpending_range(keys.stream, SUB, "-", "+", 10 * COUNT)
    pipe.hgetall(keys.consumer_info(SUB))
    groups, pending, info = pipe.execute()
    taken = time.time_ns()
    (group,) = [g for g in groups if g["name"] == SUB.encode()]
    cursor = group["last-delivered-id"].decode()
    # consumer uid -> the client's consumer name (last field of "<prio> <join> <durable> <name>")
    names = {uid.decode(): value.decode().split(" ", 3)[3] for uid, value in info.items()}
    pending_by: dict[str, set[str]] = {}
    for row in pending:
        owner = row["consumer"].decode()
        pending_by.setdefault(names.get(owner, owner), set()).add(row["message_id"].decode())
    unacked = set().union(*pending_by.values())
    upto = entry_key(cursor)
    acked = {
        eid for eid in published.entry_ids.values() if entry_key(eid) <= upto and eid not in unacked
    }
    return AckSnapshot(taken, cursor, acked, pending_by)


def scheduled_count(r: redis.Redis, topic: str) -> int:
    return int(r.zcard(keys_of(topic).delayed(SUB)))


def pending_summary(r: redis.Redis, topic: str) -> dict[str, int]:
    """Pending entries per owner (uid or reserved name)."""
    summary = r.xpending(keys_of(topic).stream, SUB)
    return {c["name"].decode(): int(c["pending"]) for c in summary["consumers"]}


def msg_delayed(http_port: int, topic: str) -> int:
    """``msgDelayed`` of the subscription from the topic stats endpoint."""

    async def get() -> Any:
        url = f"http://127.0.0.1:{http_port}/admin/v2/persistent/public/default/{topic}/stats"
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            assert resp.status == 200, await resp.text()
            return await resp.json()

    return int(asyncio.run(get())["subscriptions"][SUB]["msgDelayed"])


def where_lost(snapshot: AckSnapshot, published: Published, lost: set[int]) -> dict[str, int]:
    """Where lost messages are in ``snapshot``: their pending owner, else "acked" or
    "unread" (past the cursor)."""
    owner_of = {eid: owner for owner, ids in snapshot.pending_by.items() for eid in ids}
    places: Counter[str] = Counter()
    for i in lost:
        eid = published.entry_ids[i]
        places[owner_of.get(eid) or ("acked" if eid in snapshot.acked else "unread")] += 1
    return dict(places)


# -- the verdict ------------------------------------------------------------------------------


@dataclass
class Verdict:
    lost: set[int]
    early: list[Delivery]
    duplicates: list[Delivery]
    delivered_more_than_once: set[int]


def judge(published: Published, log: list[Delivery], snapshots: list[AckSnapshot]) -> Verdict:
    deliveries = list(log)
    lost = set(published.entry_ids) - {d.index for d in deliveries}
    early = [
        d for d in deliveries if d.received_ns // 1_000_000 < published.deliver_at[d.index] - 1
    ]
    duplicates = [
        d
        for d in deliveries
        if any(
            published.entry_ids[d.index] in s.acked and d.received_ns > s.taken_ns
            for s in snapshots
        )
    ]
    counts = Counter(d.index for d in deliveries)
    return Verdict(lost, early, duplicates, {i for i, n in counts.items() if n > 1})


def report(name: str, **figures: Any) -> None:
    print(f"\n[{name}] " + ", ".join(f"{k}={v}" for k, v in figures.items()))


# -- gateway SIGKILL --------------------------------------------------------------------------


def test_gateway_sigkill_mid_delivery_loses_and_duplicates_nothing(
    gateway_process: Any, client_factory: Any, redis_clean: Any, redis_url: str, topic: str
) -> None:
    started = time.monotonic()
    gateways = [
        gateway_process("--redis-url", redis_url, "--consumer-lease-seconds", str(LEASE))
        for _ in range(3)
    ]
    for gw in gateways:
        gw.wait_ready()
    doomed, survivor_a, survivor_b = gateways
    clients = {
        # Its reconnect attempts after the kill log errors: expected. (No Python logger to
        # hush them: the C++ client's logger is process-wide and a Python one slows every
        # later client of the session.)
        "doomed": client_factory(doomed.url),
        "a": client_factory(survivor_a.url),
        "b": client_factory(survivor_b.url),
    }
    log: list[Delivery] = []
    errors: list[str] = []
    receivers = start_receivers(clients, topic, log, errors)
    published, outstanding = produce_all_outstanding(
        client_factory(survivor_a.url),
        topic,
        GATEWAY_WINDOW_MS,
        redis_clean,
        survivor_b.http_port,
        log,
    )

    wait_delivered(published, log, COUNT * GATEWAY_KILL_AT)
    stop_all(receivers["doomed"])  # what its client still holds is never acked
    doomed.stop(sig=signal.SIGKILL)
    killed_at = time.monotonic()
    # Redis keeps running: every ack it holds now is durable.
    at_kill = ack_snapshot(redis_clean, topic, published)
    delivered_at_kill = len(log)

    wait_all_delivered(published, log)
    time.sleep(QUIET_S)
    stop_all(receivers["a"] + receivers["b"])
    verdict = judge(published, log, [at_kill])
    held_by_doomed = set().union(
        *(ids for owner, ids in at_kill.pending_by.items() if owner.startswith("doomed-"))
    )
    report(
        "gateway SIGKILL",
        scheduled_outstanding=outstanding,
        produce_s=published.seconds,
        deliveries=len(log),
        delivered_at_kill=delivered_at_kill,
        acked_at_kill=len(at_kill.acked),
        held_by_killed_gateway=len(held_by_doomed),
        redelivered_allowed=len(verdict.delivered_more_than_once),
        lost=len(verdict.lost),
        early=len(verdict.early),
        duplicates=len(verdict.duplicates),
        after_kill_s=round(time.monotonic() - killed_at, 1),
        total_s=round(time.monotonic() - started, 1),
    )
    assert not [e for e in errors if not e.startswith("doomed")], errors[:5]
    assert len(verdict.lost) == 0, (
        f"lost: {sorted(verdict.lost)[:20]}, now at "
        f"{where_lost(ack_snapshot(redis_clean, topic, published), published, verdict.lost)}"
    )
    assert len(verdict.early) == 0, f"early: {verdict.early[:5]}"
    assert len(verdict.duplicates) == 0, f"duplicates: {verdict.duplicates[:5]}"
    # Only what the killed gateway's consumers held (unacked) may come again.
    again = {published.entry_ids[i] for i in verdict.delivered_more_than_once}
    assert again <= held_by_doomed, f"{len(again - held_by_doomed)} redelivered from elsewhere"
    # Nothing is left scheduled or unacknowledged.
    assert scheduled_count(redis_clean, topic) == 0
    wait_for(lambda: not pending_summary(redis_clean, topic))


# -- Redis SIGKILL and restart with AOF -------------------------------------------------------


@pytest.fixture
def aof_redis() -> Iterator[AofRedis]:
    server = AofRedis(redis_server_binary())
    server.start()
    try:
        wait_for(server.ready)
        yield server
    finally:
        server.stop()


def snapshot_when_up(r: redis.Redis, topic: str, published: Published) -> AckSnapshot:
    """The first snapshot Redis answers after a restart (it refuses while loading the AOF)."""

    def attempt() -> AckSnapshot | None:
        try:
            return ack_snapshot(r, topic, published)
        except (redis.ConnectionError, redis.BusyLoadingError):
            return None

    snapshot: AckSnapshot = wait_for(attempt, timeout=3 * TIMEOUT, interval=0.01)
    return snapshot


@dataclass
class Outage:
    before: AckSnapshot
    after: AckSnapshot
    killed_ns: int
    up_ns: int


def test_redis_sigkill_and_aof_restart_mid_delivery_loses_and_duplicates_nothing(
    gateway_process: Any, client_factory: Any, aof_redis: AofRedis, topic: str
) -> None:
    started = time.monotonic()
    gateways = [gateway_process("--redis-url", aof_redis.url) for _ in range(2)]
    for gw in gateways:
        gw.wait_ready()
    clients = {f"g{n}": client_factory(gw.url) for n, gw in enumerate(gateways)}
    log: list[Delivery] = []
    errors: list[str] = []
    receivers = start_receivers(clients, topic, log, errors)
    r = aof_redis.client()
    published, outstanding = produce_all_outstanding(
        client_factory(gateways[0].url), topic, REDIS_WINDOW_MS, r, gateways[1].http_port, log
    )

    outages: list[Outage] = []
    delivered_at_kills = []
    for share in REDIS_KILLS:
        wait_delivered(published, log, COUNT * share)
        before = ack_snapshot(r, topic, published)
        aof_redis.kill()
        killed_ns = time.time_ns()
        delivered_at_kills.append(len(log))
        aof_redis.start()
        after = snapshot_when_up(r, topic, published)
        outages.append(Outage(before, after, killed_ns, after.taken_ns))

    wait_all_delivered(published, log)
    time.sleep(QUIET_S)
    stop_all([receiver for group in receivers.values() for receiver in group])
    snapshots = [s for o in outages for s in (o.before, o.after)]
    verdict = judge(published, log, snapshots)
    acks_lost_by_restarts = [len(o.before.acked - o.after.acked) for o in outages]
    final = ack_snapshot(r, topic, published)
    # Still pending at a live consumer though delivered: its ack was sent while Redis was
    # down (or loading) or in flight at a kill. Say when they were last received.
    last_received = {d.index: d.received_ns for d in log}
    index_of = {eid: i for i, eid in published.entry_ids.items()}
    unacked_left = [
        index_of[eid]
        for owner, ids in final.pending_by.items()
        if not owner.startswith("~")
        for eid in ids
        if index_of[eid] in last_received
    ]
    near_outage = [
        i
        for i in unacked_left
        if any(
            o.killed_ns - 500_000_000 <= last_received[i] <= o.up_ns + 1_000_000_000
            for o in outages
        )
    ]
    report(
        "Redis SIGKILL + AOF restart",
        scheduled_outstanding=outstanding,
        produce_s=published.seconds,
        deliveries=len(log),
        delivered_at_kills=delivered_at_kills,
        acked_before_kills=[len(o.before.acked) for o in outages],
        acked_after_restarts=[len(o.after.acked) for o in outages],
        redis_down_s=[round((o.up_ns - o.killed_ns) / 1e9, 2) for o in outages],
        redelivered_allowed=len(verdict.delivered_more_than_once),
        delivered_unacked_left=len(unacked_left),
        of_which_received_near_an_outage=len(near_outage),
        lost=len(verdict.lost),
        early=len(verdict.early),
        duplicates=len(verdict.duplicates),
        total_s=round(time.monotonic() - started, 1),
    )
    still_scheduled = scheduled_count(r, topic)
    r.close()
    assert not errors, errors[:5]
    assert acks_lost_by_restarts == [0] * len(outages), "durable acks lost by a restart"
    assert len(verdict.lost) == 0, (
        f"lost: {sorted(verdict.lost)[:20]}, now at {where_lost(final, published, verdict.lost)}"
    )
    assert len(verdict.early) == 0, f"early: {verdict.early[:5]}"
    assert len(verdict.duplicates) == 0, f"duplicates: {verdict.duplicates[:5]}"
    # Nothing is left scheduled or waiting for redelivery.
    assert still_scheduled == 0
    assert not {DELAYED_CONSUMER.decode(), PARKED_CONSUMER.decode()} & set(final.pending_by)
