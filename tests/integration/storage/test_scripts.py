"""The Lua scripts and the per-tick storage lane, against a real redis-server."""

from __future__ import annotations

import asyncio
import gc

import pytest
from redis.asyncio import Redis

from pulsar_gateway.core.consuming.native_read import read_natively
from pulsar_gateway.core.errors import ConsumerBusy, StorageError
from pulsar_gateway.core.model.entry import BLOB, DELIVER_AT, KEY_HASH, NUM_MESSAGES
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.storage import lane as lane_module
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import acks, subscriptions
from pulsar_gateway.core.storage.scripts import dispatch as scripts_dispatch
from pulsar_gateway.core.storage.scripts.dispatch import DispatchReply, DispatchStatus
from pulsar_gateway.core.storage.scripts.subscriptions import SubscribeReply

KEYS = KeySchema("t").topic("persistent://public/default/scripts")
SUB = "sub"
LEASE = 60_000


SUB_KEYS = KEYS.subscription(SUB)


def subscribe(
    storage: Lane,
    uid: str,
    sub_type: SubscriptionType = SubscriptionType.SHARED,
    position: bytes = b"0",
) -> asyncio.Future[SubscribeReply]:
    return subscriptions.subscribe(
        storage,
        SUB_KEYS,
        subscription=SUB,
        subscription_type=sub_type,
        start_position=position,
        consumer=uid,
        consumer_name=f"name-{uid}",
        lease_ms=LEASE,
        priority_level=0,
        partition=-1,
        key_shared=None,
        durable=True,
    )


def dispatch(
    storage: Lane,
    uid: str,
    permits: int,
    per_entry: float = 1,
    sub_type: SubscriptionType = SubscriptionType.SHARED,
    *,
    native: bool = False,
    unacked: scripts_dispatch.UnackedArgs = scripts_dispatch.NO_UNACKED_LIMITS,
) -> asyncio.Future[DispatchReply]:
    call = read_natively if native else scripts_dispatch.dispatch
    return call(
        storage,
        SUB_KEYS,
        subscription=SUB,
        consumer=uid,
        permits=permits,
        messages_per_entry=per_entry,
        lease_ms=LEASE,
        subscription_type=sub_type,
        partition=-1,
        unacked_limits=unacked,
    )


async def append(storage: Lane, count: int, batch: int = 1) -> list[bytes]:
    fields: list[bytes | int] = [BLOB, b"blob"]
    if batch > 1:
        fields += [NUM_MESSAGES, batch]
    return list(
        await asyncio.gather(
            *(storage.call("XADD", KEYS.stream, "*", *fields) for _ in range(count))
        )
    )


async def test_commands_of_one_tick_share_a_pipeline(storage):
    before = storage.pipelines_sent
    replies = await asyncio.gather(*(storage.call("INCR", "t:counter") for _ in range(500)))
    assert sorted(replies) == list(range(1, 501))
    assert storage.pipelines_sent - before <= 2


async def test_replies_are_read_in_order_across_socket_reads(storage, monkeypatch):
    """A pipeline whose replies span many socket reads (100 KB values) and include error
    replies: each command gets its own reply, an error as a StorageError, from hiredis's
    reader directly (redis-py's per-reply path is not taken)."""

    async def not_this_path(conn):
        raise AssertionError("the per-reply read_response path was taken")

    monkeypatch.setattr(lane_module, "_read_one", not_this_path)
    big = [bytes([65 + i % 26]) * 100_000 for i in range(40)]
    await asyncio.gather(*(storage.call("SET", f"{{t}}:big:{i}", v) for i, v in enumerate(big)))
    calls = []
    for i in range(40):
        calls.append(storage.call("GET", f"{{t}}:big:{i}"))
        calls.append(storage.call("LPUSH", f"{{t}}:big:{i}", "x"))  # WRONGTYPE
    replies = await asyncio.gather(*calls, return_exceptions=True)
    assert replies[0::2] == big
    assert all(isinstance(r, StorageError) and "WRONGTYPE" in str(r) for r in replies[1::2])


async def test_cold_script_cache_is_reloaded(storage):
    await storage.redis.script_flush()
    reply = await subscribe(storage, "g-1")
    assert reply.handed_back == 0


