"""The cursor figures of admin internalStats (``internal_stats.lua``) against a real Redis.

A cursor's span runs from its first unacknowledged entry to the group's cursor (at most
10,000 entries); ``numberOfEntriesSinceFirstNotAckedMessage`` counts it (plus the read
position's entry) and ``individuallyDeletedMessages`` lists the acknowledged runs in it.
The script counts the span ledger by ledger and finds the runs from the pending ids, without
reading the entries in between: each test compares its answer with the figures computed by
their definition from every entry of the stream (:func:`defined`), on topics of several
ledgers, and the last one watches the commands the script runs (``MONITOR``).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import stats
from pulsar_gateway.core.storage.scripts.stats import CursorFacts

KEYS = KeySchema("t").topic("persistent://public/default/internal-stats")
STREAM = KEYS.stream
#: internal_stats.lua SCAN_LIMIT: the most entries a span counts
SCAN_LIMIT = 10_000


def _order(sid: bytes) -> tuple[int, int]:
    ledger, entry = sid.split(b"-")
    return int(ledger), int(entry)


def store(r: Any, ledgers: dict[int, int]) -> None:
    """``count`` entries in each ledger ``L`` of ``ledgers``: ids ``L-0``, ``L-1`` ... as
    ``append_entries.lua`` numbers them."""
    pipe = r.pipeline(transaction=False)
    for ledger, count in ledgers.items():
        for entry in range(count):
            pipe.xadd(STREAM, {"m": b"blob"}, id=f"{ledger}-{entry}")
    pipe.execute()


def subscribe_at(r: Any, name: str, cursor: str | None, unacked: Iterable[str] = ()) -> None:
    """Subscription ``name`` whose cursor is at ``cursor`` (None: at the start, nothing read)
    with ``unacked`` (at or before the cursor) pending and every other entry up to the cursor
    acknowledged."""
    r.xgroup_create(STREAM, name, id="0")
    if cursor is None:
        return
    delivered = [sid for sid, _ in r.xrange(STREAM, max=cursor)]
    r.xreadgroup(name, "c", {STREAM: ">"}, count=len(delivered))
    keep = {sid.encode() for sid in unacked}
    acked = [sid for sid in delivered if sid not in keep]
    for i in range(0, len(acked), 1000):
        r.xack(STREAM, name, *acked[i : i + 1000])


#: the cursor figures compared (CursorFacts attributes)
FIELDS = (
    "pending",
    "mark_delete",
    "first_unacked",
    "read_position",
    "since_first_unacked",
    "acked_ranges",
)


def figures(facts: CursorFacts) -> dict[str, Any]:
    return {field: getattr(facts, field) for field in FIELDS}


def defined(r: Any, name: str) -> dict[str, Any]:
    """A cursor's figures by their definition, from every entry of the stream."""
    group = next(g for g in r.xinfo_groups(STREAM) if g["name"] == name.encode())
    cursor = _order(group["last-delivered-id"])
    held = {p["message_id"] for p in r.xpending_range(STREAM, name, "-", "+", 1_000_000)}
    ids = [sid for sid, _ in r.xrange(STREAM)]
    first_unacked = min(held, key=_order) if held else b""
    span = [s for s in ids if held and _order(first_unacked) <= _order(s) <= cursor]
    span = span[:SCAN_LIMIT]
    after = [s for s in ids if _order(s) > cursor]
    if held:
        before = [s for s in ids if _order(s) < _order(first_unacked)]
    else:
        before = [s for s in ids if _order(s) <= cursor]
    runs: list[tuple[bytes, bytes]] = []
    prev, run_from = b"", b""
    for sid in span:
        if sid in held:
            if run_from:
                runs.append((run_from, prev))
                run_from = b""
        elif not run_from:
            run_from = prev
        prev = sid
    if run_from:
        runs.append((run_from, prev))
    return {
        "pending": len(held),
        "mark_delete": before[-1] if before else b"",
        "first_unacked": first_unacked,
        "read_position": after[0] if after else b"",
        "since_first_unacked": len(span) + (1 if after else 0),
        "acked_ranges": tuple(runs),
    }


