"""Ledgers: entry ids 0, 1, 2, ... within a ledger, ledgers rolled over as Pulsar rolls
them, ids totally ordered, and positions by time found from the entries' broker
timestamps (``append_entries.lua``, lib.lua ``first_stored_at``), against a real Redis and
the official client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pulsar

from pulsar_gateway.core.model.entry import BLOB, BROKER_TIME
from pulsar_gateway.core.model.ledger import LedgerRollover
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import SCRIPTS, subscriptions
from pulsar_gateway.core.storage.scripts.append import (
    AppendOutcome,
    AppendStatus,
    append_entries,
    entry_options,
)
from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread, broker_time

RECEIVE_MS = int(TIMEOUT * 1000)
KEYS = KeySchema().topic("persistent://public/default/ledgers")
SUB = "s"


def ids_of(message_ids: list[Any]) -> list[tuple[int, int]]:
    return [(m.ledger_id(), m.entry_id()) for m in message_ids]


def test_entry_ids_are_consecutive_within_a_ledger(client: Any, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    sent = ids_of([producer.send(b"m-%d" % i) for i in range(10)])
    ledger = sent[0][0]
    assert sent == [(ledger, entry) for entry in range(10)]
    # A client batch is one entry: its messages share the entry id, the next entry is +1.
    batching = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=3, batching_max_publish_delay_ms=60_000
    )
    futures: list[Any] = []
    for i in range(3):
        batching.send_async(b"b-%d" % i, lambda _res, mid: futures.append(mid))
    batching.flush()
    assert sorted(m.batch_index() for m in futures) == [0, 1, 2]
    assert set(ids_of(futures)) == {(ledger, 10)}


def test_ledgers_roll_over_when_full(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    redis_clean: Any,
    topic: str,
) -> None:
    gw = gateway_factory(
        managed_ledger_max_entries_per_ledger=3,
        managed_ledger_min_ledger_rollover_time_minutes=0,
    )
    client = client_factory(gw.url)
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    sent = ids_of([producer.send(b"m-%d" % i) for i in range(8)])
    ledgers = sorted({ledger for ledger, _ in sent})
    assert len(ledgers) == 3
    assert sent == [(ledgers[i // 3], i % 3) for i in range(8)]
    assert sent == sorted(sent)  # totally ordered, in send order
    received = [consumer.receive(RECEIVE_MS) for _ in range(8)]
    assert [m.data() for m in received] == [b"m-%d" % i for i in range(8)]
    assert ids_of([m.message_id() for m in received]) == sent
    # Every entry of a ledger was stored at or after the ledger's id, before the next one's.
    times = [broker_time(redis_clean, topic, m.message_id()) for m in received]
    for (ledger, _), at in zip(sent, times, strict=True):
        nxt = [later for later in ledgers if later > ledger]
        assert ledger <= at and (not nxt or at < nxt[0])
    # The admin API's internal stats list them, as Pulsar's managed ledger does.
    url = f"{gw.http_url}/admin/v2/persistent/public/default/{topic}/internalStats"
    status, stats = admin("GET", url)
    assert status == 200, stats
    assert [(le["ledgerId"], le["entries"]) for le in stats["ledgers"]] == [
        (ledgers[0], 3),
        (ledgers[1], 3),
        (ledgers[2], 2),
    ]
    assert stats["currentLedgerEntries"] == 2
    # the current ledger's size is the blob bytes appended to it
    assert stats["ledgers"][2]["size"] == stats["currentLedgerSize"] > 2 * len(b"m-6")
    assert stats["numberOfEntries"] == 8
    assert stats["lastConfirmedEntry"] == f"{ledgers[2]}:1"


def test_appends_from_two_gateways_and_checked_producers_share_the_sequence(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    first, second = gateway_factory(), gateway_factory()
    namespace = f"{first.http_url}/admin/v2/namespaces/public/default/deduplication"
    assert admin("POST", namespace, True)[0] == 204
    producers = [
        client_factory(gw.url).create_producer(topic, batching_enabled=False, producer_name=name)
        for gw, name in ((first, "a"), (second, "b"))
    ]
    sent: list[tuple[int, int]] = []
    for i in range(20):
        sent += ids_of([producers[i % 2].send(b"x-%d" % i)])
    ledger = sent[0][0]
    assert sorted(sent) == [(ledger, entry) for entry in range(20)]


# -- the scripts, directly ------------------------------------------------------------------


async def _append(storage: Lane, rollover: LedgerRollover | str, blob: bytes = b"x") -> str:
    (outcome,) = await _append_many(storage, rollover, [(blob, "")])
    assert outcome.status is AppendStatus.STORED
    return f"{outcome.ledger_id}-{outcome.entry_id}"


async def _append_many(
    storage: Lane, rollover: LedgerRollover | str, entries: list[tuple[bytes, str]]
) -> list[AppendOutcome]:
    limits = rollover if isinstance(rollover, str) else rollover.argument
    # (no publish time: these tests are about ids and broker timestamps)
    timed = [(blob, options, 0) for blob, options in entries]
    return await append_entries(storage, KEYS, rollover=limits, entries=timed)


def test_the_append_script_is_sent_without_the_shared_library() -> None:
    # lib.lua's closures would cost every append call ~5 µs of Redis CPU
    source = SCRIPTS["append_entries"].source
    assert "local function sub_keys" not in source
    assert "local function sub_keys" in SCRIPTS["dispatch"].source


async def test_one_call_appends_across_a_rollover_with_checks(
    storage: Lane, redis_clean: Any
) -> None:
    rollover = LedgerRollover(max_entries=3, min_rollover_minutes=0)
    dedup = [
        (b"d-%d" % seq, entry_options(sequence_id=seq, record=seq, producer_name="p,1"))
        for seq in (1, 2, 2, 3)  # the second 2 is a duplicate
    ]
    plain = [(b"x-%d" % i, "") for i in range(3)]
    batch = entry_options(num_messages=4, key_hash=7, deliver_at=123, chunk="0:u,1")
    results = await _append_many(storage, rollover, [*dedup, *plain, (b"b", batch)])
    assert results[2] == AppendOutcome(AppendStatus.DUPLICATE)  # nothing stored
    stored = [f"{r.ledger_id}-{r.entry_id}" for r in results if r.status is AppendStatus.STORED]
    assert len(stored) == len(results) - 1
    ledgers = sorted({sid.split("-")[0] for sid in stored})
    assert [sid.split("-") for sid in stored] == [[ledgers[i // 3], str(i % 3)] for i in range(7)]
    assert redis_clean.hget(KEYS.last_sequence_ids, "p,1") == b"3"
    ((_, fields),) = redis_clean.xrange(KEYS.stream, stored[-1], stored[-1])
    assert fields[b"n"] == b"4" and fields[b"h"] == b"7" and fields[b"d"] == b"123"
    assert fields[b"u"] == b"0:u,1"
    # fencing: an epoch that is not the topic's refuses that entry only
    redis_clean.set(KEYS.topic_epoch, "5")
    fenced = await _append_many(
        storage,
        rollover,
        [(b"f", entry_options(topic_epoch=4)), (b"ok", entry_options(topic_epoch=5))],
    )
    assert fenced[0] == AppendOutcome(AppendStatus.REFUSED)
    assert fenced[1].status is AppendStatus.STORED


async def test_a_ledger_older_than_the_maximum_rollover_time_is_closed(
    storage: Lane, redis_clean: Any
) -> None:
    # The limits as the script takes them: 1 ms maximum age, no minimum.
    rollover = "50000 2147483648 0 1"
    first = await _append(storage, rollover)
    await asyncio.sleep(0.005)
    second = await _append(storage, rollover)
    assert first.endswith("-0") and second.endswith("-0")
    assert int(second.split("-")[0]) > int(first.split("-")[0])


async def test_a_full_ledger_waits_for_the_minimum_rollover_time(storage: Lane) -> None:
    rollover = LedgerRollover(max_entries=2, min_rollover_minutes=10)
    sids = [await _append(storage, rollover) for _ in range(5)]
    # full after 2 entries, but younger than 10 minutes: the ledger stays open
    ledger = sids[0].split("-")[0]
    assert sids == [f"{ledger}-{i}" for i in range(5)]


async def test_a_ledger_full_by_size_is_closed(storage: Lane) -> None:
    rollover = LedgerRollover(max_size_mb=1, min_rollover_minutes=0)
    big = b"x" * (600 * 1024)
    sids = [await _append(storage, rollover, big) for _ in range(3)]
    ledgers = [s.split("-")[0] for s in sids]
    assert ledgers[0] == ledgers[1] != ledgers[2]  # 1.2 MB after two: the third rolls
    assert sids[2].endswith("-0")


async def test_a_stream_written_before_ledgers_continues_after_its_last_id(
    storage: Lane, redis_clean: Any
) -> None:
    future = int(time.time() * 1000) + 60_000
    redis_clean.xadd(KEYS.stream, {BLOB: b"old"}, id=f"{future}-7")
    sid = await _append(storage, LedgerRollover())
    assert sid == f"{future + 1}-0"


async def _group_id_after_seek(storage: Lane, redis_clean: Any, at: int) -> bytes:
    await subscriptions.seek(
        storage, KEYS.subscription(SUB), subscription=SUB, position=b"@%d" % at
    )
    (group,) = redis_clean.xinfo_groups(KEYS.stream)
    return bytes(group["last-delivered-id"])


async def test_positions_by_time_across_ledgers_gaps_and_old_entries(
    storage: Lane, redis_clean: Any
) -> None:
    # Entries stored before ledgers (ids are their times), then ledgers of 3 entries.
    base = int(time.time() * 1000) - 10_000
    for i, ms in enumerate((base, base, base + 5)):
        redis_clean.xadd(KEYS.stream, {BLOB: b"old-%d" % i}, id=f"{ms}-{i}")
    rollover = LedgerRollover(max_entries=3, min_rollover_minutes=0)
    for i in range(10):
        await _append(storage, rollover, b"new-%d" % i)
        await asyncio.sleep(0.002)
    redis_clean.xgroup_create(KEYS.stream, SUB, id="0")
    entries = redis_clean.xrange(KEYS.stream)
    # a gap inside a ledger: positions skip deleted entries
    redis_clean.xdel(KEYS.stream, entries[5][0])
    del entries[5]
    times = [int(f.get(BROKER_TIME) or sid.split(b"-")[0]) for sid, f in entries]
    assert times == sorted(times)
    # These entries have no publish time: their broker timestamp (the old ones' id time)
    # stands in for it, and a seek restarts after the newest entry published before the
    # time (PersistentMessageFinder), whichever ledger it is in.
    for at in sorted({*times, times[0] - 1, times[-1] + 1, *(t + 1 for t in times)}):
        first = next((i for i, t in enumerate(times) if t >= at), None)
        group = await _group_id_after_seek(storage, redis_clean, at)
        if first is None:  # everything is published before: after the last entry
            assert group == entries[-1][0], at
        else:  # just before the first entry published at or after `at`
            later = redis_clean.xrange(KEYS.stream, b"(" + group, "+", count=1)
            assert later[0][0] == entries[first][0], (at, group)