async def test_storage_error_when_redis_is_unreachable():
    client = Redis(host="127.0.0.1", port=1, protocol=2, socket_connect_timeout=0.5)
    storage = Lane(client)
    with pytest.raises(StorageError):
        await storage.call("PING")
    await client.aclose()


async def test_exclusive_rule_and_type_clash(storage):
    await subscribe(storage, "g-1", sub_type=SubscriptionType.EXCLUSIVE)
    with pytest.raises(ConsumerBusy):
        await subscribe(storage, "g-2", sub_type=SubscriptionType.EXCLUSIVE)
    with pytest.raises(ConsumerBusy):
        await subscribe(storage, "g-3", sub_type=SubscriptionType.SHARED)


async def test_dispatch_honours_permits_in_messages(storage):
    await subscribe(storage, "g-1")
    ids = await append(storage, 5, batch=10)  # 5 entries of 10 messages
    reply = await dispatch(storage, "g-1", permits=25, per_entry=1)
    got = reply.deliveries
    # entries are sent while a permit remains: 10 + 10 + 10 (the last overshoots)
    assert [d.stream_id for d in got] == ids[:3]
    assert {d.num_messages for d in got} == {10}
    # the entries read beyond the permits were un-read: the next call starts at entry 4
    assert [d.stream_id for d in (await dispatch(storage, "g-1", 100)).deliveries] == ids[3:]
    pending = await storage.call("XPENDING", KEYS.stream, SUB)
    assert pending[0] == 5


async def test_parked_entries_come_first_with_their_count(storage):
    await subscribe(storage, "g-1")
    await subscribe(storage, "g-2")
    ids = await append(storage, 4)
    first = (await dispatch(storage, "g-1", 2)).deliveries
    assert [d.stream_id for d in first] == ids[:2]
    # g-2 cannot redeliver g-1's entries; g-1 can
    moved = await acks.redeliver(
        storage, SUB_KEYS, subscription=SUB, consumer="g-2", stream_ids=[ids[0]]
    )
    assert moved == 0
    moved = await acks.redeliver(
        storage, SUB_KEYS, subscription=SUB, consumer="g-1", stream_ids=[ids[1]]
    )
    assert moved == 1
    again = (await dispatch(storage, "g-2", 10)).deliveries
    assert [d.stream_id for d in again] == [ids[1], ids[2], ids[3]]
    assert [d.redelivery_count for d in again] == [1, 0, 0]


async def test_release_and_reap_hand_entries_back(storage):
    await subscribe(storage, "g-1")
    await subscribe(storage, "g-2")
    ids = await append(storage, 3)
    await dispatch(storage, "g-1", 3)
    handed = await subscriptions.release_consumer(
        storage, SUB_KEYS, subscription=SUB, consumer="g-1"
    )
    assert handed == 3
    assert (await dispatch(storage, "g-1", 1)).status is DispatchStatus.CONSUMER_GONE
    got = (await dispatch(storage, "g-2", 10)).deliveries
    assert [(d.stream_id, d.redelivery_count) for d in got] == [(i, 1) for i in ids]
    # g-2's lease expires: the next subscribe reaps it and its entries go back
    await storage.call("ZADD", KEYS.consumers(SUB), 1, "g-2")
    reply = await subscribe(storage, "g-3")
    assert reply.handed_back == 3
    got = (await dispatch(storage, "g-3", 10)).deliveries
    assert [d.redelivery_count for d in got] == [2, 2, 2]