async def cursors(storage: Lane, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    reply = await stats.internal_stats(storage, KEYS, subscriptions=names)
    assert reply is not None
    return {facts.name: figures(facts) for facts in reply.cursors}


def ranges(*pairs: tuple[str, str]) -> tuple[tuple[bytes, bytes], ...]:
    return tuple((after.encode(), last.encode()) for after, last in pairs)


async def test_spans_and_acknowledged_runs_across_ledgers(storage: Lane, redis_clean: Any) -> None:
    r = redis_clean
    store(r, {1000: 5, 2000: 4, 3000: 6})
    # retention removed the head: the first entry is 1000-1
    r.xtrim(STREAM, minid="1000-1", approximate=False)
    subscribe_at(r, "middle", "3000-3", ["1000-2", "1000-3", "2000-1", "3000-0", "3000-2"])
    subscribe_at(r, "edges", "3000-0", ["1000-4", "2000-0", "2000-3", "3000-0"])
    subscribe_at(r, "whole-ledger", "3000-5", ["1000-1", "3000-1"])
    subscribe_at(r, "acked", "2000-2")
    subscribe_at(r, "fresh", None)
    names = ["middle", "edges", "whole-ledger", "acked", "fresh"]
    got = await cursors(storage, names)
    assert got["middle"] == {
        "pending": 5,
        "mark_delete": b"1000-1",
        "first_unacked": b"1000-2",
        "read_position": b"3000-4",
        "since_first_unacked": 3 + 4 + 4 + 1,  # 1000-2..3000-3, and the read position
        "acked_ranges": ranges(
            ("1000-3", "2000-0"),  # across a ledger's end
            ("2000-1", "2000-3"),  # up to a ledger's end
            ("3000-0", "3000-1"),
            ("3000-2", "3000-3"),  # up to the cursor
        ),
    }
    # neighbours across ledger ends leave no run between them
    assert got["edges"]["acked_ranges"] == ranges(("2000-0", "2000-2"))
    assert got["edges"]["since_first_unacked"] == 1 + 4 + 1 + 1
    # a whole acknowledged ledger between two unacked entries; nothing before the first
    assert got["whole-ledger"]["mark_delete"] == b""
    assert got["whole-ledger"]["acked_ranges"] == ranges(("1000-1", "3000-0"), ("3000-1", "3000-5"))
    assert got["whole-ledger"]["since_first_unacked"] == 4 + 4 + 6
    assert got["acked"] == {
        "pending": 0,
        "mark_delete": b"2000-2",
        "first_unacked": b"",
        "read_position": b"2000-3",
        "since_first_unacked": 1,
        "acked_ranges": (),
    }
    assert got["fresh"]["mark_delete"] == b"" and got["fresh"]["read_position"] == b"1000-1"
    assert got["fresh"]["since_first_unacked"] == 1
    assert got == {name: defined(r, name) for name in names}


async def test_a_span_counts_at_most_scan_limit_entries(storage: Lane, redis_clean: Any) -> None:
    r = redis_clean
    store(r, {1000: 4000, 2000: 4000, 3000: 4000})
    subscribe_at(r, "long", "3000-3000", ["1000-0", "1000-10", "2000-5", "3000-2500"])
    got = (await cursors(storage, ["long"]))["long"]
    # the 10,000th entry from 1000-0 is 3000-1999: the span and its last run end there
    assert got["since_first_unacked"] == SCAN_LIMIT + 1
    assert got["acked_ranges"] == ranges(
        ("1000-0", "1000-9"), ("1000-10", "2000-4"), ("2000-5", "3000-1999")
    )
    assert got == defined(r, "long")


async def test_random_layouts_match_the_definition(storage: Lane, redis_clean: Any) -> None:
    r = redis_clean
    rng = random.Random(7)
    for _ in range(40):
        r.delete(STREAM)
        ledgers = {1000 * (i + 1): rng.randint(1, 8) for i in range(rng.randint(1, 5))}
        store(r, ledgers)
        ids = [sid.decode() for sid, _ in r.xrange(STREAM)]
        if rng.random() < 0.3:
            r.xtrim(STREAM, minid=ids[rng.randrange(len(ids))], approximate=False)
            ids = [sid.decode() for sid, _ in r.xrange(STREAM)]
        names = [f"s{i}" for i in range(4)]
        for name in names:
            if rng.random() < 0.15:
                subscribe_at(r, name, None)
                continue
            upto = rng.randrange(len(ids))
            unacked = [sid for sid in ids[: upto + 1] if rng.random() < 0.3]
            subscribe_at(r, name, ids[upto], unacked)
        assert await cursors(storage, names) == {name: defined(r, name) for name in names}


async def test_the_script_reads_single_entries_only(storage: Lane, redis_clean: Any) -> None:
    """Whatever a span's length, the script reads one entry at a time, a few per ledger and
    subscription: never the entries of the span."""
    r = redis_clean
    store(r, {1000: 3000, 2000: 3000, 3000: 3000})
    names = [f"s{i}" for i in range(5)]
    for i, name in enumerate(names):
        subscribe_at(r, name, f"3000-{2990 + i}", ["1000-0", f"2000-{i}", f"2000-{i + 2}"])
    with r.monitor() as monitor:
        got = await cursors(storage, names)
        r.echo("end of the script")
        commands = []
        while (seen := monitor.next_command())["command"] != "ECHO end of the script":
            if seen["client_type"] == "lua":
                commands.append(seen["command"].split())
    reads = [c for c in commands if c[0] in ("XRANGE", "XREVRANGE")]
    assert reads and all(c[-2:] == ["COUNT", "1"] for c in reads), reads
    # per subscription: its mark-delete and read positions, two reads per ledger of its span
    # and one per run across ledgers; two per ledger for the ledger list, the first and last
    ledgers = 3
    assert len(reads) <= len(names) * (2 + 3 * ledgers) + 2 * ledgers + 2
    assert got == {name: defined(r, name) for name in names}
    assert got["s0"]["since_first_unacked"] == 3000 + 3000 + 2991 + 1