async def test_key_shared_newcomer_never_overtakes_entries_waiting_for_the_old_owner(storage):
    """Entries read for a consumer and waiting for it stay its own when their key moves to a
    consumer that joins: the old owner may still hold earlier messages of the key (the
    chaos run saw a newcomer get them first after a Redis restart). The newcomer gets the
    key's messages once everything before its join is acknowledged."""
    from pulsar_gateway.core.model.key_shared import KeySharedPolicy

    def join(uid: str) -> asyncio.Future[SubscribeReply]:
        return subscriptions.subscribe(
            storage, SUB_KEYS, subscription=SUB, subscription_type=SubscriptionType.KEY_SHARED,
            start_position=b"0", consumer=uid, consumer_name=f"name-{uid}", lease_ms=LEASE,
            priority_level=0, partition=-1, key_shared=KeySharedPolicy(), durable=True,
        )  # fmt: skip

    def take(uid: str, permits: int) -> asyncio.Future[DispatchReply]:
        return scripts_dispatch.dispatch_key_shared(
            storage, SUB_KEYS, subscription=SUB, consumer=uid, permits=permits,
            messages_per_entry=1, lease_ms=LEASE,
        )  # fmt: skip

    async def append_keyed(count: int) -> list[bytes]:
        fields = [BLOB, b"blob", KEY_HASH, 100]
        return [await storage.call("XADD", KEYS.stream, "*", *fields) for _ in range(count)]

    await join("g-1")
    await join("g-2")  # g-2 takes hashes 0..32767, g-1 keeps the rest
    ids = await append_keyed(3)
    assert [d.stream_id for d in (await take("g-2", 1)).deliveries] == ids[:1]
    assert (await take("g-1", 10)).deliveries == []  # reads ids 1, 2: they wait for g-2
    await join("g-3")  # takes 0..16383: hash 100 is g-3's now
    assert (await take("g-3", 10)).deliveries == []
    assert [d.stream_id for d in (await take("g-2", 10)).deliveries] == ids[1:]
    await storage.call("XACK", KEYS.stream, SUB, *ids)
    later = await append_keyed(1)
    assert [d.stream_id for d in (await take("g-3", 10)).deliveries] == later


async def test_failover_newcomer_keeps_the_earliest_subscriber_active(storage):
    """On a non-partitioned topic the earliest subscriber stays active when a consumer whose
    name sorts first subscribes: nothing the active one holds is handed back (subscribe
    once took the priority level for the partition index, picked the newcomer by name and
    re-sent the active consumer's unacked entries; found by the chaos run)."""
    failover = SubscriptionType.FAILOVER
    first = await subscribe(storage, "g-2", failover)
    ids = await append(storage, 3)
    assert len((await dispatch(storage, "g-2", 2, sub_type=failover)).deliveries) == 2
    newcomer = await subscribe(storage, "g-1", failover)  # "name-g-1" < "name-g-2"
    assert (first.active, newcomer.active, newcomer.handed_back) == ("g-2", "g-2", 0)
    got = (await dispatch(storage, "g-2", 10, sub_type=failover)).deliveries
    assert [d.stream_id for d in got] == [ids[2]]


async def test_failover_successor_gets_a_dead_active_consumers_entries_first(storage):
    """The active Failover consumer's gateway died: once its lease ran out, the next
    consumer's first dispatch releases it and gets its unacked entries, in order, before
    any later entry, without waiting for a reaper's round (found by the chaos run)."""
    failover = SubscriptionType.FAILOVER
    await subscribe(storage, "g-1", failover)
    await subscribe(storage, "g-2", failover)
    ids = await append(storage, 3)
    assert len((await dispatch(storage, "g-1", 2, sub_type=failover)).deliveries) == 2
    refused = await dispatch(storage, "g-2", 10, sub_type=failover)
    assert refused.status is DispatchStatus.NOT_ACTIVE
    await storage.call("ZADD", KEYS.consumers(SUB), 1, "g-1")  # g-1's lease ran out
    got = (await dispatch(storage, "g-2", 10, sub_type=failover)).deliveries
    assert [(d.stream_id, d.redelivery_count) for d in got] == [
        (ids[0], 1),
        (ids[1], 1),
        (ids[2], 0),
    ]
    assert await storage.call("ZSCORE", KEYS.consumers(SUB), "g-1") is None


async def test_cumulative_ack_moves_the_cursor(storage):
    await subscribe(storage, "g-1", sub_type=SubscriptionType.EXCLUSIVE)
    ids = await append(storage, 6)
    await dispatch(storage, "g-1", 2, sub_type=SubscriptionType.EXCLUSIVE)
    acked = await acks.cumulative_ack(storage, SUB_KEYS, subscription=SUB, upto=ids[3])
    assert acked == 2
    got = (await dispatch(storage, "g-1", 10, sub_type=SubscriptionType.EXCLUSIVE)).deliveries
    assert [d.stream_id for d in got] == ids[4:]


async def test_unsubscribe_refused_while_others_attached(storage):
    await subscribe(storage, "g-1")
    await subscribe(storage, "g-2")
    with pytest.raises(ConsumerBusy):
        await subscriptions.unsubscribe(storage, SUB_KEYS, subscription=SUB, consumer="g-1")
    await storage.call("ZREM", KEYS.consumers(SUB), "g-2")
    await subscriptions.unsubscribe(storage, SUB_KEYS, subscription=SUB, consumer="g-1")
    assert await storage.call("XINFO", "GROUPS", KEYS.stream) == []
    assert not await storage.call("EXISTS", KEYS.consumers(SUB), KEYS.subscriptions)


async def test_lease_renewal_reports_lost_consumers(storage):
    await subscribe(storage, "g-1")
    lost = await subscriptions.renew_leases(
        storage, SUB_KEYS, lease_ms=LEASE, consumers=["g-1", "g-9"]
    )
    assert lost == ["g-9"]


async def test_lane_fails_then_reconnects_after_connection_loss(storage):
    assert await storage.call("PING") == b"PONG"
    await storage.redis.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    outcomes = []
    for _ in range(3):
        try:
            outcomes.append(await storage.call("PING"))
        except StorageError:
            outcomes.append("error")
    # at most the first call sees the dead connection; the lane then reconnects by itself
    assert outcomes[-1] == b"PONG"
    assert outcomes.count("error") <= 1


async def test_many_pipelines_in_flight_keep_order(storage):
    key = "t:order"
    calls = []
    for i in range(2000):
        calls.append(storage.call("RPUSH", key, i))
        if i % 100 == 0:
            await asyncio.sleep(0)  # let a pipeline go out mid-stream
    assert [int(x) for x in await storage.call("LRANGE", key, 0, -1)] == list(range(2000))
    assert await asyncio.gather(*calls) == list(range(1, 2001))


async def test_script_flush_mid_stream_keeps_call_order(storage):
    """Script calls refused with NOSCRIPT across several in-flight pipelines are retried in
    their original order: on an Exclusive subscription the first call must win."""
    await storage.redis.script_flush()
    calls = []
    for i in range(30):
        calls.append(subscribe(storage, f"g-{i:02d}", sub_type=SubscriptionType.EXCLUSIVE))
        if i % 5 == 0:
            await asyncio.sleep(0)  # several pipelines in flight before the first reply
    replies = await asyncio.gather(*calls, return_exceptions=True)
    assert isinstance(replies[0], SubscribeReply)
    assert all(isinstance(r, ConsumerBusy) for r in replies[1:])


# -- unacked limits ---------------------------------------------------------------------------


async def test_a_consumer_gets_entries_up_to_its_unacked_limit_then_nothing(storage):
    await subscribe(storage, "g-1")
    await append(storage, 10)
    limits = (4, 0, 0, 0)
    first = await dispatch(storage, "g-1", 100, unacked=limits)
    assert len(first.deliveries) == 4
    refused = await dispatch(storage, "g-1", 100, unacked=limits)
    assert refused.status is DispatchStatus.BLOCKED
    assert (refused.unacked, refused.consumer_blocked) == ((4, 4), True)
    # blocked: refused until half (2) is left, then up to the limit again
    await storage.call("XACK", KEYS.stream, SUB, first.deliveries[0].stream_id)
    still = await dispatch(storage, "g-1", 100, unacked=(4, 1, 0, 0))
    assert still.status is DispatchStatus.BLOCKED
    await storage.call("XACK", KEYS.stream, SUB, first.deliveries[1].stream_id)
    again = await dispatch(storage, "g-1", 100, unacked=(4, 1, 0, 0))
    assert len(again.deliveries) == 2  # room: 4 - 2 held


async def test_the_subscription_limit_counts_real_consumers_only(storage):
    """Entries parked for redelivery (or scheduled, or waiting for a Key_Shared consumer)
    are at reserved consumers, not at a client: they do not count."""
    await subscribe(storage, "g-1")
    await subscribe(storage, "g-2")
    await append(storage, 10)
    limits = (0, 0, 6, 0)
    got = await dispatch(storage, "g-1", 4, unacked=limits)
    assert len(got.deliveries) == 4
    assert len((await dispatch(storage, "g-2", 100, unacked=limits)).deliveries) == 2
    refused = await dispatch(storage, "g-2", 100, unacked=limits)
    assert refused.status is DispatchStatus.BLOCKED
    assert (refused.unacked, refused.subscription_blocked) == ((2, 6), True)
    # g-1 gives its four back (parked): the subscription holds 2, under half of 6 (Pulsar
    # unblocks a subscription below half)
    await acks.redeliver(storage, SUB_KEYS, subscription=SUB, consumer="g-1", stream_ids=())
    again = await dispatch(storage, "g-2", 100, unacked=(0, 0, 6, 1))
    assert [d.stream_id for d in again.deliveries] == [d.stream_id for d in got.deliveries]


async def test_a_native_read_delivers_no_more_than_the_unacked_room(storage):
    await subscribe(storage, "g-1")
    ids = await append(storage, 10)
    reply = await dispatch(storage, "g-1", 100, native=True, unacked=(3, 0, 0, 0))
    assert [d.stream_id for d in reply.deliveries] == ids[:3]
    assert reply.settled is not None
    await reply.settled  # the rest was read and handed back
    assert [i for i, _ in await pending_at(storage, "g-1")] == ids[:3]


# -- the native read: dispatch.lua as control, XREADGROUP in the same pipeline ---------------


def read_natively_by(
    storage: Lane,
    uid: str,
    permits: int,
    per_entry: float = 1,
    sub_type: SubscriptionType = SubscriptionType.SHARED,
) -> asyncio.Future[DispatchReply]:
    return dispatch(storage, uid, permits, per_entry, sub_type, native=True)


async def append_delayed(storage: Lane, count: int, deliver_at: int) -> list[bytes]:
    fields = [BLOB, b"later", DELIVER_AT, deliver_at]
    return list(
        await asyncio.gather(
            *(storage.call("XADD", KEYS.stream, "*", *fields) for _ in range(count))
        )
    )


async def redis_now_ms(storage: Lane) -> int:
    seconds, micros = await storage.call("TIME")
    return int(seconds) * 1000 + int(micros) // 1000


async def pending_at(storage: Lane, consumer: str) -> list[tuple[bytes, int]]:
    rows = await storage.call("XPENDING", KEYS.stream, SUB, "-", "+", 100, consumer)
    return [(row[0], row[3]) for row in rows]


async def test_native_read_of_a_deleted_subscription_leaves_no_error_unread(storage, caplog):
    """The subscription deleted under the read (an unsubscribe from another client): the
    script and the XREADGROUP both fail with NOGROUP. The caller gets one error, also when
    it gave up on the result; asyncio must not find the other one never retrieved (the
    fuzzer saw it logged as an ERROR)."""
    await append(storage, 2)
    first = read_natively_by(storage, "g-1", permits=5)
    with pytest.raises(StorageError, match="NOGROUP"):
        await first
    abandoned = read_natively_by(storage, "g-1", permits=5)
    abandoned.cancel()
    await asyncio.sleep(0.05)  # both parts answered
    del first, abandoned
    gc.collect()
    assert "never retrieved" not in caplog.text


async def test_native_read_shares_one_pipeline_and_keeps_permits_in_messages(storage):
    await subscribe(storage, "g-1", sub_type=SubscriptionType.EXCLUSIVE)
    ids = await append(storage, 5, batch=10)  # 5 entries of 10 messages
    before = storage.pipelines_sent
    fut = read_natively_by(storage, "g-1", permits=25, sub_type=SubscriptionType.EXCLUSIVE)
    await asyncio.sleep(0)
    assert storage.pipelines_sent - before == 1  # the script and the read went out together
    reply = await fut
    # read 25 entries' worth (all 5); sent while a permit remains: 10 + 10 + 10
    assert [d.stream_id for d in reply.deliveries] == ids[:3]
    assert reply.drained is True  # the read found fewer entries than it asked for
    assert reply.settled is not None
    await reply.settled
    # the last two were un-read (the cursor had not moved): not pending, read again next
    assert [i for i, _ in await pending_at(storage, "g-1")] == ids[:3]
    again = await read_natively_by(storage, "g-1", 100, sub_type=SubscriptionType.EXCLUSIVE)
    assert [d.stream_id for d in again.deliveries] == ids[3:]
    assert again.settled is None
    assert [d.redelivery_count for d in again.deliveries] == [0, 0]


async def test_native_read_parks_what_it_hands_back_once_another_read_went_past(storage):
    """Two native reads of one tick on a Shared subscription: the first consumer's extra
    entries cannot be un-read (the second read moved the cursor past them), so they are
    parked with their count reset and handed out first, as never delivered."""
    await subscribe(storage, "g-1")
    await subscribe(storage, "g-2")
    ids = await append(storage, 6, batch=2)
    first = read_natively_by(storage, "g-1", permits=3)  # reads 3 entries, sends 2
    second = read_natively_by(storage, "g-2", permits=4)  # reads the other 3, sends 2
    one, two = await asyncio.gather(first, second)
    assert [d.stream_id for d in one.deliveries] == ids[:2]
    assert [d.stream_id for d in two.deliveries] == ids[3:5]
    assert one.settled is not None and two.settled is not None
    await asyncio.gather(one.settled, two.settled)
    # g-1's extra entry is parked; g-2's, the last read, is un-read
    assert await pending_at(storage, "~parked") == [(ids[2], 0)]
    third = await read_natively_by(storage, "g-2", permits=100)
    assert [(d.stream_id, d.redelivery_count) for d in third.deliveries] == [
        (ids[2], 0),
        (ids[5], 0),
    ]


async def test_native_read_schedules_entries_not_yet_due_on_shared_only(storage):
    await subscribe(storage, "g-1")
    now = await redis_now_ms(storage)
    (now_id,) = await append(storage, 1)
    later = await append_delayed(storage, 2, deliver_at=now + 60_000)
    reply = await read_natively_by(storage, "g-1", permits=10)
    assert [d.stream_id for d in reply.deliveries] == [now_id]
    assert reply.settled is not None
    settled = await reply.settled
    assert settled.wake_fleet is True  # the earliest scheduled time came forward
    assert 55_000 < settled.next_due_ms <= 60_000
    assert [i for i, _ in await pending_at(storage, "~delayed")] == later
    assert await storage.call("ZCARD", SUB_KEYS.delayed) == 2


async def test_native_read_schedules_delayed_entries_among_many_sent_ones(storage):
    """The entries sent are pending at the consumer too, between the delayed ones: all
    delayed ones are scheduled however many sent ones lie between them."""
    await subscribe(storage, "g-1")
    now = await redis_now_ms(storage)
    first = await append_delayed(storage, 1, deliver_at=now + 60_000)
    sent = await append(storage, 30)
    last = await append_delayed(storage, 1, deliver_at=now + 60_000)
    reply = await read_natively_by(storage, "g-1", permits=100)
    assert [d.stream_id for d in reply.deliveries] == sent
    assert reply.settled is not None
    await reply.settled
    assert [i for i, _ in await pending_at(storage, "~delayed")] == first + last
    assert [i for i, _ in await pending_at(storage, "g-1")] == sent


async def test_native_read_on_exclusive_delivers_delayed_entries_at_once(storage):
    await subscribe(storage, "g-1", sub_type=SubscriptionType.EXCLUSIVE)
    now = await redis_now_ms(storage)
    later = await append_delayed(storage, 2, deliver_at=now + 60_000)
    reply = await read_natively_by(storage, "g-1", 10, sub_type=SubscriptionType.EXCLUSIVE)
    assert [d.stream_id for d in reply.deliveries] == later
    assert reply.settled is None


async def test_gateway_dying_between_native_read_and_scheduling_never_delivers_early(storage):
    """The read put entries not yet due in g-1's pending list and its gateway died before
    settle_read scheduled them. Reaping parks them; the redelivery path then schedules
    them instead of handing them to g-2 early, and g-2 gets each once, when due."""
    await subscribe(storage, "g-1")
    await subscribe(storage, "g-2")
    now = await redis_now_ms(storage)
    due_at = now + 1_500
    later = await append_delayed(storage, 3, deliver_at=due_at)
    # what the dead gateway's pipeline did: the control script, then the read; no settle
    await dispatch(storage, "g-1", 0)  # renews g-1's lease, hands out nothing
    await storage.call("XREADGROUP", "GROUP", SUB, "g-1", "COUNT", 10, "STREAMS", KEYS.stream, ">")
    assert [i for i, _ in await pending_at(storage, "g-1")] == later
    await storage.call("ZADD", KEYS.consumers(SUB), 1, "g-1")  # its lease expires
    await subscriptions.reap_consumers(storage, SUB_KEYS, subscription=SUB)
    assert [i for i, _ in await pending_at(storage, "~parked")] == later

    early = await read_natively_by(storage, "g-2", permits=10)
    assert early.deliveries == []
    assert 0 < early.next_due_ms <= 1_500
    assert [i for i, _ in await pending_at(storage, "~delayed")] == later
    assert (await read_natively_by(storage, "g-2", permits=10)).deliveries == []

    while await redis_now_ms(storage) <= due_at:
        await asyncio.sleep(0.05)
    due = await read_natively_by(storage, "g-2", permits=10)
    assert [d.stream_id for d in due.deliveries] == later
    assert all(late >= 0 for late in due.lateness_ms)
    assert (await read_natively_by(storage, "g-2", permits=10)).deliveries == []


async def test_native_read_for_a_reaped_consumer_hands_everything_back(storage):
    await subscribe(storage, "g-1")
    await subscribe(storage, "g-2")
    ids = await append(storage, 3)
    await storage.call("ZADD", KEYS.consumers(SUB), 1, "g-1")  # g-1's lease expired...
    await subscriptions.reap_consumers(storage, SUB_KEYS, subscription=SUB)  # ...reaped
    reply = await read_natively_by(storage, "g-1", permits=10)
    assert reply.status is DispatchStatus.CONSUMER_GONE
    assert reply.settled is not None
    await reply.settled
    # the read re-created g-1 in the group; settling un-read its entries and removed it
    groups = await storage.call("XINFO", "CONSUMERS", KEYS.stream, SUB)
    assert b"g-1" not in [row[1] for row in groups]
    got = await read_natively_by(storage, "g-2", permits=10)
    assert [(d.stream_id, d.redelivery_count) for d in got.deliveries] == [(i, 0) for i in ids]


async def test_reaping_sweeps_a_group_consumer_that_is_not_registered(storage):
    """A native read for a reaped consumer whose gateway then died leaves entries pending
    at a consumer no lease names: reaping hands them back too."""
    await subscribe(storage, "g-2")
    ids = await append(storage, 2)
    await storage.call("XREADGROUP", "GROUP", SUB, "g-9", "COUNT", 10, "STREAMS", KEYS.stream, ">")
    handed = await subscriptions.reap_consumers(storage, SUB_KEYS, subscription=SUB)
    assert handed == 2
    names = [row[1] for row in await storage.call("XINFO", "CONSUMERS", KEYS.stream, SUB)]
    assert b"g-9" not in names
    got = await read_natively_by(storage, "g-2", permits=10)
    assert [d.stream_id for d in got.deliveries] == ids


async def test_a_pipeline_not_answered_in_time_fails_and_the_lane_goes_on(
    storage: Lane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pipeline has PIPELINE_TIMEOUT from when it was written: a Redis that
    does not answer in time fails the commands in flight (StorageError) and the lane
    reconnects; pipelines answered in time, one after the other, never add up to a
    timeout."""
    monkeypatch.setattr(lane_module, "PIPELINE_TIMEOUT", 0.5)
    for _ in range(3):  # 0.9 s in all, each well within its own 0.5 s
        assert await storage.call("BLPOP", "lane-timeout-list", 0.3) is None
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(StorageError, match="unavailable"):
        await storage.call("BLPOP", "lane-timeout-list", 3)
    assert 0.4 < loop.time() - started < 2.5
    assert await storage.call("PING") in (b"PONG", True)
